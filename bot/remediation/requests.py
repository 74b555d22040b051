"""Filing remediation requests and deciding on them.

Each decision is one transaction: the request's row is held first (a conditional UPDATE, so votes on
one request are counted one at a time on every database), the vote goes in (one per person), and
the move to `executing` is itself conditional: of any number of concurrent approvals, exactly one
sees its update change the row, and only that one gets an execution id to run with.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.domain.findings import Diagnosis, NamespaceState, Remedy
from bot.domain.refs import ClusterName
from bot.domain.statuses import IncidentStatus, RequestStatus
from bot.errors import UserError
from bot.remediation import permissions, policy
from bot.settings import ClusterConfig
from bot.store.audit import SYSTEM_ACTOR, Appended
from bot.store.database import Database, UnitOfWork
from bot.store.records import RequestRecord

TERMINAL = tuple(status for status in RequestStatus if not status.open)
DROPPED_AGAIN = (
    "Your earlier approval of this request no longer counted (see its thread), and one person votes once "
    "on a request: ask for the change again to approve it anew."
)


@dataclass(frozen=True)
class RequestView:
    """A request as plain values, for messages and for the executor."""

    id: int
    diagnosis_id: int
    incident_id: int | None
    cluster: ClusterName
    namespace: str
    remedy: Remedy
    requested_by: str
    requested_at: datetime
    expires_at: datetime
    required_approvals: int
    approvals: tuple[str, ...]
    status: RequestStatus
    status_reason: str | None
    channel: str | None
    thread_ts: str | None
    message_ts: str | None
    execution_id: str | None
    execution_deadline: datetime | None
    follow_until: datetime | None
    verification: str | None

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.remedy.targets]

    @property
    def last_approver(self) -> str:
        return self.approvals[-1] if self.approvals else SYSTEM_ACTOR


def counted_approvals(uow: UnitOfWork, request_id: int) -> tuple[str, ...]:
    """Who approved, in order, less those whose approval was dropped from the count (`vote_dropped`):
    a vote is never deleted (the runtime role may only insert them), the audit entry sets it aside."""
    voters = uow.requests.approvers(request_id)
    if not voters:
        return ()
    dropped = uow.audit.dropped_votes(request_id)
    return tuple(voter for voter in voters if voter not in dropped)


def view_of(uow: UnitOfWork, request: RequestRecord) -> RequestView:
    return RequestView(
        id=request.id,
        diagnosis_id=request.diagnosis_id,
        incident_id=request.incident_id,
        cluster=ClusterName(request.cluster),
        namespace=request.namespace,
        remedy=Remedy.from_json(request.remedy),
        requested_by=request.requested_by,
        requested_at=request.requested_at,
        expires_at=request.expires_at,
        required_approvals=request.required_approvals,
        approvals=counted_approvals(uow, request.id),
        status=RequestStatus(request.status),
        status_reason=request.status_reason,
        channel=request.channel,
        thread_ts=request.thread_ts,
        message_ts=request.message_ts,
        execution_id=request.execution_id,
        execution_deadline=request.execution_deadline,
        follow_until=request.follow_until,
        verification=request.verification,
    )


def load(db: Database, request_id: int) -> RequestView | None:
    with db.unit_of_work() as uow:
        request = uow.requests.get(request_id)
        return view_of(uow, request) if request is not None else None


def audit(uow: UnitOfWork, view: RequestView, event: str, *, actor: str, **details: Any) -> Appended:
    """One audit entry about a request, with its cluster, namespace and objects; the entry written."""
    return uow.audit.append(
        event,
        actor=actor,
        cluster=view.cluster,
        namespace=view.namespace,
        request_id=view.id,
        objects=view.objects,
        details={"action": view.remedy.action.value, "requested_by": view.requested_by, **details},
    )


# -- filing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filed:
    view: RequestView
    created: bool  # False: the same remedy of the same diagnosis was pending already


def find_remedy(diagnosis: Diagnosis, remedy_id: str) -> Remedy | None:
    for finding in diagnosis.findings:
        for remedy in finding.remedies:
            if remedy.id == remedy_id:
                return remedy
    return None


def file_request(
    db: Database,
    *,
    run_id: int,
    remedy_id: str,
    user: str,
    cluster: ClusterConfig,
    now: datetime,
    expires_after: timedelta,
    channel: str | None,
    thread_ts: str | None,
) -> Filed:
    """File a request for one remedy of one recorded diagnosis. Raises UserError, saying why not."""
    off = policy.remediation_off(cluster)
    if off:
        raise UserError(off)
    with db.unit_of_work() as uow:
        run = uow.diagnoses.get(run_id)
    if run is None or run.cluster != cluster.name:
        raise UserError("That diagnosis is not on record any more; run `/nsstuck` again.")
    # a recorded run never changes: it is read above and judged here, outside the transaction that files
    # the request (the database, SQLite's one writer, is not held while the CPU works)
    diagnosis = Diagnosis.from_json(run.report)
    if diagnosis.state is not NamespaceState.TERMINATING:
        raise UserError("That namespace was not stuck when it was diagnosed; there is nothing to fix.")
    remedy = find_remedy(diagnosis, remedy_id)
    if remedy is None:
        raise UserError("That remedy is not part of this diagnosis.")
    refusal = policy.cannot_request(diagnosis, remedy) or permissions.not_granted(cluster, remedy)
    if refusal:
        raise UserError(refusal)
    with db.unit_of_work() as uow:
        if run.incident_id is not None:
            incident = uow.incidents.get(run.incident_id)
            if incident is not None and incident.status != IncidentStatus.OPEN:
                raise UserError(f"`{diagnosis.namespace}` is gone already; nothing to change.")
        request, created = uow.requests.file(
            {
                "diagnosis_id": run.id,
                "incident_id": run.incident_id,
                "cluster": cluster.name,
                "namespace": diagnosis.namespace,
                "remedy_id": remedy.id,
                "action": remedy.action.value,
                "risk": remedy.risk.value,
                "description": remedy.description[:500],
                "remedy": remedy.to_json(),
                "requested_by": user,
                "expires_at": now + expires_after,
                "required_approvals": policy.required_approvals(cluster, remedy.action),
                "channel": channel,
                "thread_ts": thread_ts,
            }
        )
        view = view_of(uow, request)
        if created:
            audit(
                uow,
                view,
                "requested",
                actor=user,
                diagnosis_id=run.id,
                remedy_id=remedy.id,
                risk=remedy.risk.value,
                description=remedy.description,
                commands=list(remedy.commands),
                leaves_behind=list(remedy.leaves_behind),
                required_approvals=view.required_approvals,
                expires_at=view.expires_at.isoformat(),
            )
        return Filed(view, created)


def set_message(db: Database, request_id: int, channel: str, message_ts: str) -> None:
    with db.unit_of_work() as uow:
        uow.requests.set_fields(request_id, channel=channel, message_ts=message_ts)


# -- deciding ----------------------------------------------------------------------------------


class VoteKind(StrEnum):
    APPROVED = "approved"  # counted; more approvals are needed
    EXECUTE = "execute"  # this vote completed the approvals: run the change with `execution_id`
    REJECTED = "rejected"
    REFUSED = "refused"  # this person may not decide (recorded)
    DUPLICATE = "duplicate"  # this person decided already
    EXPIRED = "expired"  # too late: the request expired (now, or before)
    CLOSED = "closed"  # the request is no longer pending (executing, applied, rejected, ...)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Dropped:
    """An earlier approval that no longer counted when this vote reached the quorum."""

    voter: str
    reason: str
    entry: Appended  # its `vote_dropped` audit entry


@dataclass(frozen=True)
class Vote:
    kind: VoteKind
    view: RequestView | None
    message: str = ""
    execution_id: str | None = None
    entry: Appended | None = None  # the audit entry this vote wrote (a rejection's, to quote in the thread)
    dropped: tuple[Dropped, ...] = ()  # earlier approvals set aside by this vote's judgement of the quorum


def decide(
    db: Database,
    request_id: int,
    *,
    user: str,
    approve: bool,
    approvers: frozenset[str],
    now: datetime,
    execution_timeout: timedelta,
    outsider: str | None = None,
    lapsed: Mapping[str, str] | None = None,
) -> Vote:
    """One click on Approve or Reject, decided in one transaction. `outsider`: why this person may not
    decide whoever they are (`policy.outsider_refusal`), refused and recorded like any other refusal.

    When the approvals reach the quorum, every earlier approval is judged again before it counts: by
    `approvers` (read for this decision) and the requester (`policy.vote_lapsed`), and by `lapsed`,
    what the caller found out about the earlier voters just now (a guest now, say). One that no longer
    qualifies is dropped from the count with a `vote_dropped` entry saying whose and why; below the
    quorum then, the request stays pending and nothing is changed."""
    with db.unit_of_work() as uow:
        request = uow.requests.get(request_id)
        if request is None:
            return Vote(VoteKind.UNKNOWN, None, "That request is not on record.")
        view = view_of(uow, request)
        if view.status != RequestStatus.PENDING:
            return Vote(VoteKind.CLOSED, view, _closed_message(view))
        if view.expires_at <= now:
            if uow.requests.move(
                request_id, from_status=RequestStatus.PENDING, to_status=RequestStatus.EXPIRED, decided_at=now
            ):
                view = _reload(uow, request_id)
                audit(uow, view, "expired", actor=SYSTEM_ACTOR, expired_at=view.expires_at.isoformat())
            return Vote(VoteKind.EXPIRED, _reload(uow, request_id), "This request has expired; request it again.")
        decision = "approve" if approve else "reject"
        if approve:
            refusal = outsider or policy.cannot_approve(user, requester=view.requested_by, approvers=approvers)
        else:
            refusal = outsider or policy.cannot_reject(user, requester=view.requested_by, approvers=approvers)
        if refusal:
            audit(uow, view, "refused", actor=user, decision=decision, reason=refusal)
            return Vote(VoteKind.REFUSED, view, refusal)
        if not uow.requests.hold(request_id):  # it left `pending` since we read it
            view = _reload(uow, request_id)
            return Vote(VoteKind.CLOSED, view, _closed_message(view))
        if not approve:
            uow.requests.add_vote(request_id, user, "reject", now)
            uow.requests.move(
                request_id,
                from_status=RequestStatus.PENDING,
                to_status=RequestStatus.REJECTED,
                decided_at=now,
                status_reason=f"rejected by <@{user}>",
            )
            view = _reload(uow, request_id)
            entry = audit(uow, view, "rejected", actor=user)
            return Vote(VoteKind.REJECTED, view, entry=entry)
        if not uow.requests.add_vote(request_id, user, "approve", now):
            if user in uow.audit.dropped_votes(request_id):
                return Vote(VoteKind.DUPLICATE, view, DROPPED_AGAIN)
            return Vote(VoteKind.DUPLICATE, view, "You have decided on this request already.")
        view = _reload(uow, request_id)
        dropped: list[Dropped] = []
        if len(view.approvals) >= view.required_approvals:  # the quorum, if every vote still counts
            for voter in view.approvals:
                reason = None if voter == user else _lapsed(voter, view, approvers, lapsed or {})
                if reason:
                    entry = audit(uow, view, "vote_dropped", actor=SYSTEM_ACTOR, voter=voter, reason=reason)
                    dropped.append(Dropped(voter, reason, entry))
            if dropped:
                view = _reload(uow, request_id)
        approvals = len(view.approvals)
        if approvals < view.required_approvals:
            audit(uow, view, "approved", actor=user, approvals=approvals, required=view.required_approvals)
            return Vote(VoteKind.APPROVED, view, dropped=tuple(dropped))
        execution_id = str(uuid.uuid4())
        moved = uow.requests.move(
            request_id,
            from_status=RequestStatus.PENDING,
            to_status=RequestStatus.EXECUTING,
            decided_at=now,
            execution_id=execution_id,
            execution_deadline=now + execution_timeout,
        )
        if not moved:  # pragma: no cover - impossible while we hold the row
            raise RuntimeError(f"request {request_id} left pending while held")
        view = _reload(uow, request_id)
        audit(
            uow,
            view,
            "approved",
            actor=user,
            approvals=approvals,
            required=view.required_approvals,
            approved_by=list(view.approvals),
            execution_id=execution_id,
        )
        return Vote(VoteKind.EXECUTE, view, execution_id=execution_id, dropped=tuple(dropped))


def _lapsed(voter: str, view: RequestView, approvers: frozenset[str], found: Mapping[str, str]) -> str | None:
    return policy.vote_lapsed(voter, requester=view.requested_by, approvers=approvers) or found.get(voter)


def _reload(uow: UnitOfWork, request_id: int) -> RequestView:
    request = uow.requests.get(request_id)
    if request is None:  # pragma: no cover - requests are never deleted
        raise LookupError(f"request {request_id} vanished")
    return view_of(uow, request)


def _closed_message(view: RequestView) -> str:
    return {
        RequestStatus.EXECUTING: "This change is being made right now.",
        RequestStatus.APPLIED: "This change was made already.",
        RequestStatus.FAILED: "This change was tried and failed; see the thread.",
        RequestStatus.REJECTED: "This request was rejected.",
        RequestStatus.EXPIRED: "This request has expired; request it again.",
        RequestStatus.STALE: "This request went stale (the cluster changed); run `/nsstuck` again and request it anew.",
    }.get(view.status, f"This request is {view.status}.")


def expire_due(db: Database, now: datetime) -> list[tuple[RequestView, Appended]]:
    """Expire every pending request past its time (once across replicas); returns the expired, each
    with its `expired` audit entry."""
    expired: list[tuple[RequestView, Appended]] = []
    with db.unit_of_work() as uow:
        due = uow.requests.due_to_expire(now)
    for request_id in due:
        with db.unit_of_work() as uow:
            if uow.requests.move(
                request_id, from_status=RequestStatus.PENDING, to_status=RequestStatus.EXPIRED, decided_at=now
            ):
                view = _reload(uow, request_id)
                entry = audit(uow, view, "expired", actor=SYSTEM_ACTOR, expired_at=view.expires_at.isoformat())
                expired.append((view, entry))
    return expired


def open_requests(db: Database) -> Sequence[RequestView]:
    with db.unit_of_work() as uow:
        return [view_of(uow, r) for r in uow.requests.open_requests()]
