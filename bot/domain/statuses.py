"""Where an incident and a remediation request stand: the values the database's CHECK constraints
allow (the models build their constraints from these; a test holds the migrations to them)."""

from __future__ import annotations

from enum import StrEnum


class IncidentStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class RequestStatus(StrEnum):
    PENDING = "pending"  # waiting for approvals
    REJECTED = "rejected"
    EXPIRED = "expired"  # not enough approvals in time
    STALE = "stale"  # the cluster changed since the diagnosis: nothing was done
    EXECUTING = "executing"  # approved; an executor holds it (execution_id) until its deadline
    APPLIED = "applied"
    FAILED = "failed"

    @property
    def open(self) -> bool:
        """Still waiting or being acted on."""
        return self in (RequestStatus.PENDING, RequestStatus.EXECUTING)
