"""Force-deleting a pod on a node that is gone (grace period 0), with the uid and resourceVersion
checked as DeleteOptions preconditions."""

from __future__ import annotations

from bot.diagnosis.reading import node_ready_state
from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef, meta, name_of
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import Recheck, RemedyKind


def _operation(remedy: Remedy, target: ObjectRef, obj: KubeObject) -> Operation:
    return _ops.delete(target, force=True)


def _cause_gone(check: Recheck) -> str | None:
    if _ops.still_proposed(check):
        return None
    node = str((check.live.get("spec") or {}).get("nodeName") or "")
    if node and node in check.now.nodes and node_ready_state(check.now.nodes[node])[0]:
        pod = name_of(check.live)
        return f"node {node} is Ready again, so its kubelet can finish deleting pod {pod}: it was left alone"
    return _ops.no_longer_proposed(check)


def _took_effect(remedy: Remedy, before: KubeObject, now: KubeObject) -> bool:
    if _ops.deletion_started(before, now):
        return True
    # a pod that was already terminating (and still has finalizers) keeps its deletionTimestamp;
    # the forced delete shows as its grace period dropping to 0
    return meta(now).get("deletionGracePeriodSeconds") == 0 and meta(before).get("deletionGracePeriodSeconds") != 0


KIND = RemedyKind(
    action=Action.FORCE_DELETE_POD,
    doing="Force-deleting a pod",
    rules=(Rule(("",), ("pods",), ("get", "delete")),),
    min_approvals=1,
    needs_finalizer=False,
    needs_complete_diagnosis=False,
    rests_on="the pod's node still cannot confirm its deletion (NotReady or gone)",
    cause_gone=_cause_gone,
    needs_fresh_evidence=False,
    stale_reason=_ops.nothing_else_to_recheck,
    operation=_operation,
    took_effect=_took_effect,
    target_verbs=("get", "delete"),
)
