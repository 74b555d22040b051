"""One incident per namespace UID, whoever asks and however many at once, on both databases."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from sqlalchemy import select

from bot.store.database import Database

SINCE = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def _open(database: Database, uid: str = "uid-1") -> int:
    with database.unit_of_work() as uow:
        incident = uow.incidents.open_for(
            cluster="prod-eu", namespace="istio-system", namespace_uid=uid, terminating_since=SINCE, cause="x"
        )
        return incident.id


def test_concurrent_callers_converge_on_one_incident(database: Database) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(lambda _: _open(database), range(16)))
    assert len(set(ids)) == 1
    with database.unit_of_work() as uow:
        assert len(uow.incidents.open_incidents("prod-eu")) == 1


def test_a_recreated_namespace_is_a_new_incident(database: Database) -> None:
    assert _open(database, "uid-1") != _open(database, "uid-2")


def test_the_first_thread_attached_wins(database: Database) -> None:
    incident_id = _open(database)
    with database.unit_of_work() as uow:
        assert uow.incidents.claim_thread(incident_id, "C1", "111.1") == ("C1", "111.1")
    with database.unit_of_work() as uow:
        assert uow.incidents.claim_thread(incident_id, "C1", "222.2") == ("C1", "111.1")


def test_an_incident_resolves_once_with_its_time_to_resolution(database: Database) -> None:
    incident_id = _open(database)
    at = SINCE.replace(hour=11, minute=12)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda _: _resolve(database, incident_id, at), range(8)))
    assert outcomes.count(True) == 1  # one replica announces it, the others see it done
    with database.unit_of_work() as uow:
        incident = uow.incidents.get(incident_id)
        assert incident is not None
        assert incident.status == "resolved"
        assert incident.resolved_at == at
        assert incident.terminating_since is not None
        assert (incident.resolved_at - incident.terminating_since).total_seconds() == 3 * 3600 + 12 * 60
        assert uow.incidents.open_incidents() == []
    # the same namespace name deleted again later, under a new UID, is a new open incident
    assert _open(database, "uid-2") != incident_id


def _resolve(database: Database, incident_id: int, at: datetime) -> bool:
    with database.unit_of_work() as uow:
        return uow.incidents.resolve(incident_id, at)


def test_retention_prunes_old_snapshots_and_keeps_everything_else(database: Database) -> None:
    from datetime import timedelta

    from bot.services.recording import prune_snapshots
    from bot.store.models import DiagnosisRun

    with database.unit_of_work() as uow:
        for days_ago in (40, 10):
            uow.diagnoses.add(
                DiagnosisRun(
                    cluster="c", namespace="n", trigger="cli", requested_by="me", state="terminating",
                    report={"days_ago": days_ago}, snapshot=b"zz", started_at=SINCE - timedelta(days=days_ago),
                )
            )  # fmt: skip
    assert prune_snapshots(database, keep=timedelta(days=30), now=SINCE) == 1
    assert prune_snapshots(database, keep=timedelta(days=30), now=SINCE) == 0
    with database.unit_of_work() as uow:
        runs = sorted(uow.session.scalars(select(DiagnosisRun)).all(), key=lambda r: r.report["days_ago"])
    assert [(r.report["days_ago"], r.snapshot) for r in runs] == [(10, b"zz"), (40, None)]


def test_the_outbox_hands_each_posting_attempt_to_one_worker(database: Database) -> None:
    from datetime import timedelta

    from bot.services import recording
    from bot.store.models import DiagnosisRun

    with database.unit_of_work() as uow:
        run_id = uow.diagnoses.add(
            DiagnosisRun(
                cluster="c", namespace="n", trigger="slack", requested_by="U0AAAAAAA", state="terminating",
                report={}, post_channel="C0123ABCD", created_at=SINCE,
            )
        ).id  # fmt: skip
    # a fresh run is the poster's own business; after a crash (old, never attempted) it is the outbox's
    assert recording.unposted_runs(database, now=SINCE) == []
    assert recording.unposted_runs(database, now=SINCE + timedelta(minutes=5)) == []  # may still be in flight
    assert recording.unposted_runs(database, now=SINCE + timedelta(minutes=30)) == [run_id]
    with ThreadPoolExecutor(max_workers=6) as pool:
        claims = list(pool.map(lambda _: recording.claim_post(database, run_id, 0), range(12)))
    assert claims.count(True) == 1  # Slack is down: this attempt fails ...
    recording.mark_post_failed(database, run_id, "SlackApiError: fatal_error")
    assert recording.unposted_runs(database, now=SINCE) == [run_id]  # ... and it is retried at once
    assert recording.claim_post(database, run_id, 1)
    assert recording.unposted_runs(database, now=SINCE) == []  # in flight again: not handed out twice
    recording.mark_posted(database, run_id, SINCE + timedelta(minutes=1))
    assert recording.unposted_runs(database, now=SINCE + timedelta(hours=1)) == []
    assert recording.pending_post(database, run_id) is None
    assert not recording.claim_post(database, run_id, 2)  # posted: nobody posts it again
