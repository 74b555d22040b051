"""What a remedy kind declares (`RemedyKind`), so that nothing outside its module branches on its Action."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef

# (remedy, its target as the diagnosis saw it, that target as just read) -> why the remedy no longer
# fits, beyond the checks every kind shares (gone, re-created, changed)
StaleReason = Callable[[Remedy, ObjectRef, KubeObject], str | None]
# (remedy, the live object as a checked reference, the live object) -> the guarded API call
Plan = Callable[[Remedy, ObjectRef, KubeObject], Operation]
# (remedy, the target right before the change, the target now, still the same object) -> did it happen
TookEffect = Callable[[Remedy, KubeObject, KubeObject], bool]


@dataclass(frozen=True, kw_only=True)
class RemedyKind:
    """Everything about one cluster-changing remedy action that the rest of remediation asks about."""

    action: Action
    # the action as the subject of a sentence: "Force-finalizing needs complete evidence, ..."
    doing: str
    # the RBAC rules its API calls need, reads of its targets included (the Helm chart grants these)
    rules: tuple[Rule, ...]
    # approvals needed at least, whatever the cluster is configured with
    min_approvals: int
    # the remedy must name the finalizer it removes
    needs_finalizer: bool
    # it may only be requested from a complete diagnosis
    needs_complete_diagnosis: bool
    # right before acting, the namespace is diagnosed again and the evidence must be complete
    needs_fresh_evidence: bool
    stale_reason: StaleReason
    operation: Plan
    took_effect: TookEffect
