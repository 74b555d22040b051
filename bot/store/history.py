"""Read-only queries behind `nsstuck history` and `/nsstuck history`: recent incidents and a summary.

Every query is shaped for the indexes of the schema (migration 0001); the plans below are what
PostgreSQL chose on the benchmark's 100,000 incidents (bench/history.py prints them):

- the list is two queries, open then resolved, each `WHERE status = ? [AND cluster = ?] ORDER BY
  first_seen_at DESC, id DESC LIMIT n`: `ix_incidents_status_first_seen_at` read backwards, so
  the newest rows come straight off the index (a few hundred rows read for a 10,000-incident
  cluster) instead of sorting every incident of the cluster; for a small cluster, or with a
  namespace, the planner takes `ix_incidents_cluster_namespace_status` and sorts a handful of rows.
  A namespace without a cluster (`nsstuck history --namespace X`) has no index and scans the table;
- `ix_diagnoses_incident_id_started_at`: the number of runs and the last run of the listed
  incidents only (at most `limit` of them);
- the summary is three statements: one GROUP BY status, cause, cluster for the three breakdowns,
  one for the recurring namespaces, one for the median, each one pass over the scope.

The median time to resolution is `percentile_cont(0.5)` on PostgreSQL; SQLite has no ordered-set
aggregate, so there it is the middle row (or the mean of the two middle rows) of the resolved
incidents ordered by duration: COUNT, then one `ORDER BY ... LIMIT 1|2 OFFSET (n-1)/2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from bot.store import dialect
from bot.store.models import AuditEntry, DiagnosisRun, Incident, RemediationRequest
from bot.store.records import IncidentRecord, record_of

# how many recurring namespaces the summary names, most frequent first
RECURRING_LIMIT = 10


@dataclass(frozen=True)
class RunStats:
    """The diagnosis runs of one incident: how many, and when the last one started."""

    runs: int
    last_started_at: datetime | None


@dataclass(frozen=True)
class Recurring:
    cluster: str
    namespace: str
    incidents: int


@dataclass(frozen=True)
class Fix:
    """The remedy executed for an incident (the latest applied request) and its audit entry."""

    request_id: int
    action: str
    audit_seq: int | None
    audit_hash: str | None


@dataclass(frozen=True)
class SeenRow:
    incident: IncidentRecord
    fix: Fix | None


@dataclass(frozen=True)
class SummaryRows:
    """The aggregates of the summary, as the database computed them."""

    by_status: dict[str, int]
    by_cause: list[tuple[str | None, int]]
    by_cluster: list[tuple[str, int]]
    median_resolution_seconds: float | None
    resolved: int
    recurring: list[Recurring]


class HistoryRepository:
    """Queries over incidents for the history views. Reads only; never flushes or commits."""

    def __init__(self, session: Session) -> None:
        self._session = session

    # -- the list -----------------------------------------------------------------------------

    def recent(
        self,
        *,
        cluster: str | None = None,
        namespace: str | None = None,
        open_only: bool = False,
        limit: int = 20,
        within: Sequence[str] | None = None,
        cause: str | None = None,
    ) -> list[IncidentRecord]:
        """At most `limit` incidents: the open ones first, then the resolved ones, newest first in each.
        `within`: only these clusters."""
        if limit <= 0:
            return []
        scope = self._scope(cluster, namespace, within, cause)
        found = list(self._session.scalars(self._page("open", scope, limit)))
        if not open_only and len(found) < limit:
            found.extend(self._session.scalars(self._page("resolved", scope, limit - len(found))))
        return [record_of(IncidentRecord, incident) for incident in found]

    def _page(self, status: str, scope: list[ColumnElement[bool]], limit: int) -> Select[Incident]:
        query = select(Incident).where(*scope, Incident.status == status)
        return query.order_by(Incident.first_seen_at.desc(), Incident.id.desc()).limit(limit)

    def run_stats(self, incident_ids: Sequence[int]) -> dict[int, RunStats]:
        """Runs per incident, for the listed incidents only (the index on incident_id serves it)."""
        if not incident_ids:
            return {}
        query = (
            select(DiagnosisRun.incident_id, func.count(), func.max(DiagnosisRun.started_at))
            .where(DiagnosisRun.incident_id.in_(list(incident_ids)))
            .group_by(DiagnosisRun.incident_id)
        )
        stats: dict[int, RunStats] = {}
        for incident_id, runs, last in self._session.execute(query):
            if incident_id is not None:
                stats[int(incident_id)] = RunStats(runs=int(runs), last_started_at=last)
        return stats

    # -- seen before (issue 39 §3) --------------------------------------------------------------

    def seen_before(self, *, cluster: str, cause: str, blocker: str, exclude: int, limit: int) -> list[SeenRow]:
        """The newest `limit` other incidents of the cluster with this cause and blocking object family
        (`ix_incidents_cluster_cause_blocker_first_seen_at` read backwards), each with its executed fix."""
        query = self._seen_query(cluster=cluster, cause=cause, blocker=blocker, exclude=exclude, limit=limit)
        incidents = [record_of(IncidentRecord, i) for i in self._session.scalars(query)]
        fixes = self._fixes([i.id for i in incidents])
        return [SeenRow(incident=i, fix=fixes.get(i.id)) for i in incidents]

    @staticmethod
    def _seen_query(*, cluster: str, cause: str, blocker: str, exclude: int, limit: int) -> Select[Incident]:
        return (
            select(Incident)
            .where(
                Incident.cluster == cluster,
                Incident.cause == cause,
                Incident.blocker == blocker,
                Incident.id != exclude,
            )
            .order_by(Incident.first_seen_at.desc(), Incident.id.desc())
            .limit(limit)
        )

    def _fixes(self, incident_ids: list[int]) -> dict[int, Fix]:
        if not incident_ids:
            return {}
        applied = (
            select(RemediationRequest.id, RemediationRequest.incident_id, RemediationRequest.action)
            .where(RemediationRequest.incident_id.in_(incident_ids), RemediationRequest.status == "applied")
            .order_by(RemediationRequest.finished_at.desc(), RemediationRequest.id.desc())
        )
        latest: dict[int, tuple[int, str]] = {}
        for request_id, incident_id, action in self._session.execute(applied):
            if incident_id is not None:
                latest.setdefault(int(incident_id), (int(request_id), str(action)))
        if not latest:
            return {}
        entries = select(AuditEntry.request_id, AuditEntry.seq, AuditEntry.hash).where(
            AuditEntry.request_id.in_([r for r, _ in latest.values()]), AuditEntry.event == "applied"
        )
        audit = {int(r): (int(seq), str(h)) for r, seq, h in self._session.execute(entries) if r is not None}
        out = {}
        for incident_id, (request_id, action) in latest.items():
            seq, digest = audit.get(request_id, (None, None))
            out[incident_id] = Fix(request_id=request_id, action=action, audit_seq=seq, audit_hash=digest)
        return out

    def recurrences(self, *, cluster: str, cause: str, blocker: str, since: datetime) -> int:
        """How many incidents of the cluster with this cause and family were first seen since `since`
        (the same index, a range of it)."""
        query = select(func.count()).where(
            Incident.cluster == cluster,
            Incident.cause == cause,
            Incident.blocker == blocker,
            Incident.first_seen_at >= since,
        )
        return int(self._session.scalar(query) or 0)

    # -- the summary --------------------------------------------------------------------------

    def summary(
        self,
        *,
        cluster: str | None = None,
        namespace: str | None = None,
        within: Sequence[str] | None = None,
        cause: str | None = None,
    ) -> SummaryRows:
        """Counts by status, cause and cluster, the median time to resolution, the recurring namespaces."""
        scope = self._scope(cluster, namespace, within, cause)
        count = func.count().label("n")
        # one pass over the scope for the three breakdowns: at most statuses x causes x clusters groups
        by_status: dict[str, int] = {}
        causes: dict[str | None, int] = {}
        clusters: dict[str, int] = {}
        grouped = select(Incident.status, Incident.cause, Incident.cluster, count).where(*scope)
        for status, its_cause, name, n in self._session.execute(
            grouped.group_by(Incident.status, Incident.cause, Incident.cluster)
        ):
            by_status[str(status)] = by_status.get(str(status), 0) + int(n)
            key = None if its_cause is None else str(its_cause)
            causes[key] = causes.get(key, 0) + int(n)
            clusters[str(name)] = clusters.get(str(name), 0) + int(n)
        by_cause = list(causes.items())
        by_cluster = list(clusters.items())
        # largest first, then by name
        by_cause.sort(key=lambda item: (-item[1], item[0] or ""))
        by_cluster.sort(key=lambda item: (-item[1], item[0]))
        recurring_query = (
            select(Incident.cluster, Incident.namespace, count)
            .where(*scope)
            .group_by(Incident.cluster, Incident.namespace)
            .having(func.count() > 1)
            .order_by(count.desc(), Incident.cluster, Incident.namespace)
            .limit(RECURRING_LIMIT)
        )
        recurring = [
            Recurring(cluster=str(c), namespace=str(ns), incidents=int(n))
            for c, ns, n in self._session.execute(recurring_query)
        ]
        resolved = by_status.get("resolved", 0)
        return SummaryRows(
            by_status=by_status,
            by_cause=by_cause,
            by_cluster=by_cluster,
            median_resolution_seconds=self._median_resolution(scope, resolved),
            resolved=resolved,
            recurring=recurring,
        )

    def _median_resolution(self, scope: list[ColumnElement[bool]], resolved: int) -> float | None:
        if resolved == 0:
            return None
        where = [*scope, Incident.status == "resolved", Incident.resolved_at.is_not(None)]
        return dialect.median(self._session, self._resolution_seconds(), *where)

    def _resolution_seconds(self) -> ColumnElement[Any]:
        """resolved_at minus when it started (terminating_since, else first_seen_at), in seconds."""
        started = func.coalesce(Incident.terminating_since, Incident.first_seen_at)
        return dialect.seconds_between(self._session, Incident.resolved_at, started)

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _scope(
        cluster: str | None, namespace: str | None, within: Sequence[str] | None, cause: str | None = None
    ) -> list[ColumnElement[bool]]:
        scope: list[ColumnElement[bool]] = []
        if within is not None:  # an empty IN is false on both dialects: nothing
            scope.append(Incident.cluster.in_(list(within)))
        if cluster is not None:
            scope.append(Incident.cluster == cluster)
        if namespace is not None:
            scope.append(Incident.namespace == namespace)
        if cause is not None:
            scope.append(Incident.cause == cause)
        return scope
