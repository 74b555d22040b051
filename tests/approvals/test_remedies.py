"""Each remedy type that changes a cluster, requested and approved in Slack, executed against the
emulator; the cluster is then checked over HTTP for exactly the intended change. The tests share the
module's bot (`flow`, tests/approvals/conftest.py), each with its own workspace and cluster."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.changes import object_path
from bot.domain.findings import Action
from bot.domain.refs import ObjectRef
from bot.remediation.permissions import allowed
from tests.approvals._flow import Flow
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi.pytest_plugin import BOB, CAROL

CASES = [
    ("seed003-kiali-orphaned-finalizer", "remove_finalizer"),
    ("seed003-kubesphere-namespace-finalizer", "remove_namespace_finalizer"),
    ("namespace-spec-finalizer", "remove_namespace_finalizer"),
    ("namespace-spec-foreground-deletion", "remove_namespace_finalizer"),
    ("seed003-prometheus-adapter-service-not-found", "delete_apiservice"),
    ("webhook-blocks-delete", "delete_webhook_configuration"),
    ("pod-on-missing-node", "force_delete_pod"),
]


def _target(flow: Flow, action: str) -> tuple[ObjectRef, dict[str, Any]]:
    for finding in flow.latest_report()["findings"]:
        for remedy in finding["remedies"]:
            if remedy["action"] == action:
                return ObjectRef.from_json(remedy["targets"][0]), remedy
    raise AssertionError(action)


def _changed_as_intended(kube: Emulator, target: ObjectRef, remedy: dict[str, Any]) -> None:
    live = KubeHTTP(kube.url, kube.admin_token).get_or_none(object_path(target))
    action = remedy["action"]
    if action.startswith("delete_") or action == "force_delete_pod":
        assert live is None or live["metadata"]["uid"] != target.uid, live
        return
    finalizer = remedy["finalizer"]
    if live is None:  # the namespace (or object) went away once nothing held it
        return
    assert finalizer not in (live["metadata"].get("finalizers") or []), live["metadata"]
    assert finalizer not in ((live.get("spec") or {}).get("finalizers") or []), live.get("spec")


@pytest.mark.parametrize(("scenario", "action"), CASES, ids=[f"{a}:{s}" for s, a in CASES])
def test_each_remedy_type_runs_end_to_end(flow: Flow, scenario: str, action: str) -> None:
    kube_emulator = flow.kube
    flow.scenario(scenario)
    flow.diagnose()
    target, remedy = _target(flow, action)
    flow.request(action)
    [request] = flow.requests()
    kube_emulator.journal.clear()
    flow.vote(request["id"], CAROL)
    row = flow.wait_status(request["id"], "applied", "failed", "stale")
    assert row["status"] == "applied", row["status_reason"]
    _changed_as_intended(kube_emulator, target, remedy)
    # every write went through the verbs this remedy declares (what its RBAC grants), nothing else
    writes = [line.split()[:2] for line in kube_emulator.journal.lines() if not line.startswith("GET")]
    assert writes, "no write reached the API server"
    assert all(allowed(Action(action), method, path) for method, path in writes), writes
    assert flow.audit(request["id"]) == [
        "requested",
        "approved",
        "backed_up",
        "dry_run",
        "execution_started",
        "applied",
    ]
    [backup] = flow.query("SELECT * FROM backups WHERE request_id = :id", id=request["id"])
    assert (backup["kind"], backup["name"], backup["uid"]) == (target.kind, target.name, target.uid)
    flow.wait_thread(f"Remediation #{request['id']}: Done")


def test_force_finalize_needs_two_approvals_whatever_the_cluster_says(flow: Flow) -> None:
    """On the module's bot: `required_approvals: 1`, remediation_bot's default."""
    slack_emulator, kube_emulator = flow.slack, flow.kube
    namespace = flow.scenario("seed002-configmap-finalizer")
    flow.diagnose()
    message = flow.request("force_finalize_namespace")
    assert "Needs* 2 approvals" in slack_emulator.render(message)
    # high risk: Approve asks for confirmation in the client first
    approve = [e for b in message["blocks"] for e in b.get("elements") or () if e.get("action_id") == "nsstuck_approve"]
    assert approve
    assert approve[0]["confirm"]["title"]["text"] == "Approve a high-risk change?"
    [request] = flow.requests()
    assert request["required_approvals"] == 2

    flow.vote(request["id"], BOB)
    flow.slack.wait_for(lambda: "approved" in flow.audit(request["id"]) or None, timeout=10)
    assert flow.request_row(request["id"])["status"] == "pending"
    # the message is redrawn after the vote is committed (and audited): wait for it
    flow.slack.wait_for(
        lambda: "1 of 2" in slack_emulator.render(flow.request_message(request["id"])) or None,
        timeout=10,
        message="the request message does not show 1 of 2 approvals",
    )

    flow.vote(request["id"], BOB)  # a second click by the same person does not count twice
    assert "decided on this request already" in flow.ephemeral(BOB, "already")
    assert flow.request_row(request["id"])["status"] == "pending"

    flow.vote(request["id"], CAROL)
    row = flow.wait_status(request["id"], "applied", "failed", "stale")
    assert row["status"] == "applied", row["status_reason"]
    assert KubeHTTP(kube_emulator.url, kube_emulator.admin_token).get_or_none(f"/api/v1/namespaces/{namespace}") is None
