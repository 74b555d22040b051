"""Remediation requests and approvers' votes. Every status move is a conditional UPDATE: the caller
learns from the row count whether its move happened, so concurrent clicks and replicas agree."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, text, update
from sqlalchemy.orm import Session

from bot.domain.statuses import RequestStatus
from bot.store import dialect
from bot.store.models import RemediationRequest, RemediationVote, utcnow
from bot.store.records import RequestRecord, record_of

OPEN_STATUSES = tuple(status for status in RequestStatus if status.open)


class RequestRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def _insert(self) -> Any:
        return dialect.insert(self._session)

    def file(self, values: dict[str, Any]) -> tuple[RequestRecord, bool]:
        """Insert a pending request unless the same remedy of the same diagnosis is pending already.
        Returns the pending request and whether this call created it."""
        now = utcnow()
        statement = (
            self._insert()(RemediationRequest)
            .values(status=RequestStatus.PENDING, requested_at=now, updated_at=now, **values)
            .on_conflict_do_nothing(
                index_elements=["diagnosis_id", "remedy_id"], index_where=text("status = 'pending'")
            )
            .returning(RemediationRequest.id)
        )
        created = self._session.execute(statement).scalar_one_or_none() is not None
        query = select(RemediationRequest).where(
            RemediationRequest.diagnosis_id == values["diagnosis_id"],
            RemediationRequest.remedy_id == values["remedy_id"],
            RemediationRequest.status == RequestStatus.PENDING,
        )
        request = self._session.scalars(query).one_or_none()
        if request is None:  # it left `pending` between the insert and the read: file again
            return self.file(values)
        self._session.refresh(request)
        return record_of(RequestRecord, request), created

    def get(self, request_id: int) -> RequestRecord | None:
        request = self._session.get(RemediationRequest, request_id)
        if request is None:
            return None
        self._session.refresh(request)
        return record_of(RequestRecord, request)

    def hold(self, request_id: int) -> bool:
        """Lock a pending request's row for the rest of the transaction (PostgreSQL row lock, SQLite
        write lock), so that votes on it are counted one transaction at a time. False: not pending."""
        result = self._session.execute(
            update(RemediationRequest)
            .where(RemediationRequest.id == request_id, RemediationRequest.status == RequestStatus.PENDING)
            .values(updated_at=utcnow())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def move(
        self,
        request_id: int,
        *,
        from_status: RequestStatus | Sequence[RequestStatus],
        to_status: RequestStatus,
        held_by: str | None = None,
        overdue_at: datetime | None = None,
        **values: Any,
    ) -> bool:
        """from_status -> to_status, only if the row is still in from_status (and, when given, its
        execution is still `held_by` this execution id, and its deadline is not after `overdue_at`).
        True only for the caller whose update made the move."""
        sources = (from_status,) if isinstance(from_status, str) else tuple(from_status)
        query = update(RemediationRequest).where(
            RemediationRequest.id == request_id, RemediationRequest.status.in_(sources)
        )
        if held_by is not None:
            query = query.where(RemediationRequest.execution_id == held_by)
        if overdue_at is not None:  # only once the deadline has passed (a live executor may extend it)
            query = query.where(RemediationRequest.execution_deadline <= overdue_at)
        result = self._session.execute(query.values(status=to_status, updated_at=utcnow(), **values))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def reclaim(self, request_id: int, execution_id: str, *, now: datetime, until: datetime) -> bool:
        """An executor renewing its hold before a step that may change the cluster: only while the
        request is still `executing`, held by this execution, and its deadline has not passed; the
        deadline moves to `until` (never earlier). False: the execution is no longer this executor's
        to continue (settled by the reconciler, or overdue)."""
        result = self._session.execute(
            update(RemediationRequest)
            .where(
                RemediationRequest.id == request_id,
                RemediationRequest.status == RequestStatus.EXECUTING,
                RemediationRequest.execution_id == execution_id,
                RemediationRequest.execution_deadline > now,
            )
            .values(
                execution_deadline=case(
                    (RemediationRequest.execution_deadline < until, until),
                    else_=RemediationRequest.execution_deadline,
                ),
                updated_at=utcnow(),
            )
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def set_fields(self, request_id: int, **values: Any) -> None:
        self._session.execute(
            update(RemediationRequest).where(RemediationRequest.id == request_id).values(updated_at=utcnow(), **values)
        )

    def mark_verified(self, request_id: int, *, at: datetime, verification: str) -> bool:
        """Record how the namespace fared after an applied change, once."""
        result = self._session.execute(
            update(RemediationRequest)
            .where(
                RemediationRequest.id == request_id,
                RemediationRequest.status == RequestStatus.APPLIED,
                RemediationRequest.verified_at.is_(None),
            )
            .values(verified_at=at, verification=verification, updated_at=utcnow())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def add_vote(self, request_id: int, user_id: str, decision: str, at: datetime) -> bool:
        """Record a vote unless this person voted already; True when this call recorded it."""
        statement = (
            self._insert()(RemediationVote)
            .values(request_id=request_id, user_id=user_id, decision=decision, decided_at=at)
            .on_conflict_do_nothing(index_elements=["request_id", "user_id"])
            .returning(RemediationVote.id)
        )
        # RETURNING, not rowcount: an INSERT .. ON CONFLICT DO NOTHING reports rowcount -1 through
        # psycopg, which read as "inserted" and let a double click count twice on PostgreSQL
        return self._session.execute(statement).scalar_one_or_none() is not None

    def approvers(self, request_id: int) -> list[str]:
        query = (
            select(RemediationVote.user_id)
            .where(RemediationVote.request_id == request_id, RemediationVote.decision == "approve")
            .order_by(RemediationVote.id)
        )
        return list(self._session.scalars(query))

    def count_approvals(self, request_id: int) -> int:
        """Every approval on record, those dropped from the count since included
        (`bot.remediation.requests.counted_approvals` is what counts)."""
        query = select(func.count()).where(
            RemediationVote.request_id == request_id, RemediationVote.decision == "approve"
        )
        return int(self._session.scalar(query) or 0)

    def due_to_expire(self, now: datetime, limit: int = 100) -> list[int]:
        query = (
            select(RemediationRequest.id)
            .where(RemediationRequest.status == RequestStatus.PENDING, RemediationRequest.expires_at <= now)
            .order_by(RemediationRequest.id)
            .limit(limit)
        )
        return list(self._session.scalars(query))

    def overdue_executions(self, now: datetime, limit: int = 100) -> list[int]:
        query = (
            select(RemediationRequest.id)
            .where(RemediationRequest.status == RequestStatus.EXECUTING, RemediationRequest.execution_deadline <= now)
            .order_by(RemediationRequest.id)
            .limit(limit)
        )
        return list(self._session.scalars(query))

    def to_verify(self, limit: int = 100) -> list[int]:
        query = (
            select(RemediationRequest.id)
            .where(RemediationRequest.status == RequestStatus.APPLIED, RemediationRequest.verified_at.is_(None))
            .order_by(RemediationRequest.id)
            .limit(limit)
        )
        return list(self._session.scalars(query))

    def open_requests(self, limit: int = 50) -> list[RequestRecord]:
        query = (
            select(RemediationRequest)
            .where(RemediationRequest.status.in_(OPEN_STATUSES))
            .order_by(RemediationRequest.requested_at, RemediationRequest.id)
            .limit(limit)
        )
        return [record_of(RequestRecord, request) for request in self._session.scalars(query)]
