"""Removing one finalizer from a Namespace, wherever it is: from `metadata.finalizers` by a guarded
JSON patch, or from `spec.finalizers` by a PUT to the namespace's /finalize (metadata first when both)."""

from __future__ import annotations

import json

from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind


def _stale_reason(remedy: Remedy, ref: ObjectRef, obj: KubeObject) -> str | None:
    finalizer = remedy.finalizer or ""
    if finalizer not in finalizers_of(obj) + _ops.spec_finalizers(obj):
        return f"{finalizer} is no longer on {ref.display}"
    return None


def _operation(remedy: Remedy, target: ObjectRef, obj: KubeObject) -> Operation:
    finalizer = remedy.finalizer or ""
    if finalizer in finalizers_of(obj):
        return _ops.remove_metadata_finalizer(target, obj, finalizer)
    if finalizer in _ops.spec_finalizers(obj):
        left = [f for f in _ops.spec_finalizers(obj) if f != finalizer]
        return _ops.finalize(
            target,
            obj,
            left,
            summary=f"remove {finalizer} from the spec.finalizers of {target.display}",
            jq_filter=f".spec.finalizers -= {json.dumps([finalizer])}",
        )
    raise ValueError(f"{finalizer} is no longer on {target.display}")


def _took_effect(remedy: Remedy, before: KubeObject, now: KubeObject) -> bool:
    finalizer = remedy.finalizer or ""
    return finalizer not in finalizers_of(now) and finalizer not in _ops.spec_finalizers(now)


KIND = RemedyKind(
    action=Action.REMOVE_NAMESPACE_FINALIZER,
    doing="Removing a namespace finalizer",
    rules=(
        Rule(("",), ("namespaces",), ("get", "patch")),
        Rule(("",), ("namespaces/finalize",), ("update",)),
    ),
    min_approvals=1,
    needs_finalizer=True,
    needs_complete_diagnosis=False,
    rests_on="no running controller removes the namespace's finalizer",
    cause_gone=_ops.unless_proposed,
    needs_fresh_evidence=False,
    stale_reason=_stale_reason,
    operation=_operation,
    took_effect=_took_effect,
)
