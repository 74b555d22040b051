"""Reading as the asking person (issue 39, part 1): on a cluster with `diagnose_as: requester`, a person
is answered only for a namespace their own Kubernetes identity may `get`, asked of the cluster by
SubjectAccessReview; what they are shown names no other namespace they may not get; their history and
App Home show only the incidents of namespaces they may get.

Through the running bot, against the Kubernetes emulator with its RBAC authorizer on: nsstuck's service
account reads everything and may create SubjectAccessReviews; the tenant (Alice, group tenants-a) may get
only team-a; the platform person (Bob, group platform) may get every namespace; Dave has no mapping and
no e-mail. team-a and team-b are both held by the metrics APIService, whose broken backend lives in a
third namespace, shared-metrics. One bot per backend, the steps in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.approvals._flow import JSON, Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers.kubelet import CRASH_LOOP_ANNOTATION
from tests.fakes.kubeapi.scenarios import Api, base_cluster, run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL

pytestmark = pytest.mark.slow

RBAC = "/apis/rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"
DAVE = "U0DDDDDDD"
INFRA = "shared-metrics"


def _grant(api: Api, name: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]]) -> None:
    role = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
    api.http.post(f"{RBAC}/clusterroles", role)
    binding = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    }
    api.http.post(f"{RBAC}/clusterrolebindings", binding)


def _tenants(kube: Emulator) -> None:
    """RBAC on, the grants above, and the two stuck tenant namespaces."""
    api = Api(kube)
    kube.enable_rbac()
    nsstuck = [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}]
    _grant(api, "nsstuck-read", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}], nsstuck)
    _grant(
        api,
        "nsstuck-requester-reviews",
        [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}],
        nsstuck,
    )
    team_a = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": ["team-a"]}]
    _grant(api, "tenant-a", team_a, [{"kind": "Group", "name": "tenants-a"}])
    every = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]
    _grant(api, "platform", every, [{"kind": "Group", "name": "platform"}])
    base_cluster(api)
    run_for(kube, 10)
    api.namespace(INFRA)
    api.service_account(INFRA, "metrics-server")
    api.deployment(
        INFRA,
        "metrics-server",
        node="node-1",
        ports=[{"name": "https", "containerPort": 10250, "protocol": "TCP"}],
        labels={"k8s-app": "metrics-server"},
        annotations={CRASH_LOOP_ANNOTATION: "true"},
        service_account="metrics-server",
    )
    api.service(
        INFRA,
        "metrics-server",
        selector={"k8s-app": "metrics-server"},
        ports=[{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}],
    )
    api.apiservice("metrics.k8s.io", "v1beta1", svc_ns=INFRA, svc_name="metrics-server")
    run_for(kube, 60, step=30)
    for ns in ("team-a", "team-b"):
        api.namespace(ns)
        api.configmap(ns, "settings", data={"LEVEL": "info"})
    run_for(kube, 10)
    api.delete_namespace("team-a")
    api.delete_namespace("team-b")
    run_for(kube, 600, step=120)


CONFIG = (
    "    diagnose_as: requester\n"
    "requesters:\n"
    f"  - {{slack: {ALICE}, user: alice, groups: [tenants-a]}}\n"
    "  - {email: bob@example.com, user: bob, groups: [platform]}\n"
)


def _ask(flow: Flow, namespace: str, user: str) -> None:
    delivery = flow.bot.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=user, channel=OPS_CHANNEL)
    assert delivery.status == 200, delivery.body


def _verdict(flow: Flow, namespace: str) -> JSON:
    def found() -> JSON | None:
        for message in flow.slack.channel_messages(OPS_CHANNEL):
            if f"prod-eu/{namespace}" in flow.slack.render(message) or namespace in flow.slack.render(message):
                return message
        return None

    return flow.slack.wait_for(found, timeout=30, message=f"no verdict for {namespace}")


def _runs(flow: Flow, namespace: str) -> list[JSON]:
    return flow.query("SELECT id, report, requested_by FROM diagnoses WHERE namespace = :ns", ns=namespace)


def test_a_tenant_is_answered_as_themselves(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, database_url: str
) -> None:
    slack_emulator.add_user(DAVE, "dave", real_name="Dave Doe")  # no e-mail, no mapping
    slack_emulator.channel(OPS_CHANNEL).members.append(DAVE)
    _tenants(kube_emulator)
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, database=database_url, cluster_extra=CONFIG) as flow:
        # the tenant gets the verdict of their namespace, naming no namespace they may not get
        _ask(flow, "team-a", ALICE)
        verdict = _verdict(flow, "team-a")
        thread = flow.slack.wait_for(
            lambda: ((m := flow.slack.thread(OPS_CHANNEL, verdict["ts"])) and [verdict, *m]) or None,
            timeout=30,
            message="no report under the verdict",
        )
        shown = "\n".join(flow.slack.render(m) for m in thread)
        assert "metrics" in shown, shown
        assert "APIService" in shown, shown
        assert INFRA not in shown, shown
        assert "team-b" not in shown, shown
        assert "another namespace" in shown, shown
        # the record is nsstuck's, whole
        (run,) = _runs(flow, "team-a")
        assert INFRA in str(run["report"])
        assert run["requested_by"] == ALICE

        # refused for a namespace they may not get: told privately, nothing diagnosed or recorded
        _ask(flow, "team-b", ALICE)
        said = flow.ephemeral(ALICE, "may not get namespace")
        assert "`alice`" in said or "alice" in said
        # an unmapped person: refused in words
        _ask(flow, "team-a", DAVE)
        flow.ephemeral(DAVE, "has no Kubernetes identity for you")
        assert _runs(flow, "team-b") == []
        assert len(_runs(flow, "team-a")) == 1
        assert [m["ts"] for m in flow.slack.channel_messages(OPS_CHANNEL)] == [verdict["ts"]]

        # the platform person (mapped by their Slack e-mail) may get team-b: its incident is recorded, whole
        _ask(flow, "team-b", BOB)
        _verdict(flow, "team-b")
        assert [r["requested_by"] for r in _runs(flow, "team-b")] == [BOB]
        assert all("team-b" not in flow.slack.render(m) for m in thread)

        # history: the tenant sees team-a's incident only, the platform person both
        mine = flow.bot.driver.slash_command("/nsstuck", "history prod-eu", user=ALICE, channel=OPS_CHANNEL)
        assert "team-a" in mine.body, mine.body
        assert "team-b" not in mine.body, mine.body
        theirs = flow.bot.driver.slash_command("/nsstuck", "history prod-eu", user=BOB, channel=OPS_CHANNEL)
        assert "team-a" in theirs.body, theirs.body
        assert "team-b" in theirs.body, theirs.body
        nobody = flow.bot.driver.slash_command("/nsstuck", "history", user=DAVE, channel=OPS_CHANNEL)
        assert "team-a" not in nobody.body, nobody.body
        assert "team-b" not in nobody.body, nobody.body

        # the App Home: the same rule
        for user, present, absent in ((ALICE, "team-a", "team-b"), (BOB, "team-b", None)):
            assert flow.bot.driver.event(flow.slack.payloads.app_home_opened(user)).status == 200
            view = flow.slack.wait_for(lambda u=user: flow.slack.home_view(u), timeout=10, message="no Home")
            text = str(view)
            assert present in text, text
            if absent is not None:
                assert absent not in text, text
