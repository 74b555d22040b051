"""The audit trail: an append-only chain of entries, each hashed together with the one before it.

Appending locks the single `audit_head` row first (an UPDATE), so entries from concurrent
transactions, threads and replicas are written strictly one after the other; the entry commits or
rolls back together with the state change it records, in the caller's unit of work.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bot.store.models import AuditEntry, AuditHead, utcnow

GENESIS = "0" * 64
SYSTEM_ACTOR = "nsstuck"

# The events of the trail (the list, plus the start of an execution and a reconciliation).
EVENTS = (
    "requested",
    "approved",
    "refused",
    "rejected",
    "expired",
    "stale",
    "backed_up",
    "dry_run",
    "execution_started",
    "applied",
    "failed",
    "reconciled",
    "verified",
)


def canonical_time(at: datetime) -> str:
    """Microsecond UTC ISO time: what both databases give back for what we stored."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_hash(
    *,
    seq: int,
    at: datetime,
    event: str,
    actor: str,
    cluster: str | None,
    namespace: str | None,
    request_id: int | None,
    objects: Sequence[Any],
    details: dict[str, Any],
    prev_hash: str,
) -> str:
    document = {
        "seq": seq,
        "at": canonical_time(at),
        "event": event,
        "actor": actor,
        "cluster": cluster,
        "namespace": namespace,
        "request_id": request_id,
        "objects": list(objects),
        "details": details,
        "prev_hash": prev_hash,
    }
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


def hash_of(entry: AuditEntry) -> str:
    """The hash an entry's stored content amounts to (compare with `entry.hash`)."""
    return entry_hash(
        seq=entry.seq,
        at=entry.at,
        event=entry.event,
        actor=entry.actor,
        cluster=entry.cluster,
        namespace=entry.namespace,
        request_id=entry.request_id,
        objects=entry.objects,
        details=entry.details,
        prev_hash=entry.prev_hash,
    )


def _plain(value: Any) -> Any:
    """JSON-safe (and JSON-stable) copy of a value: what the database will give back."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@dataclass(frozen=True)
class Appended:
    seq: int
    hash: str


class AuditLog:
    """Appends to and reads the chain inside the caller's session (never commits)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def append(
        self,
        event: str,
        *,
        actor: str,
        cluster: str | None = None,
        namespace: str | None = None,
        request_id: int | None = None,
        objects: Iterable[dict[str, Any]] = (),
        details: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> Appended:
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        # the UPDATE takes the row lock (PostgreSQL) or the write lock (SQLite) before we read the head
        self._session.execute(update(AuditHead).where(AuditHead.id == 1).values(seq=AuditHead.seq + 1))
        head = self._session.execute(select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == 1)).one()
        seq, prev_hash = int(head.seq), str(head.hash)
        when = (at or utcnow()).astimezone(UTC)
        plain_objects = _plain(list(objects))
        plain_details = _plain(details or {})
        digest = entry_hash(
            seq=seq,
            at=when,
            event=event,
            actor=actor,
            cluster=cluster,
            namespace=namespace,
            request_id=request_id,
            objects=plain_objects,
            details=plain_details,
            prev_hash=prev_hash,
        )
        self._session.add(
            AuditEntry(
                seq=seq,
                at=when,
                event=event,
                actor=actor,
                cluster=cluster,
                namespace=namespace,
                request_id=request_id,
                objects=plain_objects,
                details=plain_details,
                prev_hash=prev_hash,
                hash=digest,
            )
        )
        self._session.execute(update(AuditHead).where(AuditHead.id == 1).values(hash=digest))
        self._session.flush()
        return Appended(seq, digest)

    def for_request(self, request_id: int) -> list[AuditEntry]:
        query = select(AuditEntry).where(AuditEntry.request_id == request_id).order_by(AuditEntry.seq)
        return list(self._session.scalars(query))

    def head(self) -> tuple[int, str]:
        row = self._session.execute(select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == 1)).one()
        return int(row.seq), str(row.hash)
