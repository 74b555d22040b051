"""The history use case: recent incidents (open first) and a summary, as plain values.

Both doors call `history()`: `nsstuck history` prints it (`history_text.render_text`) or its JSON,
`/nsstuck history [<cluster> [<namespace>]]` renders it as Block Kit (`bot.slack.history_blocks`).
Nothing of the ORM leaves this module: the result is frozen dataclasses made of str, int and
timezone-aware datetimes, so it can be rendered after the unit of work has closed.

The filters narrow the list and the summary alike, except `open_only`, which narrows the list only
(a summary of open incidents alone would have no time to resolution to speak of).

JSON (`nsstuck history --json`), schema "nsstuck.history/v1"::

    {
      "schema": "nsstuck.history/v1",
      "generated_at": "2026-11-21T10:00:00Z",
      "filters": {"cluster": "prod-eu", "namespace": null, "open_only": false, "limit": 20},
      "incidents": [                              # open first, then resolved; newest first in each
        {
          "id": 42,
          "cluster": "prod-eu",
          "namespace": "istio-system",
          "namespace_uid": "6f0c...",
          "status": "open",                       # open | resolved
          "cause": "orphaned_finalizer",          # a cause of the diagnosis contract, or null
          "terminating_since": "2026-11-21T08:00:00Z",   # or null when unknown
          "first_seen_at": "2026-11-21T08:05:00Z",
          "resolved_at": null,                    # set when resolved
          "open_for_seconds": 7200,               # open: since it started (terminating_since, else first_seen_at)
          "time_to_resolution_seconds": null,     # resolved: resolved_at minus that same start
          "diagnoses": 3,                         # runs recorded for this incident
          "last_diagnosed_at": "2026-11-21T09:30:00Z",
          "slack": {"channel": "C0123ABCD", "thread_ts": "1763712000.000100"}   # or null
        }
      ],
      "summary": {
        "incidents": 120, "open": 4, "resolved": 116,
        "by_cause": [{"cause": "orphaned_finalizer", "count": 61}, {"cause": null, "count": 2}],
        "by_cluster": [{"cluster": "prod-eu", "count": 120}],
        "median_time_to_resolution_seconds": 11520,   # null when nothing is resolved yet
        "recurring": [{"cluster": "prod-eu", "namespace": "istio-system", "incidents": 5}]
      }
    }

Counts are sorted by count, largest first, then by name; `recurring` lists at most 10 namespaces
(same cluster and name, more than one incident, that is more than one namespace UID).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.store.database import Database
from bot.store.history import RunStats, SummaryRows
from bot.store.records import IncidentRecord

SCHEMA = "nsstuck.history/v1"
MAX_LIMIT = 500


@dataclass(frozen=True)
class SlackThread:
    channel: str
    thread_ts: str


@dataclass(frozen=True)
class IncidentEntry:
    id: int
    cluster: str
    namespace: str
    namespace_uid: str
    status: str
    cause: str | None
    terminating_since: datetime | None
    first_seen_at: datetime
    resolved_at: datetime | None
    diagnoses: int
    last_diagnosed_at: datetime | None
    thread: SlackThread | None

    @property
    def is_open(self) -> bool:
        return self.status == "open"

    @property
    def started_at(self) -> datetime:
        """When the trouble started: the deletion timestamp if known, else when nsstuck first saw it."""
        return self.terminating_since or self.first_seen_at

    @property
    def time_to_resolution_seconds(self) -> int | None:
        if self.resolved_at is None:
            return None
        return max(0, round((self.resolved_at - self.started_at).total_seconds()))

    def open_for_seconds(self, now: datetime) -> int | None:
        if self.resolved_at is not None or not self.is_open:
            return None
        return max(0, round((now - self.started_at).total_seconds()))


@dataclass(frozen=True)
class Count:
    name: str | None
    count: int


@dataclass(frozen=True)
class RecurringNamespace:
    cluster: str
    namespace: str
    incidents: int


@dataclass(frozen=True)
class Summary:
    incidents: int
    open: int
    resolved: int
    by_cause: tuple[Count, ...]
    by_cluster: tuple[Count, ...]
    median_time_to_resolution_seconds: int | None
    recurring: tuple[RecurringNamespace, ...]


@dataclass(frozen=True)
class Filters:
    cluster: str | None = None
    namespace: str | None = None
    open_only: bool = False
    limit: int = 20
    # `nsstuck history --cause C` (issue 39 §3): only incidents of this cause
    cause: str | None = None
    # only these clusters (a channel's, for `/nsstuck history`); None: every cluster. Not in the JSON:
    # the command line, which writes it, never narrows this way
    within: tuple[str, ...] | None = None


@dataclass(frozen=True)
class History:
    generated_at: datetime
    filters: Filters
    incidents: tuple[IncidentEntry, ...]
    summary: Summary

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "generated_at": _iso(self.generated_at),
            "filters": {
                "cluster": self.filters.cluster,
                "namespace": self.filters.namespace,
                "open_only": self.filters.open_only,
                "limit": self.filters.limit,
                # an addition to nsstuck.history/v1: only with --cause
                **({"cause": self.filters.cause} if self.filters.cause else {}),
            },
            "incidents": [_entry_json(entry, self.generated_at) for entry in self.incidents],
            "summary": {
                "incidents": self.summary.incidents,
                "open": self.summary.open,
                "resolved": self.summary.resolved,
                "by_cause": [{"cause": c.name, "count": c.count} for c in self.summary.by_cause],
                "by_cluster": [{"cluster": c.name, "count": c.count} for c in self.summary.by_cluster],
                "median_time_to_resolution_seconds": self.summary.median_time_to_resolution_seconds,
                "recurring": [
                    {"cluster": r.cluster, "namespace": r.namespace, "incidents": r.incidents}
                    for r in self.summary.recurring
                ],
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document: schema {data.get('schema')!r}")
        filters = data["filters"]
        summary = data["summary"]
        generated_at = _parse(data["generated_at"])
        if generated_at is None:
            raise ValueError("generated_at is required")
        return cls(
            generated_at=generated_at,
            filters=Filters(
                cluster=filters["cluster"],
                namespace=filters["namespace"],
                open_only=bool(filters["open_only"]),
                limit=int(filters["limit"]),
                cause=filters.get("cause"),
            ),
            incidents=tuple(_entry_from_json(item) for item in data["incidents"]),
            summary=Summary(
                incidents=int(summary["incidents"]),
                open=int(summary["open"]),
                resolved=int(summary["resolved"]),
                by_cause=tuple(Count(c["cause"], int(c["count"])) for c in summary["by_cause"]),
                by_cluster=tuple(Count(c["cluster"], int(c["count"])) for c in summary["by_cluster"]),
                median_time_to_resolution_seconds=summary["median_time_to_resolution_seconds"],
                recurring=tuple(
                    RecurringNamespace(r["cluster"], r["namespace"], int(r["incidents"])) for r in summary["recurring"]
                ),
            ),
        )


def history(
    db: Database,
    *,
    cluster: str | None = None,
    namespace: str | None = None,
    open_only: bool = False,
    limit: int = 20,
    now: datetime | None = None,
    within: Collection[str] | None = None,
    cause: str | None = None,
) -> History:
    """Recent incidents (open first, newest first) and the summary of the same cluster/namespace scope;
    `within` narrows both to those clusters (none at all when it is empty)."""
    if limit < 1 or limit > MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    clusters = None if within is None else tuple(sorted(set(within)))
    with db.unit_of_work() as uow:
        repository = uow.history
        incidents = repository.recent(
            cluster=cluster, namespace=namespace, open_only=open_only, limit=limit, within=clusters, cause=cause
        )
        stats = repository.run_stats([incident.id for incident in incidents])
        entries = tuple(_entry(incident, stats.get(incident.id)) for incident in incidents)
        rows = repository.summary(cluster=cluster, namespace=namespace, within=clusters, cause=cause)
    return History(
        generated_at=now or datetime.now(UTC),
        filters=Filters(
            cluster=cluster, namespace=namespace, open_only=open_only, limit=limit, within=clusters, cause=cause
        ),
        incidents=entries,
        summary=_summary(rows),
    )


def narrowed(found: History, visible: Callable[[str, str], bool], *, limit: int) -> History:
    """`found` with only the incidents `visible(cluster, namespace)` allows, at most `limit` of them; its
    summary is then counted over those alone (the counts of the whole history would tell of incidents the
    person may not see), its median from them and its recurring namespaces only visible ones."""
    shown = tuple(e for e in found.incidents if visible(e.cluster, e.namespace))[:limit]
    causes = Counter(e.cause for e in shown)
    clusters = Counter(e.cluster for e in shown)
    times = sorted(t for e in shown if (t := e.time_to_resolution_seconds) is not None)
    median = None if not times else round(statistics.median(times))
    summary = Summary(
        incidents=len(shown),
        open=sum(1 for e in shown if e.is_open),
        resolved=sum(1 for e in shown if e.resolved_at is not None),
        by_cause=tuple(Count(name, n) for name, n in causes.most_common()),
        by_cluster=tuple(Count(name, n) for name, n in clusters.most_common()),
        median_time_to_resolution_seconds=median,
        recurring=tuple(r for r in found.summary.recurring if visible(r.cluster, r.namespace)),
    )
    return replace(found, filters=replace(found.filters, limit=limit), incidents=shown, summary=summary)


def _entry(incident: IncidentRecord, stats: RunStats | None) -> IncidentEntry:
    thread = None
    if incident.slack_channel and incident.slack_thread_ts:
        thread = SlackThread(channel=incident.slack_channel, thread_ts=incident.slack_thread_ts)
    return IncidentEntry(
        id=incident.id,
        cluster=incident.cluster,
        namespace=incident.namespace,
        namespace_uid=incident.namespace_uid,
        status=incident.status,
        cause=incident.cause,
        terminating_since=incident.terminating_since,
        first_seen_at=incident.first_seen_at,
        resolved_at=incident.resolved_at,
        diagnoses=stats.runs if stats else 0,
        last_diagnosed_at=stats.last_started_at if stats else None,
        thread=thread,
    )


def _summary(rows: SummaryRows) -> Summary:
    median = rows.median_resolution_seconds
    return Summary(
        incidents=sum(rows.by_status.values()),
        open=rows.by_status.get("open", 0),
        resolved=rows.resolved,
        by_cause=tuple(Count(name, n) for name, n in rows.by_cause),
        by_cluster=tuple(Count(name, n) for name, n in rows.by_cluster),
        median_time_to_resolution_seconds=None if median is None else max(0, round(median)),
        recurring=tuple(RecurringNamespace(r.cluster, r.namespace, r.incidents) for r in rows.recurring),
    )


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _entry_json(entry: IncidentEntry, now: datetime) -> dict[str, Any]:
    return {
        "id": entry.id,
        "cluster": entry.cluster,
        "namespace": entry.namespace,
        "namespace_uid": entry.namespace_uid,
        "status": entry.status,
        "cause": entry.cause,
        "terminating_since": _iso(entry.terminating_since),
        "first_seen_at": _iso(entry.first_seen_at),
        "resolved_at": _iso(entry.resolved_at),
        "open_for_seconds": entry.open_for_seconds(now),
        "time_to_resolution_seconds": entry.time_to_resolution_seconds,
        "diagnoses": entry.diagnoses,
        "last_diagnosed_at": _iso(entry.last_diagnosed_at),
        "slack": {"channel": entry.thread.channel, "thread_ts": entry.thread.thread_ts} if entry.thread else None,
    }


def _entry_from_json(item: dict[str, Any]) -> IncidentEntry:
    slack = item.get("slack")
    first_seen = _parse(item["first_seen_at"])
    if first_seen is None:
        raise ValueError("first_seen_at is required")
    return IncidentEntry(
        id=int(item["id"]),
        cluster=item["cluster"],
        namespace=item["namespace"],
        namespace_uid=item["namespace_uid"],
        status=item["status"],
        cause=item["cause"],
        terminating_since=_parse(item["terminating_since"]),
        first_seen_at=first_seen,
        resolved_at=_parse(item["resolved_at"]),
        diagnoses=int(item["diagnoses"]),
        last_diagnosed_at=_parse(item["last_diagnosed_at"]),
        thread=SlackThread(slack["channel"], slack["thread_ts"]) if slack else None,
    )
