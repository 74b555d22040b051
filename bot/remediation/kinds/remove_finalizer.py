"""Removing one finalizer from `metadata.finalizers` of an object (a custom resource, mostly) whose
controller is gone: a JSON patch guarded by the object's uid, resourceVersion and the finalizer's index."""

from __future__ import annotations

from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind


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
    # an orphaned finalizer can sit on any kind of object (custom resources above all), so this is the
    # one rule that cannot name its resources in advance; switch remediation off where that is too much
    rules=(Rule(("*",), ("*",), ("get", "patch")),),
    min_approvals=1,
    needs_finalizer=True,
    needs_complete_diagnosis=False,
    rests_on="no running controller removes the finalizer (the diagnosis still calls it orphaned)",
    cause_gone=_ops.unless_proposed,
    needs_fresh_evidence=False,
    stale_reason=_stale_reason,
    operation=_operation,
    took_effect=_took_effect,
)
