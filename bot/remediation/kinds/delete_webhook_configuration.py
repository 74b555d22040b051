"""Deleting a validating or mutating webhook configuration whose webhook refuses the deletes the
namespace needs, with the uid and resourceVersion checked as DeleteOptions preconditions."""

from __future__ import annotations

from bot.domain.access import Rule
from bot.domain.findings import Action
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import RemedyKind

KIND = RemedyKind(
    action=Action.DELETE_WEBHOOK_CONFIGURATION,
    doing="Deleting a webhook configuration",
    rules=(
        Rule(
            ("admissionregistration.k8s.io",),
            ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
            ("get", "delete"),
        ),
    ),
    min_approvals=1,
    needs_finalizer=False,
    needs_complete_diagnosis=False,
    needs_fresh_evidence=False,
    stale_reason=_ops.nothing_else_to_recheck,
    operation=_ops.plain_delete,
    took_effect=_ops.deleting_took_effect,
)
