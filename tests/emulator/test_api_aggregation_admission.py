"""The aggregator's view of APIServices, and admission webhooks that fail closed."""

from __future__ import annotations

from typing import Any

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, status_body, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

METRICS_APISERVICE: dict[str, Any] = {
    "apiVersion": "apiregistration.k8s.io/v1",
    "kind": "APIService",
    "metadata": {"name": "v1beta1.metrics.k8s.io"},
    "spec": {
        "group": "metrics.k8s.io",
        "version": "v1beta1",
        "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
        "insecureSkipTLSVerify": True,
    },
}


def _set_available(raw: Raw, status: str, reason: str, message: str) -> None:
    svc = raw.get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io").json
    svc["status"] = {
        "conditions": [
            {
                "type": "Available",
                "status": status,
                "lastTransitionTime": "2026-11-20T08:00:00Z",
                "reason": reason,
                "message": message,
            }
        ]
    }
    assert raw.put("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io/status", svc).status == 200


def test_unavailable_apiservice_answers_plain_text_503(admin: Raw, user: Raw) -> None:
    resp = admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE)
    assert resp.status == 201
    assert resp.json["status"] == {}
    # listed by /apis even though it is not available, with its own group document
    groups = {g["name"]: g for g in user.get("/apis").json["groups"]}
    assert groups["metrics.k8s.io"]["preferredVersion"] == {
        "groupVersion": "metrics.k8s.io/v1beta1",
        "version": "v1beta1",
    }
    assert user.get("/apis/metrics.k8s.io").json["name"] == "metrics.k8s.io"
    for path in ("/apis/metrics.k8s.io/v1beta1", "/apis/metrics.k8s.io/v1beta1/namespaces/x/pods"):
        resp = user.get(path)
        assert resp.status == 503
        assert resp.raw == b"service unavailable\n"
        assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
    _set_available(
        admin,
        "False",
        "MissingEndpoints",
        'endpointslices for service/metrics-server in "kube-system" have no addresses with port name ""',
    )
    assert user.get("/apis/metrics.k8s.io/v1beta1").status == 503
    _set_available(admin, "True", "Passed", "all checks passed")
    doc = user.get("/apis/metrics.k8s.io/v1beta1").json
    assert doc["groupVersion"] == "metrics.k8s.io/v1beta1"
    assert {r["name"]: r["kind"] for r in doc["resources"]} == {"nodes": "NodeMetrics", "pods": "PodMetrics"}
    pods = user.get("/apis/metrics.k8s.io/v1beta1/namespaces/x/pods").json
    assert pods["kind"] == "PodMetricsList"
    assert pods["items"] == []


def test_apiservice_validation(admin: Raw) -> None:
    bad = {
        **METRICS_APISERVICE,
        "metadata": {"name": "wrong"},
        "spec": {**METRICS_APISERVICE["spec"], "groupPriorityMinimum": 0},
    }
    resp = admin.post("/apis/apiregistration.k8s.io/v1/apiservices", bad)
    assert resp.status == 422
    assert resp.json["message"] == (
        'APIService.apiregistration.k8s.io "wrong" is invalid: [metadata.name: Invalid value: "wrong": must be '
        '`spec.version+"."+spec.group`, spec.groupPriorityMinimum: Invalid value: 0: must be positive and less '
        "than 20000]"
    )


def _webhook_config(
    failure_policy: str = "Fail", operations: tuple[str, ...] = ("DELETE",), **svc: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "guard"},
        "webhooks": [
            {
                "name": "guard.example.com",
                "clientConfig": {"service": {"namespace": "guard", "name": "guard-svc", "path": "/validate", **svc}},
                "rules": [
                    {
                        "operations": list(operations),
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                    }
                ],
                "failurePolicy": failure_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def _post_webhook(raw: Raw, cfg: dict[str, Any]) -> None:
    assert raw.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", cfg).status == 201


def test_fail_closed_webhook_blocks_deletes_for_every_identity(emu: Emulator, admin: Raw, user: Raw) -> None:
    make_ns(user, "app")
    make_cm(user, "app", "c")
    _post_webhook(admin, _webhook_config())
    for raw in (user, admin):
        resp = raw.delete("/api/v1/namespaces/app/configmaps/c")
        assert resp.status == 500
        msg = (
            'failed calling webhook "guard.example.com": failed to call webhook: Post '
            '"https://guard-svc.guard.svc:443/validate?timeout=10s": service "guard-svc" not found'
        )
        assert resp.json == status_body(
            500, "InternalError", f"Internal error occurred: {msg}", {"causes": [{"message": msg}]}
        )
    # deletecollection goes through the same admission
    resp = admin.delete("/api/v1/namespaces/app/configmaps")
    assert resp.status == 500
    # creates are not matched by the rule
    make_cm(user, "app", "d")
    # the service exists but has no ready endpoints
    make_ns(admin, "guard")
    admin.post(
        "/api/v1/namespaces/guard/services", {"metadata": {"name": "guard-svc"}, "spec": {"ports": [{"port": 443}]}}
    )
    resp = user.delete("/api/v1/namespaces/app/configmaps/c")
    assert resp.json["message"].endswith(': no endpoints available for service "guard-svc"')
    # a ready endpoint makes it reachable
    admin.post(
        "/apis/discovery.k8s.io/v1/namespaces/guard/endpointslices",
        {
            "metadata": {"name": "guard-svc-1", "labels": {"kubernetes.io/service-name": "guard-svc"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.5"], "conditions": {"ready": True}}],
        },
    )
    emu.knobs.unreachable_services.add("guard/guard-svc")
    resp = user.delete("/api/v1/namespaces/app/configmaps/c")
    assert resp.status == 500
    assert "connect: connection refused" in resp.json["message"]
    emu.knobs.unreachable_services.clear()
    emu.knobs.webhook_verdict["guard.example.com"] = "deny:configmaps are precious"
    resp = user.delete("/api/v1/namespaces/app/configmaps/c")
    assert resp.status == 400
    assert resp.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'admission webhook "guard.example.com" denied the request: configmaps are precious',
        "code": 400,
    }
    emu.knobs.webhook_verdict["guard.example.com"] = "allow"
    assert user.delete("/api/v1/namespaces/app/configmaps/c").status == 200


def test_ignore_policy_fails_open_and_dry_run_needs_side_effects_none(admin: Raw, user: Raw) -> None:
    make_ns(user, "app")
    make_cm(user, "app", "c")
    cfg = _webhook_config("Ignore", operations=("*",))
    _post_webhook(admin, cfg)
    assert user.patch("/api/v1/namespaces/app/configmaps/c", {"data": {"q": "1"}}).status == 200
    cfg["metadata"]["name"] = "effects"
    cfg["webhooks"][0]["name"] = "effects.example.com"
    cfg["webhooks"][0]["sideEffects"] = "Some"
    _post_webhook(admin, cfg)
    resp = user.delete("/api/v1/namespaces/app/configmaps/c?dryRun=All")
    assert resp.status == 400
    assert resp.json["message"] == 'admission webhook "effects.example.com" does not support dry run'


def test_namespace_selector_limits_the_webhook(admin: Raw, user: Raw) -> None:
    make_ns(user, "guarded", labels={"guard": "on"})
    make_ns(user, "free")
    make_cm(user, "guarded", "c")
    make_cm(user, "free", "c")
    cfg = _webhook_config()
    cfg["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"guard": "on"}}
    _post_webhook(admin, cfg)
    assert user.delete("/api/v1/namespaces/free/configmaps/c").status == 200
    assert user.delete("/api/v1/namespaces/guarded/configmaps/c").status == 500


def test_webhook_on_namespaces_blocks_namespace_delete(admin: Raw, user: Raw) -> None:
    make_ns(user, "victim")
    cfg = _webhook_config()
    cfg["webhooks"][0]["rules"][0]["resources"] = ["namespaces"]
    _post_webhook(admin, cfg)
    resp = user.delete("/api/v1/namespaces/victim")
    assert resp.status == 500
    assert user.get("/api/v1/namespaces/victim").json["status"]["phase"] == "Active"


def test_deleting_apiservices(admin: Raw, user: Raw) -> None:
    from tests.emulator._api_support import KIALI_CRD

    admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE)
    resp = admin.delete("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io")
    assert resp.status == 200
    assert resp.json["status"] == "Success"
    assert resp.json["details"]["group"] == "apiregistration.k8s.io"
    assert "metrics.k8s.io" not in [g["name"] for g in user.get("/apis").json["groups"]]
    assert user.get("/apis/metrics.k8s.io/v1beta1").status == 404
    # a CRD's APIService is re-created by the crdregistration controller
    admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", KIALI_CRD)
    admin.delete("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.kiali.io")
    assert user.get("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.kiali.io").status == 200
    # a built-in one registered at start-up is not
    admin.delete("/apis/apiregistration.k8s.io/v1/apiservices/v1.batch")
    assert user.get("/apis/apiregistration.k8s.io/v1/apiservices/v1.batch").status == 404
    assert "batch" not in [g["name"] for g in user.get("/apis").json["groups"]]
