"""History on both databases: filters, open first, summary counts, median time to resolution, recurring."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.services.history import SCHEMA, History, history
from bot.store.database import Database
from bot.store.models import DiagnosisRun, Incident

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _incident(
    cluster: str,
    namespace: str,
    uid: str,
    *,
    first_seen: datetime,
    cause: str | None,
    since: datetime | None = None,
    resolved_after: timedelta | None = None,
    thread: tuple[str, str] | None = None,
) -> Incident:
    start = since or first_seen
    return Incident(
        cluster=cluster,
        namespace=namespace,
        namespace_uid=uid,
        status="resolved" if resolved_after is not None else "open",
        cause=cause,
        terminating_since=since,
        first_seen_at=first_seen,
        resolved_at=start + resolved_after if resolved_after is not None else None,
        slack_channel=thread[0] if thread else None,
        slack_thread_ts=thread[1] if thread else None,
    )


def _fill(database: Database) -> dict[str, int]:
    """Six incidents on two clusters; istio-system on prod-eu came back twice (three UIDs)."""
    rows = {
        # resolved 1 h after it started terminating (first seen 10 minutes later)
        "istio-1": _incident(
            "prod-eu", "istio-system", "uid-i1", first_seen=T0 + 10 * timedelta(minutes=1), since=T0,
            cause="orphaned_finalizer", resolved_after=HOUR,
        ),
        # no deletion timestamp known: 3 h from first sighting
        "istio-2": _incident(
            "prod-eu", "istio-system", "uid-i2", first_seen=T0 + 24 * HOUR, cause="orphaned_finalizer",
            resolved_after=3 * HOUR,
        ),
        "istio-3": _incident(
            "prod-eu", "istio-system", "uid-i3", first_seen=T0 + 72 * HOUR, since=T0 + 71 * HOUR,
            cause="apiservice_unavailable", thread=("C0123ABCD", "1763712000.000100"),
        ),
        "monitoring": _incident(
            "prod-eu", "monitoring", "uid-m1", first_seen=T0 - 24 * HOUR, cause="apiservice_unavailable"
        ),
        "app": _incident(
            "prod-us", "app", "uid-a1", first_seen=T0 + 96 * HOUR, cause="pvc_in_use", resolved_after=2 * HOUR
        ),
        "other": _incident(
            "prod-us", "other", "uid-o1", first_seen=T0 + 48 * HOUR, cause=None, resolved_after=5 * HOUR
        ),
    }  # fmt: skip
    with database.unit_of_work() as uow:
        for incident in rows.values():
            uow.incidents.add(incident)
        for minutes in (0, 30, 90):
            uow.diagnoses.add(
                DiagnosisRun(
                    incident_id=rows["istio-3"].id, cluster="prod-eu", namespace="istio-system", trigger="slack",
                    requested_by="U1", started_at=T0 + 72 * HOUR + timedelta(minutes=minutes), state="terminating",
                    cause="apiservice_unavailable", report={"schema": "nsstuck.diagnosis/v1"},
                )
            )  # fmt: skip
        return {name: incident.id for name, incident in rows.items()}


def _names(result: History, ids: dict[str, int]) -> list[str]:
    by_id = {value: key for key, value in ids.items()}
    return [by_id[entry.id] for entry in result.incidents]


def test_open_first_then_newest_first(database: Database) -> None:
    ids = _fill(database)
    result = history(database, now=NOW)
    assert _names(result, ids) == ["istio-3", "monitoring", "app", "other", "istio-2", "istio-1"]


def test_the_limit_keeps_the_open_ones(database: Database) -> None:
    ids = _fill(database)
    assert _names(history(database, limit=3, now=NOW), ids) == ["istio-3", "monitoring", "app"]
    assert _names(history(database, limit=1, now=NOW), ids) == ["istio-3"]


def test_filters(database: Database) -> None:
    ids = _fill(database)
    assert _names(history(database, cluster="prod-us", now=NOW), ids) == ["app", "other"]
    assert _names(history(database, cluster="prod-eu", namespace="istio-system", now=NOW), ids) == [
        "istio-3",
        "istio-2",
        "istio-1",
    ]
    assert _names(history(database, open_only=True, now=NOW), ids) == ["istio-3", "monitoring"]
    assert _names(history(database, cluster="prod-us", open_only=True, now=NOW), ids) == []
    assert _names(history(database, namespace="monitoring", now=NOW), ids) == ["monitoring"]
    assert history(database, cluster="nowhere", now=NOW).incidents == ()


def test_within_narrows_the_list_and_the_summary_to_those_clusters(database: Database) -> None:
    """`/nsstuck history` typed in a channel: only the clusters the channel may use."""
    ids = _fill(database)
    us = history(database, within=("prod-us", "gone"), now=NOW)
    assert _names(us, ids) == ["app", "other"]
    assert (us.summary.incidents, us.summary.open, us.summary.resolved) == (2, 0, 2)
    assert [(c.name, c.count) for c in us.summary.by_cluster] == [("prod-us", 2)]
    assert us.summary.recurring == ()
    assert us.summary.median_time_to_resolution_seconds == int(3.5 * 3600)
    both = history(database, within=("prod-eu", "prod-us"), open_only=True, now=NOW)
    assert _names(both, ids) == ["istio-3", "monitoring"]
    nothing = history(database, within=(), now=NOW)
    assert nothing.incidents == ()
    assert (
        nothing.summary.incidents,
        nothing.summary.by_cluster,
        nothing.summary.median_time_to_resolution_seconds,
    ) == (
        0,
        (),
        None,
    )
    assert "within" not in json.dumps(us.to_json())  # the JSON of `nsstuck history` is unchanged


def test_entries_carry_runs_thread_and_durations(database: Database) -> None:
    ids = _fill(database)
    entries = {entry.id: entry for entry in history(database, now=NOW).incidents}
    open_one = entries[ids["istio-3"]]
    assert open_one.diagnoses == 3
    assert open_one.last_diagnosed_at == T0 + 72 * HOUR + timedelta(minutes=90)
    assert open_one.thread is not None
    assert (open_one.thread.channel, open_one.thread.thread_ts) == ("C0123ABCD", "1763712000.000100")
    # open: counted from the deletion timestamp, not from when nsstuck first saw it
    assert open_one.open_for_seconds(NOW) == int((NOW - (T0 + 71 * HOUR)).total_seconds())
    assert open_one.time_to_resolution_seconds is None
    assert entries[ids["istio-1"]].time_to_resolution_seconds == 3600
    assert entries[ids["istio-1"]].open_for_seconds(NOW) is None
    assert entries[ids["istio-2"]].time_to_resolution_seconds == 3 * 3600
    assert entries[ids["monitoring"]].diagnoses == 0
    assert entries[ids["monitoring"]].thread is None
    assert entries[ids["monitoring"]].terminating_since is None


def test_summary_counts(database: Database) -> None:
    _fill(database)
    summary = history(database, now=NOW).summary
    assert (summary.incidents, summary.open, summary.resolved) == (6, 2, 4)
    assert [(c.name, c.count) for c in summary.by_cause] == [
        ("apiservice_unavailable", 2),
        ("orphaned_finalizer", 2),
        (None, 1),
        ("pvc_in_use", 1),
    ]
    assert [(c.name, c.count) for c in summary.by_cluster] == [("prod-eu", 4), ("prod-us", 2)]
    assert [(r.cluster, r.namespace, r.incidents) for r in summary.recurring] == [("prod-eu", "istio-system", 3)]


def test_summary_follows_the_filters_but_not_open_only(database: Database) -> None:
    _fill(database)
    us = history(database, cluster="prod-us", now=NOW).summary
    assert (us.incidents, us.open, us.resolved, us.recurring) == (2, 0, 2, ())
    assert [(c.name, c.count) for c in us.by_cluster] == [("prod-us", 2)]
    open_only = history(database, open_only=True, now=NOW).summary
    assert (open_only.incidents, open_only.resolved) == (6, 4)


def test_median_time_to_resolution(database: Database) -> None:
    _fill(database)
    # resolved after 1 h, 3 h, 2 h and 5 h: an even count takes the mean of the middle two
    assert history(database, now=NOW).summary.median_time_to_resolution_seconds == int(2.5 * 3600)
    assert history(database, cluster="prod-eu", now=NOW).summary.median_time_to_resolution_seconds == 2 * 3600
    assert history(database, cluster="prod-us", now=NOW).summary.median_time_to_resolution_seconds == int(3.5 * 3600)
    one = history(database, cluster="prod-us", namespace="app", now=NOW).summary
    assert one.median_time_to_resolution_seconds == 2 * 3600
    nothing = history(database, cluster="prod-eu", namespace="monitoring", now=NOW).summary
    assert nothing.median_time_to_resolution_seconds is None


def test_median_of_an_odd_count_is_the_middle_one(database: Database) -> None:
    with database.unit_of_work() as uow:
        for n, hours in enumerate((7, 1, 100)):
            uow.incidents.add(
                _incident("c", f"ns-{n}", f"u{n}", first_seen=T0, cause="unknown", resolved_after=hours * HOUR)
            )
    assert history(database, now=NOW).summary.median_time_to_resolution_seconds == 7 * 3600


def test_json_round_trip(database: Database) -> None:
    _fill(database)
    result = history(database, cluster="prod-eu", limit=10, now=NOW)
    document = json.loads(json.dumps(result.to_json()))
    assert document["schema"] == SCHEMA
    assert document["generated_at"] == "2026-11-21T10:00:00Z"
    assert document["filters"] == {"cluster": "prod-eu", "namespace": None, "open_only": False, "limit": 10}
    first = document["incidents"][0]
    assert first["status"] == "open"
    assert first["slack"] == {"channel": "C0123ABCD", "thread_ts": "1763712000.000100"}
    assert first["open_for_seconds"] > 0
    assert first["time_to_resolution_seconds"] is None
    assert document["summary"]["median_time_to_resolution_seconds"] == 7200
    assert document["summary"]["recurring"] == [{"cluster": "prod-eu", "namespace": "istio-system", "incidents": 3}]
    assert History.from_json(document) == result


def test_a_bad_limit_or_schema_is_refused(database: Database) -> None:
    with pytest.raises(ValueError, match="limit"):
        history(database, limit=0)
    with pytest.raises(ValueError, match="schema"):
        History.from_json({"schema": "nsstuck.diagnosis/v1"})
