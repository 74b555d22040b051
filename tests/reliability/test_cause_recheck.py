"""The cause is re-checked right before acting, not only the object (issue 18, item 2).

A remedy is approved against a diagnosis, maybe an hour old. Between the request and the approval
the cause goes away: the backend of a fail-closed webhook comes back, the aggregated API's backend is
reinstalled, the operator that owns a finalizer is reinstalled. The target objects themselves do not
change (a webhook configuration knows nothing of its backend's endpoints), so checking the object
alone lets the change through. Now the namespace is collected and diagnosed again right before the
write; when the cause is gone nothing is written, the thread says what came back, and the audit trail
records it as `stale` with that reason and what the re-check saw.

The tests share the module's bot (`flow`, `lane`: tests/approvals/_shared.py), each with its own Slack
workspace and cluster; the PostgreSQL one has the module's bot on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.approvals._flow import Flow
from tests.fakes.kubeapi.scenarios import Api
from tests.fakes.slackapi.pytest_plugin import BOB

WEBHOOK = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/policy-webhook"
APISERVICE = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io"
KIALI = "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis/kiali"


def _approve_and_settle(flow: Flow, request_id: int) -> dict[str, Any]:
    assert flow.vote(request_id, BOB).status == 200
    return flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)


def _stale_entry(flow: Flow, request_id: int) -> dict[str, Any]:
    rows = flow.query("SELECT event, details FROM audit_entries WHERE request_id = :id ORDER BY seq", id=request_id)
    events = [str(r["event"]) for r in rows]
    assert events[-1] == "stale", events
    assert "backed_up" not in events, events
    assert "execution_started" not in events, events
    details = rows[-1]["details"]
    return json.loads(details) if isinstance(details, str) else dict(details)


@pytest.mark.slow
def test_a_webhook_whose_backend_came_back_is_left_alone(lane: Callable[..., Flow], database_url: str) -> None:
    # the namespace controller's condition still names the webhook as failing (it is rewritten at the
    # controller's next sync), so a diagnosis made now still proposes the deletion: what ends it is
    # that the backend had no ready endpoint when it was requested and has one now
    flow = lane(postgres=database_url.startswith("postgresql"))
    kube_emulator = flow.kube
    request_id = flow.requested("webhook-blocks-delete", "delete_webhook_configuration")
    api = Api(kube_emulator)
    config_uid = api.http.get(WEBHOOK)["metadata"]["uid"]
    api.http.patch("/apis/apps/v1/namespaces/policy-system/deployments/policy-webhook", {"spec": {"replicas": 1}})
    kube_emulator.settle()
    assert "failed calling webhook" in json.dumps(api.http.get("/api/v1/namespaces/payments")["status"])

    row = _approve_and_settle(flow, request_id)

    assert row["status"] == "stale", row["status_reason"]
    reason = str(row["status_reason"])
    assert "the backend of webhook validate.policy.example.com (policy-webhook in policy-system)" in reason
    assert "policy-system) has 1 ready endpoint(s) again" in reason, reason
    assert reason.endswith("the ValidatingWebhookConfiguration policy-webhook was left alone"), reason
    assert api.http.get(WEBHOOK)["metadata"]["uid"] == config_uid, "the webhook configuration was deleted"
    details = _stale_entry(flow, request_id)
    assert details["reason"] == reason
    assert details["recheck"]["still_proposed"] is False
    assert details["recheck"]["state"] == "terminating"
    thread = flow.wait_thread(f"Remediation #{request_id}:")
    assert "ready endpoint(s) again" in thread


@pytest.mark.slow
def test_an_apiservice_whose_backend_is_serving_again_is_left_alone(flow: Flow) -> None:
    kube_emulator = flow.kube
    request_id = flow.requested("seed003-prometheus-adapter-service-not-found", "delete_apiservice")
    api = Api(kube_emulator)
    uid = api.http.get(APISERVICE)["metadata"]["uid"]
    # prometheus-adapter is reinstalled: the aggregator finds its backend and says it is Available
    https = {"name": "https", "containerPort": 6443, "protocol": "TCP"}
    api.deployment("monitoring", "prometheus-adapter", node="node-1", ports=[https])
    api.service(
        "monitoring",
        "prometheus-adapter",
        selector={"app": "prometheus-adapter"},
        ports=[{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}],
    )
    kube_emulator.settle()

    row = _approve_and_settle(flow, request_id)

    assert row["status"] == "stale", row["status_reason"]
    reason = str(row["status_reason"])
    assert reason.startswith("prometheus-adapter is serving again (APIService v1beta1.metrics.k8s.io is Available")
    assert reason.endswith("the APIService was left alone"), reason
    assert api.http.get(APISERVICE)["metadata"]["uid"] == uid, "the APIService was deleted"
    assert _stale_entry(flow, request_id)["reason"] == reason
    assert "prometheus-adapter is serving again" in flow.wait_thread(f"Remediation #{request_id}:")


@pytest.mark.slow
def test_a_finalizer_whose_controller_was_reinstalled_is_left_on(flow: Flow) -> None:
    kube_emulator = flow.kube
    request_id = flow.requested("seed003-kiali-orphaned-finalizer", "remove_finalizer")
    api = Api(kube_emulator)
    api.ensure_namespace("kiali-operator")
    api.deployment("kiali-operator", "kiali-operator", node="node-1", image="quay.io/kiali/kiali-operator:v1.89")
    kube_emulator.settle()

    row = _approve_and_settle(flow, request_id)

    assert row["status"] == "stale", row["status_reason"]
    reason = str(row["status_reason"])
    # the object was deleted days ago: a live controller that has not finished is no longer taken to be
    # at work (issue 37 §1), but its finalizer is not removed under it either
    assert "a live controller (kiali-operator) has not finished" in reason, reason
    assert reason.endswith("kiali.io/finalizer was left on kialis.kiali.io/kiali"), reason
    assert api.http.get(KIALI)["metadata"]["finalizers"] == ["kiali.io/finalizer"]
    assert _stale_entry(flow, request_id)["recheck"]["cause"] == "unknown"


@pytest.mark.slow
def test_a_cause_that_still_holds_is_acted_on(flow: Flow) -> None:
    kube_emulator = flow.kube
    # the same webhook, its backend still down: the re-check agrees and the configuration is deleted
    request_id = flow.requested("webhook-blocks-delete", "delete_webhook_configuration")
    row = _approve_and_settle(flow, request_id)
    assert row["status"] == "applied", row["status_reason"]
    assert Api(kube_emulator).http.get_or_none(WEBHOOK) is None
