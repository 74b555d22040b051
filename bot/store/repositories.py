"""Repositories: queries and inserts for one aggregate each. They flush, never commit."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from bot.store.models import DiagnosisRun, Incident, utcnow


class IncidentRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, incident: Incident) -> Incident:
        self._session.add(incident)
        self._session.flush()
        return incident

    def get(self, incident_id: int) -> Incident | None:
        return self._session.get(Incident, incident_id)

    def open_for(
        self, *, cluster: str, namespace: str, namespace_uid: str, terminating_since: datetime | None, cause: str | None
    ) -> Incident:
        """The incident of this namespace UID, created if needed.

        Concurrent callers (retried deliveries, two replicas) converge on one row: the insert yields
        to the unique key instead of checking first, and everyone then reads the row that won.
        """
        values: dict[str, Any] = {
            "cluster": cluster,
            "namespace": namespace,
            "namespace_uid": namespace_uid,
            "terminating_since": terminating_since,
            "cause": cause,
            "status": "open",
        }
        dialect = self._session.get_bind().dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        now = utcnow()
        statement = insert(Incident).values(first_seen_at=now, created_at=now, updated_at=now, **values)
        self._session.execute(statement.on_conflict_do_nothing(index_elements=["cluster", "namespace_uid"]))
        incident = self.by_namespace_uid(cluster, namespace_uid)
        if incident is None:  # pragma: no cover - the row exists after the insert above
            raise RuntimeError("incident vanished after insert")
        self._session.refresh(incident)
        return incident

    def resolve(self, incident_id: int, at: datetime) -> bool:
        """open -> resolved, once: True only for the caller whose update made the change."""
        result = self._session.execute(
            update(Incident)
            .where(Incident.id == incident_id, Incident.status == "open")
            .values(status="resolved", resolved_at=at, last_checked_at=at)
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

    def by_namespace_uid(self, cluster: str, namespace_uid: str) -> Incident | None:
        query = select(Incident).where(Incident.cluster == cluster, Incident.namespace_uid == namespace_uid)
        return self._session.scalars(query).one_or_none()

    def open_incidents(self, cluster: str | None = None) -> Sequence[Incident]:
        query = select(Incident).where(Incident.status == "open")
        if cluster is not None:
            query = query.where(Incident.cluster == cluster)
        return self._session.scalars(query.order_by(Incident.first_seen_at, Incident.id)).all()


class DiagnosisRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, run_id: int) -> DiagnosisRun | None:
        return self._session.get(DiagnosisRun, run_id)

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

    def add(self, run: DiagnosisRun) -> DiagnosisRun:
        self._session.add(run)
        self._session.flush()
        return run

    def for_incident(self, incident_id: int) -> Sequence[DiagnosisRun]:
        query = (
            select(DiagnosisRun)
            .where(DiagnosisRun.incident_id == incident_id)
            .order_by(DiagnosisRun.started_at, DiagnosisRun.id)
        )
        return self._session.scalars(query).all()
