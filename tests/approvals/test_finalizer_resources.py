"""The remediation role names its resources (issue 20, item 2): nsstuck may remove the finalizers of the
resources the finalizer catalogue knows, and of those a cluster adds (`finalizer_resources`, the chart's
remediation.finalizerResources), never of `*`. A remedy on anything else says so in words when its
button is clicked (and again before it would run), instead of being approved and then meeting the API
server's 403.

Through the running bot, against the Kubernetes emulator: a Widget (widgets.example.com, a type the
catalogue does not know) holds a terminating namespace with a finalizer whose controller is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import Api, base_cluster, run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB

pytestmark = pytest.mark.slow

NAMESPACE = "widget-shop"
WIDGET = f"/apis/example.com/v1/namespaces/{NAMESPACE}/widgets/w1"
FINALIZER = "widgets.example.com/cleanup"


def _stuck_widget(kube: Emulator) -> None:
    api = Api(kube)
    base_cluster(api, nodes=1)
    api.crd("example.com", "widgets", "Widget")
    api.namespace(NAMESPACE)
    run_for(kube, 5)
    api.custom(
        "example.com",
        "v1",
        "widgets",
        NAMESPACE,
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "finalizers": [FINALIZER]}},
    )
    run_for(kube, 10)
    api.delete_namespace(NAMESPACE)  # the widget controller was uninstalled first
    run_for(kube, 90, step=30)


def _diagnosed(flow: Flow) -> None:
    _stuck_widget(flow.kube)
    flow.namespace = NAMESPACE
    flow.diagnose()


def _patches(kube: Emulator) -> list[str]:
    return [line for line in kube.journal.lines("PATCH") if "/widgets/" in line]


def test_a_widget_the_role_does_not_cover_is_refused_in_words_and_nothing_is_filed(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path) as flow:
        _diagnosed(flow)
        assert flow.click_request("remove_finalizer").status == 200
        said = flow.ephemeral(ALICE, "may not patch")
        assert (
            "nsstuck may not patch widgets.example.com on prod-eu: add it to the cluster's finalizer_resources "
            "in the config, and grant it there" in said
        )
        assert flow.requests() == []  # nothing filed, nothing to approve
        assert _patches(kube_emulator) == []
        assert FINALIZER in Api(kube_emulator).http.get(WIDGET)["metadata"]["finalizers"]


def test_a_widget_the_cluster_adds_is_removed_after_approval(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    extra = "    finalizer_resources: [widgets.example.com]\n"
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, cluster_extra=extra) as flow:
        _diagnosed(flow)
        flow.request("remove_finalizer")
        request_id = int(flow.requests()[-1]["id"])
        assert flow.vote(request_id, BOB).status == 200
        assert flow.wait_status(request_id, "applied", "verified")["status"] in ("applied", "verified")
        assert len([p for p in _patches(kube_emulator) if "dryRun" not in p]) == 1


def test_a_request_filed_before_the_config_changed_is_refused_before_anything_is_sent(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    # filed while the cluster listed widgets; the bot restarted without it (the role was narrowed):
    # the executor says why, in the thread and the audit trail, and sends nothing
    extra = "    finalizer_resources: [widgets.example.com]\n"
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, cluster_extra=extra) as flow:
        _diagnosed(flow)
        flow.request("remove_finalizer")
        request_id = int(flow.requests()[-1]["id"])
        database = flow.database
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, database=database) as flow:
        flow.namespace = NAMESPACE
        assert flow.vote(request_id, BOB).status == 200
        row = flow.wait_status(request_id, "failed")
        assert "nsstuck may not patch widgets.example.com on prod-eu" in str(row["status_reason"])
        flow.wait_thread("nsstuck may not patch widgets.example.com")
        assert "failed" in flow.audit(request_id)
        assert _patches(kube_emulator) == []
        assert FINALIZER in Api(kube_emulator).http.get(WIDGET)["metadata"]["finalizers"]
