"""Repositories: queries and inserts for one aggregate each. They flush, never commit."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.store.models import DiagnosisRun, Incident


class IncidentRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, incident: Incident) -> Incident:
        self._session.add(incident)
        self._session.flush()
        return incident

    def get(self, incident_id: int) -> Incident | None:
        return self._session.get(Incident, incident_id)

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
