"""bot/diagnosis/webhooks.py on snapshots built from dicts: the webhooks it leaves out, and those it names
without anything left to show.

(tests/diagnosis/test_rules.py and the scenarios have the common paths: a webhook that denies, one whose
backend is gone, an unreachable conversion webhook with its listing gap.)
"""

from __future__ import annotations

from typing import Any

from bot.diagnosis import webhooks
from bot.diagnosis.context import Context
from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Cause, Finding, Gap
from bot.domain.refs import ClusterName
from bot.domain.snapshot import NamespaceSnapshot, ResourceType
from tests.diagnosis.test_rules import CONFIGMAPS, NOW, _configmap, _namespace

SECRETS = ResourceType("", "v1", "secrets", "Secret", True, ("list", "delete", "deletecollection"))
# no deletecollection among its verbs: the namespace controller deletes its objects one by one
EVENTS = ResourceType("", "v1", "events", "Event", True, ("list", "delete"))
NODES = ResourceType("", "v1", "nodes", "Node", False, ("list", "delete", "deletecollection"))
WIDGETS = ResourceType("example.com", "v1", "widgets", "Widget", True, ())
ALL = (SECRETS, EVENTS, NODES, WIDGETS)
EVERYTHING = [{"operations": ["DELETE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]


def _config(*hooks: dict[str, Any], name: str = "guard") -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


def _hook(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "rules": EVERYTHING, "clientConfig": {"url": f"https://{name}/validate"}, **fields}


def _context(**fields: Any) -> Context:
    base: dict[str, Any] = {
        "cluster": "c",
        "namespace": "ns",
        "observed_at": NOW,
        "namespace_object": _namespace(),
        "resource_types": ALL,
    }
    base.update(fields)
    return Context(NamespaceSnapshot(**base))


def _service(namespace: str, name: str, *, ready: int) -> tuple[dict[str, Any], dict[str, Any]]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-x", "namespace": namespace, "labels": {"kubernetes.io/service-name": name}},
        "endpoints": [{"addresses": [f"10.0.0.{i + 1}"], "conditions": {"ready": True}} for i in range(ready)],
    }
    return service, endpoints


# --- delete-collection suspects ------------------------------------------------------------------


def test_the_collections_a_webhook_receives_are_the_namespaced_types_that_take_a_delete_collection() -> None:
    ctx = _context()
    # events lack deletecollection, nodes are not namespaced; a type whose verbs are not known is assumed to
    assert webhooks.collections_intercepted(ctx, _hook("all.example.com")) == ["secrets", "widgets.example.com"]


def test_a_webhook_with_an_object_selector_never_sees_a_delete_collection() -> None:
    ctx = _context()
    selecting = _hook("labelled.example.com", objectSelector={"matchLabels": {"protected": "true"}})
    assert webhooks.collections_intercepted(ctx, selecting) == []
    # an empty selector selects everything
    assert webhooks.collections_intercepted(ctx, _hook("empty.example.com", objectSelector={})) == [
        "secrets",
        "widgets.example.com",
    ]
    assert webhooks.collection_suspects(ctx, "20m") == []
    ctx = _context(webhook_configurations=(_config(selecting),))
    assert webhooks.collection_suspects(ctx, "20m") == []


def test_a_webhook_that_fails_open_is_no_suspect() -> None:
    ctx = _context(webhook_configurations=(_config(_hook("open.example.com", failurePolicy="Ignore")),))
    assert webhooks.collection_suspects(ctx, "20m") == []


def test_a_fail_closed_url_webhook_is_the_likely_refusal_and_its_dry_run_is_offered() -> None:
    ctx = _context(webhook_configurations=(_config(_hook("all.example.com")),))
    (finding,) = webhooks.collection_suspects(ctx, "20m")
    assert finding.cause is Cause.WEBHOOK_BLOCKS_DELETE
    assert finding.summary == (
        "webhook all.example.com (ValidatingWebhookConfiguration guard) receives the namespace controller's "
        "delete-collection of secrets, widgets.example.com; its backend answers, and nothing else explains the "
        "namespace: it is the likely refusal (no condition quotes it)"
    )
    assert "the webhook calls https://all.example.com/validate; nsstuck cannot check it" in finding.evidence
    first, delete = finding.remedies
    assert first.action is Action.INVESTIGATE
    assert first.commands[0] == "kubectl delete --raw '/api/v1/namespaces/ns/secrets?dryRun=All'"
    assert delete.action is Action.DELETE_WEBHOOK_CONFIGURATION


def test_with_no_conditions_and_nothing_else_the_engine_names_the_url_webhook() -> None:
    snapshot = NamespaceSnapshot(
        cluster=ClusterName("c"),
        namespace="ns",
        observed_at=NOW,
        namespace_object=_namespace(),
        resource_types=(SECRETS,),
        webhook_configurations=(_config(_hook("all.example.com")),),
    )
    found = [f for f in diagnose(snapshot).findings if f.cause is Cause.WEBHOOK_BLOCKS_DELETE]
    assert [f.summary.split(" (")[0] for f in found] == ["webhook all.example.com"]


# --- webhooks the condition names ----------------------------------------------------------------


def _denied(name: str) -> dict[str, str]:
    return {
        "type": "NamespaceDeletionContentFailure",
        "status": "True",
        "reason": "ContentDeletionFailed",
        "message": f'Failed to delete all resource types, 1 remaining: admission webhook "{name}" denied the request',
    }


def test_a_denying_webhook_whose_rules_match_nothing_left_is_named_without_leftovers() -> None:
    # the condition quotes it, but its rules are about deployments and only configmaps are left
    hook = _hook(
        "deny.example.com",
        rules=[{"operations": ["DELETE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}],
    )
    ctx = _context(
        namespace_object=_namespace([_denied("deny.example.com")]),
        resource_types=(CONFIGMAPS,),
        contents={"configmaps": (_configmap("a"),)},
        webhook_configurations=(_config(hook),),
    )
    (finding,) = webhooks.findings(ctx)
    assert finding.summary.startswith("webhook deny.example.com (ValidatingWebhookConfiguration guard) denies")
    assert (
        "ValidatingWebhookConfiguration guard, webhook deny.example.com: failurePolicy Fail, intercepts DELETE of "
        "resources in this namespace"
    ) in finding.evidence
    assert not any(e.startswith("left in the namespace") for e in finding.evidence)
    assert [o.kind for o in finding.objects] == ["ValidatingWebhookConfiguration"]


# --- conversion webhooks -------------------------------------------------------------------------


def _crd(client: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "scope": "Namespaced",
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client}},
        },
    }


GAP = Gap(what="list widgets.example.com in ns", reason="error", detail="conversion webhook failed")
CONVERTER = {"service": {"namespace": "ops", "name": "converter"}}


def _conversion(ctx: Context) -> list[Finding]:
    return [f for f in webhooks.findings(ctx) if f.summary.startswith("the conversion webhook")]


def test_a_conversion_webhook_whose_service_is_gone_blocks_only_where_its_resource_is_seen() -> None:
    # nothing of widgets is in the namespace and its listing did not fail: not what blocks
    assert _conversion(_context(crds=(_crd(CONVERTER),))) == []
    (finding,) = _conversion(_context(crds=(_crd(CONVERTER),), gaps=(GAP,)))
    assert finding.summary == (
        "the conversion webhook of widgets.example.com cannot answer, so widgets.example.com cannot be listed "
        "or deleted"
    )
    assert "service/converter in ops does not exist" in finding.evidence


def test_a_conversion_webhook_whose_backend_answers_or_cannot_be_followed_is_not_named() -> None:
    service, endpoints = _service("ops", "converter", ready=1)
    healthy = _context(crds=(_crd(CONVERTER),), gaps=(GAP,), services=(service,), endpoint_slices=(endpoints,))
    assert _conversion(healthy) == []
    # an outside URL: nsstuck cannot follow it, so it says nothing of it
    assert _conversion(_context(crds=(_crd({"url": "https://convert.example.com"}),), gaps=(GAP,))) == []
    # the same service with no ready endpoint is named
    service, endpoints = _service("ops", "converter", ready=0)
    down = _context(crds=(_crd(CONVERTER),), gaps=(GAP,), services=(service,), endpoint_slices=(endpoints,))
    (finding,) = _conversion(down)
    assert "service/converter in ops has 0 ready and 0 not-ready endpoint addresses (endpointslices)" in (
        finding.evidence
    )
