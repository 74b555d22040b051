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


def _rule(cfg: dict[str, Any], **fields: Any) -> dict[str, Any]:
    cfg["webhooks"][0]["rules"][0].update(fields)
    return cfg


def test_resource_star_slash_star_and_resource_slash_star_match_the_resource_itself(admin: Raw, user: Raw) -> None:
    """rules.go: `configmaps/*` matches configmaps with any subresource or none; `*` no subresource."""
    make_ns(user, "app")
    make_cm(user, "app", "c")
    _post_webhook(admin, _rule(_webhook_config(), resources=["configmaps/*"]))
    assert user.delete("/api/v1/namespaces/app/configmaps/c").status == 500  # failed on the old code (200)


def test_star_is_no_subresource_and_finalize_is_namespaces_finalize(admin: Raw, user: Raw) -> None:
    make_ns(user, "gone")
    assert user.delete("/api/v1/namespaces/gone").status == 200
    ns = user.get("/api/v1/namespaces/gone").json
    _post_webhook(admin, _rule(_webhook_config(operations=("UPDATE",)), apiGroups=["*"], resources=["*"]))
    ns["spec"]["finalizers"] = []
    assert admin.put("/api/v1/namespaces/gone/finalize", ns).status == 200  # `*` is no subresource
    make_ns(user, "gone2")
    assert user.delete("/api/v1/namespaces/gone2").status == 200
    ns = user.get("/api/v1/namespaces/gone2").json
    ns["spec"]["finalizers"] = []
    admin.delete("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guard")
    _post_webhook(admin, _rule(_webhook_config(operations=("UPDATE",)), resources=["namespaces/finalize"]))
    resp = admin.put("/api/v1/namespaces/gone2/finalize", ns)
    assert resp.status == 500
    assert 'failed calling webhook "guard.example.com"' in resp.json["message"]


def test_match_policy_equivalent_matches_another_served_version(emu: Emulator, admin: Raw, user: Raw) -> None:
    """A rule on kiali.io/v1 meets a write of kiali.io/v1alpha1 Kialis when the CRD serves both
    (matchPolicy Equivalent, the default); with matchPolicy Exact it does not."""
    import copy

    from tests.emulator._api_support import KIALI_CRD

    crd = copy.deepcopy(KIALI_CRD)
    v1 = {**crd["spec"]["versions"][0], "name": "v1", "storage": False}
    crd["spec"]["versions"].append(v1)
    assert admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).status == 201
    make_ns(user, "app")
    kiali = {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": {"name": "k"}}
    assert admin.post("/apis/kiali.io/v1alpha1/namespaces/app/kialis", kiali).status == 201
    cfg = _rule(_webhook_config(), apiGroups=["kiali.io"], apiVersions=["v1"], resources=["kialis"])
    cfg["webhooks"][0]["matchPolicy"] = "Exact"
    _post_webhook(admin, cfg)
    path = "/apis/kiali.io/v1alpha1/namespaces/app/kialis/k"
    assert admin.delete(f"{path}?dryRun=All").status == 200
    admin.delete("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guard")
    del cfg["webhooks"][0]["matchPolicy"]
    _post_webhook(admin, cfg)
    resp = admin.delete(path)
    assert resp.status == 500, resp.raw  # failed on the old code (200)


def test_mutating_webhooks_are_called_on_delete(admin: Raw, user: Raw) -> None:
    """rest.AdmissionToValidateObjectDeleteFunc admits (mutating webhooks) before it validates."""
    make_ns(user, "app")
    make_cm(user, "app", "c")
    cfg = _webhook_config()
    cfg["kind"] = "MutatingWebhookConfiguration"
    assert admin.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", cfg).status == 201
    resp = user.delete("/api/v1/namespaces/app/configmaps/c")
    assert resp.status == 500  # failed on the old code (200)
    # webhook configurations themselves are never sent to webhooks
    star = _rule(_webhook_config(operations=("*",)), apiGroups=["*"], apiVersions=["*"], resources=["*/*"])
    star["metadata"]["name"] = "everything"
    _post_webhook(admin, star)
    assert (
        admin.delete("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/everything").status == 200
    )
    assert admin.delete("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/guard").status == 200


def test_object_selector_matches_the_old_object_too(admin: Raw, user: Raw) -> None:
    """predicates/object: an update that removes the selected label is still sent to the webhook."""
    make_ns(user, "app")
    make_cm(user, "app", "c", labels={"guard": "on"})
    cfg = _webhook_config(operations=("UPDATE",))
    cfg["webhooks"][0]["objectSelector"] = {"matchLabels": {"guard": "on"}}
    _post_webhook(admin, cfg)
    resp = user.patch("/api/v1/namespaces/app/configmaps/c", {"metadata": {"labels": {"guard": None}}})
    assert resp.status == 500  # failed on the old code (200)
    make_cm(user, "app", "free")
    assert user.patch("/api/v1/namespaces/app/configmaps/free", {"data": {"q": "1"}}).status == 200
