"""The signatures of the Slack requests let in, shared by every replica, so that a replay is refused
wherever it lands. The primary key does the deciding: of two inserts of one signature, one wins."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.orm import Session

from bot.store import dialect
from bot.store.models import SeenRequest, utcnow


class SeenRequestRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def first_sightings(self, sightings: list[tuple[str, int]]) -> list[bool]:
        """Record each (signature, signed at), in one statement; for each, in order, True when its signature
        was not on record (the request is new), False for a replay (of one signature twice, the second)."""
        if not sightings:
            return []
        now = utcnow()
        # the rows as parameters of one statement (SQLAlchemy sends them as one multi-row INSERT): the
        # statement is compiled once and cached, where rows written into it were compiled anew for every
        # request let in (a third of the CPU of an acknowledgement, bench/slack.py)
        statement = (
            dialect.insert(self._session)(SeenRequest)
            .on_conflict_do_nothing(index_elements=["signature"])
            .returning(SeenRequest.signature)
        )
        rows = [{"signature": sig, "request_ts": ts, "seen_at": now} for sig, ts in sightings]
        new = set(self._session.connection().execute(statement, rows if len(rows) > 1 else rows[0]).scalars())
        firsts = []
        for signature, _ in sightings:
            firsts.append(signature in new)
            new.discard(signature)
        return firsts

    def prune(self, before_ts: int) -> int:
        """Forget the requests signed before `before_ts` (epoch seconds); how many were forgotten."""
        result = self._session.execute(delete(SeenRequest).where(SeenRequest.request_ts < before_ts))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
