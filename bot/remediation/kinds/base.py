"""What a remedy kind declares (`RemedyKind`), so that nothing outside its module branches on its Action."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.domain.access import Rule
from bot.domain.changes import Operation
from bot.domain.findings import Action, Diagnosis, Remedy
from bot.domain.refs import KubeObject, ObjectRef
from bot.domain.snapshot import NamespaceSnapshot

# (remedy, its target as the diagnosis saw it, that target as just read) -> why the remedy no longer
# fits, beyond the checks every kind shares (gone, re-created, changed)
StaleReason = Callable[[Remedy, ObjectRef, KubeObject], str | None]
# (remedy, the live object as a checked reference, the live object) -> the guarded API call
Plan = Callable[[Remedy, ObjectRef, KubeObject], Operation]


@dataclass(frozen=True, kw_only=True)
class Recheck:
    """One target's cause, re-checked right before acting: the namespace collected and diagnosed again."""

    remedy: Remedy
    target: ObjectRef  # as the request names it
    live: KubeObject  # as just read, the same object (gone, re-created and changed are checked before)
    now: NamespaceSnapshot  # the namespace collected again
    fresh: Diagnosis  # ... and diagnosed
    then: NamespaceSnapshot | None  # what the remedy was requested from, while the database keeps it


# -> None while the cause the remedy rests on still holds; else why not, in the thread's words
# ("metrics-server is serving again: the APIService was left alone")
CauseGone = Callable[[Recheck], str | None]
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
    # right before acting the namespace is collected and diagnosed again, for every kind: the cause the
    # remedy rests on, in words, which `cause_gone` checks (the fresh diagnosis must still propose the
    # remedy for each target, `_ops.unless_proposed`, and a kind may ask more)
    rests_on: str
    # ... asked for every target: the kind's own reading of the fresh evidence
    cause_gone: CauseGone
    # ... and the fresh evidence must be complete, not only the evidence it was requested from
    needs_fresh_evidence: bool
    stale_reason: StaleReason
    operation: Plan
    took_effect: TookEffect
    # the verbs it uses on each target object itself: checked against nsstuck's own role for the
    # cluster before a request is filed and before it is carried out, so that a target the role does not
    # cover is said in words instead of met with the API server's 403 (empty: its rules always cover them)
    target_verbs: tuple[str, ...] = ()
