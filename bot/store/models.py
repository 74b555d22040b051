"""Typed SQLAlchemy models. Alembic owns the schema: change a model, then add a migration."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from bot.domain.statuses import IncidentStatus, RequestStatus
from bot.store.types import UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BIGINT identity on PostgreSQL; SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")
JsonDoc = JSON().with_variant(JSONB(), "postgresql")

INCIDENT_STATUSES = tuple(status.value for status in IncidentStatus)
DIAGNOSIS_TRIGGERS = ("slack", "schedule", "cli")
NAMESPACE_STATES = ("terminating", "active", "not_found")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


class Incident(Base):
    """One stuck namespace: a namespace UID on a cluster, from first sighting to resolution.

    A namespace deleted and recreated under the same name has a new UID, hence a new incident; the
    unique key makes retried deliveries and concurrent replicas converge on one row.
    """

    __tablename__ = "incidents"
    __table_args__ = (
        UniqueConstraint("cluster", "namespace_uid"),
        CheckConstraint(f"status IN {INCIDENT_STATUSES!r}", name="status"),
        Index(None, "cluster", "namespace", "status"),
        Index(None, "status", "first_seen_at"),
        # "seen before" (issue 39 §3): the newest incidents of a cluster, cause and blocking object family
        Index(None, "cluster", "cause", "blocker", "first_seen_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    namespace_uid: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="open")
    cause: Mapped[str | None] = mapped_column(String(32))
    terminating_since: Mapped[datetime | None]
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    resolved_at: Mapped[datetime | None]
    slack_channel: Mapped[str | None] = mapped_column(String(32))
    slack_thread_ts: Mapped[str | None] = mapped_column(String(32))
    last_checked_at: Mapped[datetime | None]
    resolution_posted_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    # the watch posted its verdict unasked: set once, by a conditional update, so that one replica does
    watch_posted_at: Mapped[datetime | None]
    # what each look at the namespace saw, for progress across follow-ups (issue 37 §1): a few entries of
    # a time, the remaining count and resourceVersions by uid (`bot.domain.snapshot.Observation`)
    observations: Mapped[list[Any] | None] = mapped_column(JsonDoc)
    # the blocking object family of its cause (`bot.diagnosis.family`: `apiservice:v1beta1.metrics.k8s.io`),
    # set with the cause; None: none (no "seen before"), or recorded before migration 0008
    blocker: Mapped[str | None] = mapped_column(String(255))

    diagnoses: Mapped[list[DiagnosisRun]] = relationship(
        back_populates="incident", order_by="DiagnosisRun.started_at", passive_deletes="all"
    )


class DiagnosisRun(Base):
    """One run of the diagnosis: who asked, when, how long it took, what it found, and from what.

    The snapshot is kept (compressed) so that a past verdict can be re-examined and re-diagnosed.
    """

    __tablename__ = "diagnoses"
    __table_args__ = (
        CheckConstraint(f"trigger IN {DIAGNOSIS_TRIGGERS!r}", name="trigger"),
        CheckConstraint(f"state IN {NAMESPACE_STATES!r}", name="state"),
        Index(None, "incident_id", "started_at"),
        Index(None, "cluster", "namespace", "started_at"),
        Index(None, "posted_at", "post_channel"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="RESTRICT"))
    cluster: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    trigger: Mapped[str] = mapped_column(String(16))
    requested_by: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(16))
    cause: Mapped[str | None] = mapped_column(String(32))
    complete: Mapped[bool] = mapped_column(default=True)
    report: Mapped[dict[str, Any]] = mapped_column(JsonDoc)
    snapshot: Mapped[bytes | None] = mapped_column(LargeBinary)
    # the outbox: where the run is to be posted, and whether it was
    post_channel: Mapped[str | None] = mapped_column(String(32))
    posted_at: Mapped[datetime | None]
    post_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_post_error: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    incident: Mapped[Incident | None] = relationship(back_populates="diagnoses")


REQUEST_STATUSES = tuple(status.value for status in RequestStatus)
VOTE_DECISIONS = ("approve", "reject")


class RemediationRequest(Base):
    """A change to a cluster that someone asked for, bound to the diagnosis it came from.

    Its status only moves by conditional updates (`... WHERE status = 'pending'`), so that however
    many approvers, retries and replicas act at once, one of them makes each move.
    """

    __tablename__ = "remediation_requests"
    __table_args__ = (
        CheckConstraint(f"status IN {REQUEST_STATUSES!r}", name="status"),
        CheckConstraint("required_approvals >= 1", name="required_approvals"),
        Index(None, "status", "expires_at"),
        Index(None, "incident_id"),
        # one open request per remedy of a diagnosis: a double click files one
        Index(
            "uq_remediation_requests_pending_remedy",
            "diagnosis_id",
            "remedy_id",
            unique=True,
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    diagnosis_id: Mapped[int] = mapped_column(ForeignKey("diagnoses.id", ondelete="RESTRICT"))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id", ondelete="RESTRICT"))
    cluster: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    remedy_id: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(40))
    risk: Mapped[str] = mapped_column(String(8))
    description: Mapped[str] = mapped_column(String(500))
    remedy: Mapped[dict[str, Any]] = mapped_column(JSON)  # the Remedy as JSON, targets included
    requested_by: Mapped[str] = mapped_column(String(64))
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    required_approvals: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    status_reason: Mapped[str | None] = mapped_column(String(1000))
    decided_at: Mapped[datetime | None]
    # where the request lives in Slack
    channel: Mapped[str | None] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    message_ts: Mapped[str | None] = mapped_column(String(32))
    # the execution: who holds it (a token per claim) and until when
    execution_id: Mapped[str | None] = mapped_column(String(36))
    execution_started_at: Mapped[datetime | None]
    execution_deadline: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # afterwards: following the namespace until it is gone or `follow_until` passes
    follow_until: Mapped[datetime | None]
    verified_at: Mapped[datetime | None]
    verification: Mapped[str | None] = mapped_column(String(24))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    votes: Mapped[list[RemediationVote]] = relationship(
        back_populates="request", order_by="RemediationVote.id", passive_deletes="all"
    )


class RemediationVote(Base):
    """One approver's decision on a request; one per person, however often they click."""

    __tablename__ = "remediation_votes"
    __table_args__ = (
        UniqueConstraint("request_id", "user_id"),
        CheckConstraint(f"decision IN {VOTE_DECISIONS!r}", name="decision"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("remediation_requests.id", ondelete="RESTRICT"))
    user_id: Mapped[str] = mapped_column(String(64))
    decision: Mapped[str] = mapped_column(String(8))
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)

    request: Mapped[RemediationRequest] = relationship(back_populates="votes")


class Backup(Base):
    """An object exactly as it was read right before nsstuck changed it. Never updated or deleted."""

    __tablename__ = "backups"
    __table_args__ = (Index(None, "request_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("remediation_requests.id", ondelete="RESTRICT"))
    cluster: Mapped[str] = mapped_column(String(63))
    api_version: Mapped[str] = mapped_column(String(253))
    kind: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str | None] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    uid: Mapped[str | None] = mapped_column(String(64))
    resource_version: Mapped[str | None] = mapped_column(String(64))
    taken_at: Mapped[datetime] = mapped_column(default=utcnow)
    object: Mapped[dict[str, Any]] = mapped_column(JSON)
    sha256: Mapped[str] = mapped_column(String(64))


class AuditEntry(Base):
    """One link of the audit chain. `hash` covers every other column and the previous entry's hash,
    so a changed, removed or reordered entry breaks the chain where it happened.

    Plain JSON (text), not JSONB: the stored document is what was hashed.
    """

    __tablename__ = "audit_entries"
    __table_args__ = (
        Index(None, "request_id"),
        Index(None, "at"),
    )

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    at: Mapped[datetime]
    event: Mapped[str] = mapped_column(String(24))
    actor: Mapped[str] = mapped_column(String(64))  # a Slack user id, or "nsstuck" for the bot itself
    cluster: Mapped[str | None] = mapped_column(String(63))
    namespace: Mapped[str | None] = mapped_column(String(63))
    request_id: Mapped[int | None] = mapped_column(BigInteger)
    objects: Mapped[list[Any]] = mapped_column(JSON)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class AuditHead(Base):
    """The one row that says where the chain ends: appenders lock it, so entries are written one
    after the other, and a removed tail is noticed."""

    __tablename__ = "audit_head"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[str] = mapped_column(String(64))


DIGEST_RUN_STATUSES = ("claimed", "built", "posted", "post_failed", "skipped")


class DigestRun(Base):
    """One digest: claimed for its scheduled time by exactly one replica (the unique key), built,
    then posted. What it listed is kept, so the next one can say what is new and what was resolved."""

    __tablename__ = "digest_runs"
    __table_args__ = (
        UniqueConstraint("digest_key", "scheduled_for"),
        CheckConstraint(f"status IN {DIGEST_RUN_STATUSES!r}", name="status"),
        Index(None, "digest_key", "status", "scheduled_for"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    digest_key: Mapped[str] = mapped_column(String(200))
    channel: Mapped[str] = mapped_column(String(32))
    scheduled_for: Mapped[datetime]
    manual: Mapped[bool] = mapped_column(default=False)
    claimed_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_by: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16), default="claimed")
    built_at: Mapped[datetime | None]
    posted_at: Mapped[datetime | None]
    post_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    message_ts: Mapped[str | None] = mapped_column(String(32))
    # what it listed (cluster, namespace, uid, incident) and which clusters it could not reach
    summary: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    # the message as built, so that a post that failed can be retried as it was
    message: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    error: Mapped[str | None] = mapped_column(String(500))


class SeenRequest(Base):
    """A signed request from Slack that was let in, by its signature, until it is too old to be
    accepted anyway: a second request with the same signature is a replay, whichever replica gets it."""

    __tablename__ = "seen_requests"
    __table_args__ = (Index(None, "request_ts"),)

    # "v0=" and 64 hex digits; an HMAC over the timestamp and the body, so it names the pair
    signature: Mapped[str] = mapped_column(String(80), primary_key=True)
    request_ts: Mapped[int] = mapped_column(BigInteger)  # X-Slack-Request-Timestamp, epoch seconds
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class WatchRound(Base):
    """One round of the watch on one cluster: claimed by inserting its (cluster, round) row, so that
    exactly one replica lists the cluster's namespaces per round. Kept a day, for looking back."""

    __tablename__ = "watch_rounds"
    __table_args__ = (
        UniqueConstraint("cluster", "round_start"),
        Index(None, "round_start"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    round_start: Mapped[datetime]
    claimed_by: Mapped[str] = mapped_column(String(100))
    claimed_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    # "listed" (with `namespaces`), or "unreachable"
    outcome: Mapped[str | None] = mapped_column(String(16))
    namespaces: Mapped[int | None] = mapped_column(Integer)


class WatchedCluster(Base):
    """Whether a watched cluster answered at its last round, and since when: a change is made by a
    conditional update, so that it is said once however many replicas watch."""

    __tablename__ = "watched_clusters"

    cluster: Mapped[str] = mapped_column(String(63), primary_key=True)
    reachable: Mapped[bool]
    changed_at: Mapped[datetime]
    checked_at: Mapped[datetime]
    reason: Mapped[str | None] = mapped_column(String(500))
