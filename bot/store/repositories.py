"""Repositories: queries and inserts for one aggregate each. They flush, never commit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bot.domain.statuses import IncidentStatus
from bot.store import dialect
from bot.store.models import DiagnosisRun, Incident, utcnow
from bot.store.records import IncidentRecord, RunRecord, record_of


class IncidentRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, incident: Incident) -> IncidentRecord:
        self._session.add(incident)
        self._session.flush()
        return record_of(IncidentRecord, incident)

    def get(self, incident_id: int) -> IncidentRecord | None:
        incident = self._session.get(Incident, incident_id)
        return None if incident is None else record_of(IncidentRecord, incident)

    def open_for(
        self,
        *,
        cluster: str,
        namespace: str,
        namespace_uid: str,
        terminating_since: datetime | None,
        cause: str | None,
        blocker: str | None = None,
    ) -> IncidentRecord:
        """The incident of this namespace UID, created if needed, its cause set to `cause` and its blocking
        object family to `blocker` (both kept as they were when `cause` is None).

        Concurrent callers (retried deliveries, two replicas) converge on one row: the insert yields
        to the unique key instead of checking first, and everyone then reads the row that won.
        """
        values: dict[str, Any] = {
            "cluster": cluster,
            "namespace": namespace,
            "namespace_uid": namespace_uid,
            "terminating_since": terminating_since,
            "cause": cause,
            "blocker": blocker if cause is not None else None,
            "status": IncidentStatus.OPEN,
        }
        insert = dialect.insert(self._session)
        now = utcnow()
        statement = insert(Incident).values(first_seen_at=now, created_at=now, updated_at=now, **values)
        self._session.execute(statement.on_conflict_do_nothing(index_elements=["cluster", "namespace_uid"]))
        incident = self._by_namespace_uid(cluster, namespace_uid)
        if incident is None:  # pragma: no cover - the row exists after the insert above
            raise RuntimeError("incident vanished after insert")
        self._session.refresh(incident)
        if cause is not None:
            incident.cause = cause
            incident.blocker = blocker
            self._session.flush()
        return record_of(IncidentRecord, incident)

    def resolve(self, incident_id: int, at: datetime) -> bool:
        """open -> resolved, once: True only for the caller whose update made the change."""
        result = self._session.execute(
            update(Incident)
            .where(Incident.id == incident_id, Incident.status == IncidentStatus.OPEN)
            .values(status=IncidentStatus.RESOLVED, resolved_at=at, last_checked_at=at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def claim_thread(self, incident_id: int, channel: str, thread_ts: str) -> tuple[str, str]:
        """Attach a Slack thread unless one is attached already; returns the incident's thread."""
        self._session.execute(
            update(Incident)
            .where(Incident.id == incident_id, Incident.slack_thread_ts.is_(None))
            .values(slack_channel=channel, slack_thread_ts=thread_ts)
        )
        incident = self._session.get(Incident, incident_id)
        if incident is None:
            raise LookupError(f"no incident {incident_id}")
        self._session.refresh(incident)
        return str(incident.slack_channel), str(incident.slack_thread_ts)

    def claim_watch_post(self, incident_id: int, at: datetime) -> bool:
        """The watch posts this open incident's verdict unasked, once: True only for the caller whose
        update marked it."""
        result = self._session.execute(
            update(Incident)
            .where(
                Incident.id == incident_id,
                Incident.status == IncidentStatus.OPEN,
                Incident.watch_posted_at.is_(None),
            )
            .values(watch_posted_at=at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def not_for_the_watch(self, cluster: str, namespace_uids: Iterable[str]) -> set[str]:
        """Of these namespace UIDs of the cluster, those the watch has nothing to post for: its verdict was
        posted already, or the incident is resolved (it stays so: `open_for` never reopens one)."""
        uids = list(namespace_uids)
        if not uids:
            return set()
        query = select(Incident.namespace_uid).where(
            Incident.cluster == cluster,
            Incident.namespace_uid.in_(uids),
            Incident.watch_posted_at.is_not(None) | (Incident.status != IncidentStatus.OPEN),
        )
        return set(self._session.scalars(query))

    def mark_checked(self, incident_id: int, at: datetime) -> None:
        """The follow-up looked at the incident's namespace at `at`."""
        self._session.execute(update(Incident).where(Incident.id == incident_id).values(last_checked_at=at))

    def set_observations(self, incident_id: int, observations: list[Any]) -> None:
        """What the looks at the incident's namespace saw, for progress (the caller bounds the list)."""
        self._session.execute(update(Incident).where(Incident.id == incident_id).values(observations=observations))

    def open_by_name(self, cluster: str, namespace: str) -> IncidentRecord | None:
        """The newest open incident of this namespace name on the cluster (the name may have had others)."""
        query = (
            select(Incident)
            .where(Incident.cluster == cluster, Incident.namespace == namespace, Incident.status == IncidentStatus.OPEN)
            .order_by(Incident.first_seen_at.desc(), Incident.id.desc())
            .limit(1)
        )
        incident = self._session.scalars(query).one_or_none()
        return None if incident is None else record_of(IncidentRecord, incident)

    def mark_resolution_posted(self, incident_id: int, at: datetime) -> None:
        """The thread was told that the incident is resolved."""
        self._session.execute(update(Incident).where(Incident.id == incident_id).values(resolution_posted_at=at))

    def _by_namespace_uid(self, cluster: str, namespace_uid: str) -> Incident | None:
        query = select(Incident).where(Incident.cluster == cluster, Incident.namespace_uid == namespace_uid)
        return self._session.scalars(query).one_or_none()

    def by_namespace_uid(self, cluster: str, namespace_uid: str) -> IncidentRecord | None:
        incident = self._by_namespace_uid(cluster, namespace_uid)
        return None if incident is None else record_of(IncidentRecord, incident)

    def open_incidents(self, cluster: str | None = None) -> list[IncidentRecord]:
        query = select(Incident).where(Incident.status == IncidentStatus.OPEN)
        if cluster is not None:
            query = query.where(Incident.cluster == cluster)
        ordered = query.order_by(Incident.first_seen_at, Incident.id)
        return [record_of(IncidentRecord, incident) for incident in self._session.scalars(ordered)]


class DiagnosisRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, run_id: int) -> RunRecord | None:
        run = self._session.get(DiagnosisRun, run_id)
        return None if run is None else record_of(RunRecord, run)

    def unposted(self, *, max_attempts: int, older_than: datetime, limit: int = 50) -> Sequence[int]:
        """Runs still to be posted: the last attempt failed, or nothing was heard of them since
        `older_than` (the poster crashed). A run being posted right now is neither: its claim cleared
        the last error, and it is younger than the lease."""
        query = (
            select(DiagnosisRun.id)
            .where(
                DiagnosisRun.posted_at.is_(None),
                DiagnosisRun.post_channel.is_not(None),
                DiagnosisRun.post_attempts < max_attempts,
                DiagnosisRun.last_post_error.is_not(None) | (DiagnosisRun.created_at < older_than),
            )
            .order_by(DiagnosisRun.id)
            .limit(limit)
        )
        return self._session.scalars(query).all()

    def backlog(self, *, max_attempts: int) -> tuple[int, datetime | None]:
        """Runs waiting to be posted that the outbox still tries: how many, and when the oldest was made."""
        query = select(func.count(), func.min(DiagnosisRun.created_at)).where(
            DiagnosisRun.posted_at.is_(None),
            DiagnosisRun.post_channel.is_not(None),
            DiagnosisRun.post_attempts < max_attempts,
        )
        count, oldest = self._session.execute(query).one()
        return int(count or 0), oldest

    def prune_snapshots(self, older_than: datetime) -> int:
        """Drop the stored snapshots of runs started before `older_than`; the runs and reports stay."""
        result = self._session.execute(
            update(DiagnosisRun)
            .where(DiagnosisRun.started_at < older_than, DiagnosisRun.snapshot.is_not(None))
            .values(snapshot=None)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    def claim_post(self, run_id: int, attempts_seen: int) -> bool:
        """Take the next posting attempt of a run; False when someone else took it (or it was posted)."""
        result = self._session.execute(
            update(DiagnosisRun)
            .where(
                DiagnosisRun.id == run_id,
                DiagnosisRun.post_attempts == attempts_seen,
                DiagnosisRun.posted_at.is_(None),
            )
            .values(post_attempts=attempts_seen + 1, last_post_error=None)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def mark_posted(self, run_id: int, at: datetime) -> None:
        self._session.execute(
            update(DiagnosisRun).where(DiagnosisRun.id == run_id).values(posted_at=at, last_post_error=None)
        )

    def mark_post_failed(self, run_id: int, error: str) -> None:
        self._session.execute(update(DiagnosisRun).where(DiagnosisRun.id == run_id).values(last_post_error=error[:200]))

    def add(self, run: DiagnosisRun) -> RunRecord:
        self._session.add(run)
        self._session.flush()
        return record_of(RunRecord, run)

    def record(self, **values: Any) -> int:
        """A new run from its column values; its id."""
        return self.add(DiagnosisRun(**values)).id

    def for_incident(self, incident_id: int) -> list[RunRecord]:
        query = (
            select(DiagnosisRun)
            .where(DiagnosisRun.incident_id == incident_id)
            .order_by(DiagnosisRun.started_at, DiagnosisRun.id)
        )
        return [record_of(RunRecord, run) for run in self._session.scalars(query)]
