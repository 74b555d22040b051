"""What the watch keeps in the database, on SQLite, PostgreSQL, and PostgreSQL as the runtime role (the
`database` fixture): a round claimed once per cluster, a cluster's change of state made (and so said)
once, an incident's verdict posted unasked once, and the outbox's backlog as /metrics reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.domain.refs import ClusterName
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.followup import FollowUp, follow_up, open_incidents, resolve_gone
from bot.services.recording import mark_posted, record, record_unasked
from bot.store.database import Database
from bot.store.watch import Change
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def test_a_round_of_a_cluster_is_claimed_once_and_pruned_after(database: Database) -> None:
    with database.unit_of_work() as uow:
        first = uow.watch.claim_round(cluster="prod-eu", round_start=T0, by="a:1")
        again = uow.watch.claim_round(cluster="prod-eu", round_start=T0, by="b:2")
        other = uow.watch.claim_round(cluster="prod-us", round_start=T0, by="b:2")
        later = uow.watch.claim_round(cluster="prod-eu", round_start=T0 + timedelta(seconds=60), by="b:2")
    assert first is not None
    assert other is not None
    assert later is not None
    assert again is None
    with database.unit_of_work() as uow:
        uow.watch.finish_round(first, outcome="listed", namespaces=12, at=T0 + timedelta(seconds=1))
    with database.unit_of_work() as uow:
        [done, _] = uow.watch.rounds("prod-eu")
        assert (done.claimed_by, done.outcome, done.namespaces) == ("a:1", "listed", 12)
        assert uow.watch.prune_rounds(T0 + timedelta(seconds=30)) == 2
    with database.unit_of_work() as uow:
        assert [r.round_start for r in uow.watch.rounds()] == [T0 + timedelta(seconds=60)]


def test_a_cluster_that_stops_answering_changes_state_once_each_way(database: Database) -> None:
    def observe(reachable: bool, minutes: int) -> Change | None:
        with database.unit_of_work() as uow:
            reason = None if reachable else "connection refused"
            return uow.watch.observe("prod-eu", reachable=reachable, reason=reason, at=T0 + timedelta(minutes=minutes))

    assert observe(True, 0) is None  # first seen answering: nothing to say
    assert observe(True, 1) is None
    assert observe(False, 2) == Change(reachable=False, since=T0)
    assert observe(False, 3) is None  # still down: said already
    assert observe(True, 7) == Change(reachable=True, since=T0 + timedelta(minutes=2))
    assert observe(True, 8) is None
    with database.unit_of_work() as uow:
        [state] = uow.watch.clusters()
    assert (state.reachable, state.changed_at, state.checked_at) == (
        True,
        T0 + timedelta(minutes=7),
        T0 + timedelta(minutes=8),
    )
    # first seen not answering: said (it went from unknown to down)
    with database.unit_of_work() as uow:
        assert uow.watch.observe("gone", reachable=False, reason="x", at=T0) == Change(reachable=False, since=T0)


def _stuck(kube: Emulator, tmp_path: Path) -> DiagnosisResult:
    _namespace(kube, "ddd", delete=True)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kc")
    return diagnose_namespace(ClusterTarget(name=ClusterName("prod-eu"), kubeconfig=kubeconfig), "ddd")


def test_an_incident_is_posted_unasked_once_and_counted_in_the_backlog_until_posted(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    result = _stuck(kube_emulator, tmp_path)
    first = record_unasked(database, result, requested_by="nsstuck-watch", post_channel="C0123ABCD", at=T0)
    again = record_unasked(database, result, requested_by="nsstuck-watch", post_channel="C0123ABCD", at=T0)
    assert first is not None
    assert first.incident_id is not None
    assert again is None
    with database.unit_of_work() as uow:
        uid = str(result.diagnosis.namespace_uid)
        assert uow.incidents.not_for_the_watch("prod-eu", [uid, "another-uid"]) == {uid}
        assert len(uow.diagnoses.for_incident(first.incident_id)) == 1
        count, oldest = uow.diagnoses.backlog(max_attempts=20)
        assert count == 1
        assert oldest is not None
    mark_posted(database, first.run_id, T0)
    with database.unit_of_work() as uow:
        assert uow.diagnoses.backlog(max_attempts=20) == (0, None)
        assert uow.digests.backlog() == (0, None)

    # resolved once; and a resolved incident is never posted by the watch (open_for does not reopen it)
    [incident] = open_incidents(database, "prod-eu")
    assert resolve_gone(database, incident, notifier=None, at=T0 + timedelta(hours=1))
    assert not resolve_gone(database, incident, notifier=None, at=T0 + timedelta(hours=1))
    assert open_incidents(database, "prod-eu") == []


def test_a_resolved_incident_is_nothing_for_the_watch_even_unposted(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    result = _stuck(kube_emulator, tmp_path)
    uid = str(result.diagnosis.namespace_uid)
    record(database, result, trigger="slack", requested_by="U0AAAAAAA")  # asked for, not posted by the watch
    with database.unit_of_work() as uow:
        assert uow.incidents.not_for_the_watch("prod-eu", [uid]) == set()
    [incident] = open_incidents(database, "prod-eu")
    resolve_gone(database, incident, notifier=None, at=T0)
    with database.unit_of_work() as uow:
        assert uow.incidents.not_for_the_watch("prod-eu", [uid]) == {uid}
    assert record_unasked(database, result, requested_by="nsstuck-watch", post_channel="C0123ABCD", at=T0) is None


def test_a_follow_up_of_a_cluster_that_stopped_answering_keeps_the_incident_open(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    result = _stuck(kube_emulator, tmp_path)
    assert record_unasked(database, result, requested_by="nsstuck-watch", post_channel="C0123ABCD", at=T0)
    gone = tmp_path / "gone.kubeconfig"
    gone.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    target = ClusterTarget(name=ClusterName("prod-eu"), kubeconfig=gone)
    done = follow_up(
        database,
        registered=lambda cluster: cluster == "prod-eu",
        diagnoser=lambda cluster, namespace: diagnose_namespace(target, namespace),
        notifier=None,
        now=lambda: T0 + timedelta(hours=1),
    )
    assert done == FollowUp(checked=0, resolved=0, cause_changed=0, unreachable=1)
    [incident] = open_incidents(database, "prod-eu")
    assert incident.namespace == "ddd"
