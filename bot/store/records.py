"""What the store hands out: frozen copies of its rows, never the SQLAlchemy models themselves.

A model belongs to its session (it lazy-loads, it writes back what is set on it); these are plain
values that outlive the unit of work and cannot change the database by accident. Every change goes
through a repository method.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

R = TypeVar("R")


def record_of(cls: type[R], row: Any) -> R:
    """A frozen copy of a model row as `cls` (a dataclass whose fields are column names)."""
    return cls(**{f.name: getattr(row, f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class IncidentRecord:
    id: int
    cluster: str
    namespace: str
    namespace_uid: str
    status: str
    cause: str | None
    terminating_since: datetime | None
    first_seen_at: datetime
    resolved_at: datetime | None
    slack_channel: str | None
    slack_thread_ts: str | None
    last_checked_at: datetime | None
    resolution_posted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    watch_posted_at: datetime | None
    observations: list[Any] | None
    blocker: str | None


@dataclass(frozen=True)
class RunRecord:
    id: int
    incident_id: int | None
    cluster: str
    namespace: str
    trigger: str
    requested_by: str
    started_at: datetime
    duration_ms: int
    state: str
    cause: str | None
    complete: bool
    report: dict[str, Any]
    snapshot: bytes | None
    post_channel: str | None
    posted_at: datetime | None
    post_attempts: int
    last_post_error: str | None
    created_at: datetime


@dataclass(frozen=True)
class RequestRecord:
    id: int
    diagnosis_id: int
    incident_id: int | None
    cluster: str
    namespace: str
    remedy_id: str
    action: str
    risk: str
    description: str
    remedy: dict[str, Any]
    requested_by: str
    requested_at: datetime
    expires_at: datetime
    required_approvals: int
    status: str
    status_reason: str | None
    decided_at: datetime | None
    channel: str | None
    thread_ts: str | None
    message_ts: str | None
    execution_id: str | None
    execution_started_at: datetime | None
    execution_deadline: datetime | None
    finished_at: datetime | None
    follow_until: datetime | None
    verified_at: datetime | None
    verification: str | None
    updated_at: datetime


@dataclass(frozen=True)
class BackupRecord:
    id: int
    request_id: int
    cluster: str
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str | None
    resource_version: str | None
    taken_at: datetime
    object: dict[str, Any]
    sha256: str


@dataclass(frozen=True)
class DigestRunRecord:
    id: int
    digest_key: str
    channel: str
    scheduled_for: datetime
    manual: bool
    claimed_at: datetime
    claimed_by: str
    status: str
    built_at: datetime | None
    posted_at: datetime | None
    post_attempts: int
    message_ts: str | None
    summary: dict[str, Any] | None
    message: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class WatchRoundRecord:
    id: int
    cluster: str
    round_start: datetime
    claimed_by: str
    claimed_at: datetime
    finished_at: datetime | None
    outcome: str | None
    namespaces: int | None


@dataclass(frozen=True)
class WatchedClusterRecord:
    cluster: str
    reachable: bool
    changed_at: datetime
    checked_at: datetime
    reason: str | None
