"""Force-finalizing a Namespace: emptying its `spec.finalizers` by a PUT to /finalize, which orphans
whatever is still in it. The strictest kind: two approvals at least, a complete diagnosis to be
requested, and complete evidence again right before it runs."""

from __future__ import annotations

from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind


def _stale_reason(remedy: Remedy, ref: ObjectRef, obj: KubeObject) -> str | None:
    if not _ops.spec_finalizers(obj):
        return f"{ref.display} has no spec.finalizers left: it is already finalized"
    return None


def _operation(remedy: Remedy, target: ObjectRef, obj: KubeObject) -> Operation:
    current = ", ".join(_ops.spec_finalizers(obj)) or "none"
    return _ops.finalize(
        target,
        obj,
        [],
        summary=f"force-finalize {target.display}: empty its spec.finalizers (now {current})",
        jq_filter=".spec.finalizers = []",
    )


def _took_effect(remedy: Remedy, before: KubeObject, now: KubeObject) -> bool:
    return not _ops.spec_finalizers(now)


KIND = RemedyKind(
    action=Action.FORCE_FINALIZE_NAMESPACE,
    doing="Force-finalizing",
    rules=(
        Rule(("",), ("namespaces",), ("get",)),
        Rule(("",), ("namespaces/finalize",), ("update",)),
    ),
    # force-finalizing orphans whatever is left in the namespace: never on one person's word
    min_approvals=2,
    needs_finalizer=False,
    needs_complete_diagnosis=True,
    rests_on="something still blocks the namespace, on complete evidence",
    cause_gone=_ops.unless_proposed,
    needs_fresh_evidence=True,
    stale_reason=_stale_reason,
    operation=_operation,
    took_effect=_took_effect,
)
