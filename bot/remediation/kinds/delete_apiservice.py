"""Deleting an APIService whose backend is gone (it blocks discovery, and so the namespace's
deletion), with the uid and resourceVersion checked as DeleteOptions preconditions."""

from __future__ import annotations

from bot.domain.access import Rule
from bot.domain.findings import Action
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind

KIND = RemedyKind(
    action=Action.DELETE_APISERVICE,
    doing="Deleting an APIService",
    rules=(Rule(("apiregistration.k8s.io",), ("apiservices",), ("get", "delete")),),
    min_approvals=1,
    needs_finalizer=False,
    needs_complete_diagnosis=False,
    needs_fresh_evidence=False,
    stale_reason=_ops.nothing_else_to_recheck,
    operation=_ops.plain_delete,
    took_effect=_ops.deleting_took_effect,
)
