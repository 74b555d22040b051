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
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

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

INCIDENT_STATUSES = ("open", "resolved")
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
