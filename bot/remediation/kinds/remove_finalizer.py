"""Removing one finalizer from `metadata.finalizers` of an object (a custom resource, mostly) whose
controller is gone: a JSON patch guarded by the object's uid, resourceVersion and the finalizer's index."""

from __future__ import annotations

from bot.diagnosis import catalogue
from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind

# what a finalizer of the catalogue may sit on without holding a namespace (cluster-scoped), and the
# namespace itself (remove_namespace_finalizer patches that): never part of this remedy's role
_NOT_IN_A_NAMESPACE = frozenset(
    {
        ("", "namespaces"),
        ("", "nodes"),
        ("", "persistentvolumes"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    }
)


def catalogue_rules() -> tuple[Rule, ...]:
    """`get` and `patch` on exactly the resources the finalizer catalogue's finalizers sit on, one rule
    per API group: no `*`, no subresource (RBAC's `*` would also match subresources such as
    pods/ephemeralcontainers). What else a cluster needs is added by its `finalizer_resources`."""
    by_group: dict[str, list[str]] = {}
    for group, resource in catalogue.resources():
        if (group, resource) not in _NOT_IN_A_NAMESPACE:
            by_group.setdefault(group, []).append(resource)
    return tuple(Rule((group,), tuple(sorted(names)), ("get", "patch")) for group, names in sorted(by_group.items()))


def _stale_reason(remedy: Remedy, ref: ObjectRef, obj: KubeObject) -> str | None:
    finalizer = remedy.finalizer or ""
    if finalizer not in finalizers_of(obj):
        return f"{finalizer} is no longer on {ref.display}"
    return None


def _operation(remedy: Remedy, target: ObjectRef, obj: KubeObject) -> Operation:
    return _ops.remove_metadata_finalizer(target, obj, remedy.finalizer or "")


def _took_effect(remedy: Remedy, before: KubeObject, now: KubeObject) -> bool:
    return (remedy.finalizer or "") not in finalizers_of(now)


KIND = RemedyKind(
    action=Action.REMOVE_FINALIZER,
    doing="Removing a finalizer",
    # the resources the catalogue's finalizers sit on; an orphaned finalizer on anything else needs the
    # cluster's `finalizer_resources` (remediation.finalizerResources in the chart)
    rules=catalogue_rules(),
    min_approvals=1,
    needs_finalizer=True,
    needs_complete_diagnosis=False,
    rests_on="no running controller removes the finalizer (the diagnosis still calls it orphaned)",
    cause_gone=_ops.unless_proposed,
    needs_fresh_evidence=False,
    stale_reason=_stale_reason,
    operation=_operation,
    took_effect=_took_effect,
    target_verbs=("get", "patch"),
)
