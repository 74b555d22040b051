"""Deleting an APIService whose backend is gone (it blocks discovery, and so the namespace's
deletion), with the uid and resourceVersion checked as DeleteOptions preconditions."""

from __future__ import annotations

from bot.domain.access import Rule
from bot.domain.findings import Action
from bot.domain.refs import condition, name_of
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import Recheck, RemedyKind


def _cause_gone(check: Recheck) -> str | None:
    """The aggregator's own verdict (the Available condition) and discovery, through the diagnosis."""
    if _ops.still_proposed(check):
        return None
    name = name_of(check.live)
    # the APIService as collected just now, if the collection saw it; else as the re-check read it
    now = next((a for a in check.now.apiservices if name_of(a) == name), check.live)
    available = condition(now, "Available") or {}
    service = (now.get("spec") or {}).get("service") or {}
    if available.get("status") == "True" and service.get("name"):
        return (
            f"{service.get('name')} is serving again (APIService {name} is Available: {available.get('reason')}): "
            "the APIService was left alone"
        )
    return _ops.no_longer_proposed(check)


KIND = RemedyKind(
    action=Action.DELETE_APISERVICE,
    doing="Deleting an APIService",
    rules=(Rule(("apiregistration.k8s.io",), ("apiservices",), ("get", "delete")),),
    min_approvals=1,
    needs_finalizer=False,
    needs_complete_diagnosis=False,
    rests_on="the APIService is still unavailable (its backend still down)",
    cause_gone=_cause_gone,
    needs_fresh_evidence=False,
    stale_reason=_ops.nothing_else_to_recheck,
    operation=_ops.plain_delete,
    took_effect=_ops.deleting_took_effect,
    target_verbs=("get", "delete"),
)
