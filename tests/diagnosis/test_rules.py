"""Rule paths no emulator scenario reaches, built from dicts: the rules are pure functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.diagnosis.engine import diagnose
from bot.diagnosis.remedies import finalizer_patch
from bot.domain.findings import Action, Cause, Gap, NamespaceState
from bot.domain.refs import ObjectRef
from bot.domain.snapshot import NamespaceSnapshot, ResourceType

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
DELETED = (NOW - timedelta(hours=3)).isoformat().replace("+00:00", "Z")
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, ("list", "delete"))


def _namespace(conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "uid": "ns-uid", "deletionTimestamp": DELETED, "labels": {"team": "a"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": conditions or []},
    }


def _configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "deletionTimestamp": DELETED, **meta},
    }


def _snapshot(**fields: Any) -> NamespaceSnapshot:
    base: dict[str, Any] = {
        "cluster": "c",
        "namespace": "ns",
        "observed_at": NOW,
        "namespace_object": _namespace(),
        "resource_types": (CONFIGMAPS,),
    }
    base.update(fields)
    return NamespaceSnapshot(**base)


def test_a_denying_webhook_is_named_from_the_controllers_condition() -> None:
    denied = 'Failed to delete all resource types, 1 remaining: admission webhook "deny.example.com" denied the request'
    condition = {
        "type": "NamespaceDeletionContentFailure",
        "status": "True",
        "reason": "ContentDeletionFailed",
        "message": denied,
    }
    webhook_config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policy"},
        "webhooks": [
            {
                "name": "deny.example.com",
                "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"]}],
                "clientConfig": {"url": "https://policy.example.com/validate"},
            }
        ],
    }
    snapshot = _snapshot(
        namespace_object=_namespace([condition]),
        contents={"configmaps": (_configmap("a"),)},
        webhook_configurations=(webhook_config,),
    )
    diagnosis = diagnose(snapshot)
    assert diagnosis.cause is Cause.WEBHOOK_BLOCKS_DELETE
    finding = diagnosis.findings[0]
    assert finding.summary == (
        "webhook deny.example.com (ValidatingWebhookConfiguration policy) denies the namespace controller's deletes: "
        'its backend answers and refuses (admission webhook "deny.example.com" denied the request)'
    )
    assert [r.action for r in finding.remedies][:2] == [Action.INVESTIGATE, Action.DELETE_WEBHOOK_CONFIGURATION]
    assert any("cannot check it" in e for e in finding.evidence)


def test_an_unreachable_conversion_webhook_blocks_its_resource() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "scope": "Namespaced",
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"service": {"namespace": "ops", "name": "converter"}}},
            },
        },
    }
    gap = Gap(what="list widgets.example.com in ns", reason="error", detail="conversion webhook failed")
    diagnosis = diagnose(_snapshot(crds=(crd,), gaps=(gap,)))
    assert diagnosis.complete is False
    webhook = [f for f in diagnosis.findings if f.cause is Cause.WEBHOOK_BLOCKS_DELETE]
    assert webhook, [f.summary for f in diagnosis.findings]
    assert "service/converter in ops does not exist" in webhook[0].evidence
    offered = {r.action for f in diagnosis.findings for r in f.remedies}
    assert Action.FORCE_FINALIZE_NAMESPACE not in offered


def test_foreground_deletion_waits_for_dependents_and_is_not_a_verdict() -> None:
    owner = _configmap("owner", finalizers=["foregroundDeletion"])
    dependent = _configmap(
        "child", ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "uid-owner"}]
    )
    dependent["metadata"].pop("deletionTimestamp")
    diagnosis = diagnose(_snapshot(contents={"configmaps": (owner, dependent)}))
    gc = [f for f in diagnosis.findings if "garbage collector" in f.summary]
    assert gc
    assert gc[0].cause is Cause.CONTENT_DELETING
    assert gc[0].blocking is False
    assert "1 dependents left" in gc[0].summary


def test_an_active_namespace_has_no_findings_and_a_missing_one_is_not_found() -> None:
    active = _namespace()
    del active["metadata"]["deletionTimestamp"]
    assert diagnose(_snapshot(namespace_object=active)).state is NamespaceState.ACTIVE
    gone = diagnose(_snapshot(namespace_object=None))
    assert gone.state is NamespaceState.NOT_FOUND
    assert gone.findings == ()


def test_a_stored_snapshot_diagnoses_the_same_after_a_json_round_trip() -> None:
    snapshot = _snapshot(contents={"configmaps": (_configmap("a", finalizers=["example.com/x"]),)})
    again = NamespaceSnapshot.from_json(snapshot.to_json())
    assert diagnose(again) == diagnose(snapshot)


def test_a_finalizer_patch_is_the_json_text_of_its_two_operations() -> None:
    """`finalizer_patch` writes the text out itself; it must be what json.dumps gives of the patch,
    whatever the finalizer holds (quotes, backslashes, non-ASCII, control characters)."""
    finalizers = ("example.com/cleanup", 'a"b\\c', "kubernetes", "ünïcödé/🧹", "tab\there\nnewline", "x" * 300)
    for held in ((), finalizers, finalizers[::-1]):
        for finalizer in finalizers:
            ref = ObjectRef("example.com/v1", "Widget", "w", "ns", finalizers=held)
            index = held.index(finalizer) if finalizer in held else 0
            patch = [
                {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
                {"op": "remove", "path": f"/metadata/finalizers/{index}"},
            ]
            assert finalizer_patch(ref, finalizer) == json.dumps(patch, separators=(",", ":"))
