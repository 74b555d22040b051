"""A remedy that a fail-closed webhook with a dead backend would reject, through the running bot:
its Request button explains instead of filing, and the executor refuses it, with nothing sent, when
the webhook breaks between the request and the approval. Both tests share the module's bot (`flow`,
tests/approvals/conftest.py), each with its own workspace and cluster."""

from __future__ import annotations

from tests.approvals._flow import Flow
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB

WIDGET = "/apis/example.com/v1/namespaces/shop/widgets/storefront"
EXPLANATION = "the API server would reject this write (failed calling webhook)"


def test_request_on_a_blocked_remedy_explains_and_files_nothing(flow: Flow) -> None:
    kube_emulator = flow.kube
    flow.scenario("finalizer-blocked-by-validating-webhook")
    flow.diagnose()
    [blocked] = [
        r for f in flow.latest_report()["findings"] for r in f["remedies"] if r["action"] == "remove_finalizer"
    ]
    assert blocked["blocked_by"] == [
        {
            "kind": "ValidatingWebhookConfiguration",
            "configuration": "widget-operator",
            "webhook": "validate.widgets.example.com",
        }
    ]
    assert "failed calling webhook" in flow.thread_text()  # the report says so under the remedy
    before = KubeHTTP(kube_emulator.url, kube_emulator.admin_token).get(WIDGET)
    assert flow.click_request("remove_finalizer", user=ALICE).status == 200
    said = flow.ephemeral(ALICE, "Not filed")
    assert EXPLANATION in said
    assert "webhook validate.widgets.example.com (ValidatingWebhookConfiguration widget-operator)" in said
    assert flow.requests() == []
    assert flow.audit() == []
    after = KubeHTTP(kube_emulator.url, kube_emulator.admin_token).get(WIDGET)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # the fix ranked first, deleting the webhook configuration, is filed, approved and applied
    flow.request("delete_webhook_configuration")
    [request] = flow.requests()
    flow.vote(int(request["id"]), BOB)
    row = flow.wait_status(int(request["id"]), "applied", "failed", "stale")
    assert row["status"] == "applied", row["status_reason"]
    admin = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    config = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/widget-operator"
    assert admin.get_or_none(config) is None


def _guard(admin: KubeHTTP) -> None:
    """A fail-closed validating webhook on configmap updates whose backend answers (allows)."""
    admin.post(
        "/api/v1/namespaces/default/services", {"metadata": {"name": "guard"}, "spec": {"ports": [{"port": 443}]}}
    )
    admin.post(
        "/api/v1/namespaces/default/endpoints",
        {"metadata": {"name": "guard"}, "subsets": [{"addresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 443}]}]},
    )
    rule = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    admin.post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "metadata": {"name": "guard"},
            "webhooks": [
                {
                    "name": "guard.example.com",
                    "rules": [rule],
                    "clientConfig": {"service": {"namespace": "default", "name": "guard"}},
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )


def test_the_executor_refuses_a_remedy_the_webhook_blocks_by_now(flow: Flow) -> None:
    kube_emulator = flow.kube
    admin = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    flow.scenario("seed002-configmap-finalizer")
    # the webhook's backend answers when the remedy is requested...
    _guard(admin)
    flow.diagnose()
    flow.request("remove_finalizer")
    [request] = flow.requests()
    request_id = int(request["id"])
    [target] = [
        c
        for c in admin.list_items(f"/api/v1/namespaces/{flow.namespace}/configmaps")
        if c["metadata"].get("finalizers")
    ]
    path = f"/api/v1/namespaces/{flow.namespace}/configmaps/{target['metadata']['name']}"
    # ...and is gone by the time it is approved
    admin.delete("/api/v1/namespaces/default/services/guard")
    flow.vote(request_id, BOB)
    row = flow.wait_status(request_id, "failed", "applied", "stale")
    assert row["status"] == "failed"
    assert EXPLANATION in row["status_reason"]
    assert "webhook guard.example.com (ValidatingWebhookConfiguration guard)" in row["status_reason"]
    assert "nothing was changed" in row["status_reason"]
    flow.wait_thread(f"Remediation #{request_id}: Failed")
    # nothing was sent: no backup, no dry run, no write
    assert flow.audit(request_id) == ["requested", "approved", "failed"]
    after = admin.get(path)
    assert after["metadata"]["resourceVersion"] == target["metadata"]["resourceVersion"]
