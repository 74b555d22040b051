"""The watch's rounds and what it knows of each watched cluster, shared by every replica.

A round of a cluster is claimed by inserting its (cluster, round start) row: of the replicas that try,
the unique key lets one in. Whether a cluster answers changes by a conditional update, so that the
replica whose update made the change is the one that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from bot.store import dialect
from bot.store.models import WatchedCluster, WatchRound, utcnow
from bot.store.records import WatchedClusterRecord, WatchRoundRecord, record_of


@dataclass(frozen=True)
class Change:
    """A watched cluster went from answering to not answering, or back; `since` is when the state it
    left began (how long it was unreachable, for the way back)."""

    reachable: bool
    since: datetime


class WatchRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def claim_round(self, *, cluster: str, round_start: datetime, by: str) -> int | None:
        """The round's id, or None when this cluster's round was claimed already (by anyone)."""
        insert = dialect.insert(self._session)
        statement = (
            insert(WatchRound)
            .values(cluster=cluster, round_start=round_start, claimed_by=by[:100], claimed_at=utcnow())
            .on_conflict_do_nothing(index_elements=["cluster", "round_start"])
            .returning(WatchRound.id)
        )
        return self._session.execute(statement).scalar_one_or_none()

    def finish_round(self, round_id: int, *, outcome: str, namespaces: int | None, at: datetime) -> None:
        self._session.execute(
            update(WatchRound)
            .where(WatchRound.id == round_id)
            .values(outcome=outcome, namespaces=namespaces, finished_at=at)
        )

    def prune_rounds(self, before: datetime) -> int:
        """Forget the rounds that started before `before`; how many were forgotten."""
        result = self._session.execute(delete(WatchRound).where(WatchRound.round_start < before))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def rounds(self, cluster: str | None = None) -> list[WatchRoundRecord]:
        query = select(WatchRound).order_by(WatchRound.round_start, WatchRound.cluster)
        if cluster is not None:
            query = query.where(WatchRound.cluster == cluster)
        return [record_of(WatchRoundRecord, row) for row in self._session.scalars(query)]

    def observe(self, cluster: str, *, reachable: bool, reason: str | None, at: datetime) -> Change | None:
        """Record whether the cluster answered at `at`; the change it makes, if this call made it.
        A cluster seen for the first time counts as having answered until then."""
        insert = dialect.insert(self._session)
        self._session.execute(
            insert(WatchedCluster)
            .values(cluster=cluster, reachable=True, changed_at=at, checked_at=at, reason=None)
            .on_conflict_do_nothing(index_elements=["cluster"])
        )
        before = self._session.execute(
            select(WatchedCluster.changed_at).where(WatchedCluster.cluster == cluster)
        ).scalar_one()
        changed = self._session.execute(
            update(WatchedCluster)
            .where(WatchedCluster.cluster == cluster, WatchedCluster.reachable != reachable)
            .values(reachable=reachable, changed_at=at, checked_at=at, reason=reason)
        )
        if changed.rowcount:  # type: ignore[attr-defined]
            return Change(reachable=reachable, since=before)
        self._session.execute(
            update(WatchedCluster).where(WatchedCluster.cluster == cluster).values(checked_at=at, reason=reason)
        )
        return None

    def clusters(self) -> list[WatchedClusterRecord]:
        query = select(WatchedCluster).order_by(WatchedCluster.cluster)
        return [record_of(WatchedClusterRecord, row) for row in self._session.scalars(query)]
