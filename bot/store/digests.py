"""Digest runs. A scheduled run is claimed by inserting its (digest, scheduled time) row: the unique
key lets exactly one replica in, however many look at the schedule at the same moment."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bot.store import dialect
from bot.store.models import DigestRun, utcnow
from bot.store.records import DigestRunRecord, record_of


class DigestRunRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def claim(self, *, key: str, channel: str, scheduled_for: datetime, by: str, manual: bool = False) -> int | None:
        """The new run's id, or None when this digest's run for that time was claimed already."""
        insert = dialect.insert(self._session)
        statement = (
            insert(DigestRun)
            .values(
                digest_key=key,
                channel=channel,
                scheduled_for=scheduled_for,
                manual=manual,
                claimed_at=utcnow(),
                claimed_by=by[:100],
                status="claimed",
                post_attempts=0,
            )
            .on_conflict_do_nothing(index_elements=["digest_key", "scheduled_for"])
            .returning(DigestRun.id)
        )
        return self._session.execute(statement).scalar_one_or_none()

    def get(self, run_id: int) -> DigestRunRecord | None:
        run = self._session.get(DigestRun, run_id)
        return None if run is None else record_of(DigestRunRecord, run)

    def previous(self, key: str, before: datetime) -> DigestRunRecord | None:
        """The last digest of `key` built before `before` (what "since the last digest" means)."""
        query = (
            select(DigestRun)
            .where(
                DigestRun.digest_key == key,
                DigestRun.scheduled_for < before,
                DigestRun.status.in_(("built", "posted", "post_failed", "skipped")),
            )
            .order_by(DigestRun.scheduled_for.desc(), DigestRun.id.desc())
            .limit(1)
        )
        run = self._session.scalars(query).first()
        return None if run is None else record_of(DigestRunRecord, run)

    def built(self, run_id: int, *, summary: dict[str, Any], message: dict[str, Any] | None, at: datetime) -> None:
        self._session.execute(
            update(DigestRun)
            .where(DigestRun.id == run_id)
            .values(status="built" if message is not None else "skipped", summary=summary, message=message, built_at=at)
        )

    def claim_post(self, run_id: int, attempts_seen: int) -> bool:
        """Take the next posting attempt of a built run; False when another worker took it."""
        result = self._session.execute(
            update(DigestRun)
            .where(
                DigestRun.id == run_id,
                DigestRun.post_attempts == attempts_seen,
                DigestRun.status.in_(("built", "post_failed")),
            )
            .values(post_attempts=attempts_seen + 1)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def posted(self, run_id: int, *, ts: str | None, at: datetime) -> None:
        self._session.execute(
            update(DigestRun)
            .where(DigestRun.id == run_id)
            .values(status="posted", message_ts=ts, posted_at=at, error=None)
        )

    def post_failed(self, run_id: int, error: str) -> None:
        self._session.execute(
            update(DigestRun).where(DigestRun.id == run_id).values(status="post_failed", error=error[:500])
        )

    def unposted(self, *, max_attempts: int = 10, limit: int = 20) -> list[int]:
        """Built runs whose posting failed (retried by the next tick)."""
        query = (
            select(DigestRun.id)
            .where(DigestRun.status == "post_failed", DigestRun.post_attempts < max_attempts)
            .order_by(DigestRun.id)
            .limit(limit)
        )
        return list(self._session.scalars(query))

    def backlog(self, *, max_attempts: int = 10) -> tuple[int, datetime | None]:
        """Built digests not posted yet that are still tried: how many, and when the oldest was claimed."""
        query = select(func.count(), func.min(DigestRun.claimed_at)).where(
            DigestRun.status.in_(("built", "post_failed")), DigestRun.post_attempts < max_attempts
        )
        count, oldest = self._session.execute(query).one()
        return int(count or 0), oldest

    def for_key(self, key: str) -> list[DigestRunRecord]:
        query = select(DigestRun).where(DigestRun.digest_key == key).order_by(DigestRun.scheduled_for, DigestRun.id)
        return [record_of(DigestRunRecord, run) for run in self._session.scalars(query)]
