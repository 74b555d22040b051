"""Seen before (issue 39 §3): a verdict recorded with a database names the earlier incidents of the same
cluster, cause and blocking object family, most recent first, with what ended each (the remedy executed and
its audit entry, "resolved by itself", "still open") and its thread; and says when the cause recurs.

The verdict is a real diagnosis of the emulator's metrics-server scenario (the real `kubernetes` client over
HTTP), recorded by the recording service into SQLite and PostgreSQL; the earlier incidents are the same
namespace deleted before under other UIDs, recorded by the same service, fixed and resolved through the
store's own repositories, and the Slack verdict is rendered from the stored report as the outbox posts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.domain.findings import Diagnosis
from bot.domain.refs import ClusterName
from bot.domain.snapshot_codec import StoredJson, with_keys
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.kube.registry import ClusterRegistry
from bot.services.agents import AgentTools, Caller
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.limiting import CommandLimits
from bot.services.recording import pending_post, record
from bot.settings import load_config
from bot.slack import blocks
from bot.store.database import Database
from bot.store.models import Incident
from tests._cli import run_nsstuck
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.kubeapi.emulator import Emulator
from tests.fakes.kubeapi.scenarios import apply_scenario_once

SCENARIO = "seed000-metrics-missing-endpoints"
NAMESPACE = "ack-system-e2e-test-0"
FAMILY = "apiservice:v1beta1.metrics.k8s.io"
CHANNEL = "C0SEEN0001"


@pytest.fixture(scope="module")
def stuck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisResult]:
    """The scenario's verdict, diagnosed once for the module (the tests only record it)."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
    try:
        apply_scenario_once(emu, SCENARIO)
        kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp("seen") / "kubeconfig")
        target = ClusterTarget(name="emulated", kubeconfig=kubeconfig)
        result = diagnose_namespace(target, NAMESPACE, options=CollectOptions(deadline=60, call_timeout=30))
        result.stored()  # its stored forms (and summary, family included) made while the snapshot is at hand
        yield result
    finally:
        emu.stop()


def _earlier(result: DiagnosisResult, uid: str, **summary: Any) -> DiagnosisResult:
    """The same verdict for the namespace deleted before under another UID (a new incident)."""
    first, report, snapshot = result.stored()
    return DiagnosisResult(
        None, None, result.duration_ms, stored=(replace(first, namespace_uid=uid, **summary), report, snapshot)
    )


def _thread(db: Database, incident_id: int, ts: str) -> None:
    with db.unit_of_work() as uow:
        uow.incidents.claim_thread(incident_id, CHANNEL, ts)


def _resolve(db: Database, incident_id: int, at: datetime) -> None:
    with db.unit_of_work() as uow:
        assert uow.incidents.resolve(incident_id, at)


def _fix(db: Database, run_id: int, incident_id: int, at: datetime) -> tuple[int, int, str]:
    """An executed remedy of the incident's run and its audit entry: (request id, entry seq, entry hash)."""
    with db.unit_of_work() as uow:
        request, _ = uow.requests.file(
            {
                "diagnosis_id": run_id,
                "incident_id": incident_id,
                "cluster": "emulated",
                "namespace": NAMESPACE,
                "remedy_id": "restore_backend-1",
                "action": "delete_apiservice",
                "risk": "medium",
                "description": "Delete APIService v1beta1.metrics.k8s.io",
                "remedy": {},
                "requested_by": "U0ASKER",
                "expires_at": at + timedelta(hours=1),
                "required_approvals": 1,
            }
        )
        uow.requests.set_fields(request.id, status="applied", finished_at=at)
        entry = uow.audit.append(
            "applied", actor="nsstuck", cluster="emulated", namespace=NAMESPACE, request_id=request.id
        )
    return request.id, entry.seq, entry.hash


def _report(db: Database, run_id: int) -> dict[str, Any]:
    with db.unit_of_work() as uow:
        run = uow.diagnoses.get(run_id)
        assert run is not None
        return dict(run.report)


def test_the_family_of_the_real_verdict_is_its_apiservice(stuck: DiagnosisResult) -> None:
    assert stuck.summary.cause is not None
    assert stuck.summary.cause.value == "apiservice_unavailable"
    assert stuck.summary.family == FAMILY


def test_three_earlier_incidents_most_recent_first_with_what_ended_each(
    database: Database, stuck: DiagnosisResult
) -> None:
    started = stuck.summary.deletion_timestamp
    assert started is not None
    # oldest first: one still open, one resolved by itself, one fixed by an executed remedy
    still = record(database, _earlier(stuck, "uid-open"), trigger="schedule", requested_by="schedule")
    itself = record(database, _earlier(stuck, "uid-itself"), trigger="schedule", requested_by="schedule")
    fixed = record(database, _earlier(stuck, "uid-fixed"), trigger="slack", requested_by="U0ASKER")
    # never a false match: another family, another cluster, another cause
    other_family = record(
        database, _earlier(stuck, "uid-f", family="apiservice:v1.other.io"), trigger="cli", requested_by="x"
    )
    other_cluster = record(
        database, _earlier(stuck, "uid-c", cluster=ClusterName("elsewhere")), trigger="cli", requested_by="x"
    )
    no_family = record(database, _earlier(stuck, "uid-n", family=None), trigger="cli", requested_by="x")
    assert still.incident_id
    assert itself.incident_id
    assert fixed.incident_id
    _thread(database, still.incident_id, "1764000000.000100")
    _thread(database, itself.incident_id, "1764100000.000200")
    _thread(database, fixed.incident_id, "1764200000.000300")
    _resolve(database, itself.incident_id, started + timedelta(minutes=30))
    request_id, seq, digest = _fix(database, fixed.run_id, fixed.incident_id, started + timedelta(hours=1))
    _resolve(database, fixed.incident_id, started + timedelta(hours=2))

    # a threshold above the count: this test is about the earlier incidents alone
    now = record(database, stuck, trigger="slack", requested_by="U0ASKER", post_channel=CHANNEL, recurrence_after=10)
    report = _report(database, now.run_id)

    seen = report["seen_before"]
    assert [s["incident"] for s in seen] == [fixed.incident_id, itself.incident_id, still.incident_id]
    assert {other_family.incident_id, other_cluster.incident_id, no_family.incident_id}.isdisjoint(
        s["incident"] for s in seen
    )
    assert [s["ended_by"]["what"] for s in seen] == ["remedy", "resolved_by_itself", "still_open"]
    assert seen[0]["ended_by"]["request"] == request_id
    assert seen[0]["ended_by"]["action"] == "delete_apiservice"
    assert seen[0]["ended_by"]["audit"] == {"seq": seq, "hash": digest[:12]}
    assert (
        seen[0]["ended_by"]["said"]
        == f"delete_apiservice executed (request #{request_id}, audit entry #{seq} ({digest[:12]}))"
    )
    assert [s["ended_by"]["said"] for s in seen[1:]] == ["resolved by itself", "still open"]
    assert [s["stuck_for_seconds"] for s in seen[:2]] == [7200, 1800]
    # the open one has been stuck as long as this verdict's namespace (the same deletion time here)
    assert seen[2]["stuck_for_seconds"] == report["terminating_for_seconds"]
    assert all(s["started_at"] == report["deletion_timestamp"] for s in seen)
    assert seen[0]["thread"] == {
        "channel": CHANNEL,
        "ts": "1764200000.000300",
        "permalink": f"https://slack.com/app_redirect?channel={CHANNEL}&message_ts=1764200000.000300",
    }
    assert seen[2]["thread"]["permalink"].endswith("message_ts=1764000000.000100")
    assert "recurrence" not in report
    # the Slack verdict, as the outbox posts it from the stored report
    pending = pending_post(database, now.run_id)
    assert pending is not None
    text = blocks.verdict(pending.diagnosis).blocks[1]["text"]["text"]
    assert text.startswith("*Seen before*")
    lines = text.splitlines()[1:]
    assert lines[0] == (
        f"• <{seen[0]['thread']['permalink']}|incident {fixed.incident_id}>, {report['deletion_timestamp']}: "
        f"stuck 2h 0m, delete_apiservice executed (request #{request_id}, audit entry #{seq} ({digest[:12]}))"
    )
    assert lines[1].endswith("stuck 30m, resolved by itself")
    assert lines[2].endswith("still open")
    assert len(lines) == 3


def test_the_recurrence_line_appears_at_the_threshold_and_not_below(database: Database, stuck: DiagnosisResult) -> None:
    for n in range(3):
        record(database, _earlier(stuck, f"uid-{n}"), trigger="schedule", requested_by="schedule")
    aged = record(database, _earlier(stuck, "uid-aged"), trigger="schedule", requested_by="schedule")
    with database.unit_of_work() as uow:  # first seen 31 days ago: outside the window
        uow.session.execute(
            update(Incident)
            .where(Incident.id == aged.incident_id)
            .values(first_seen_at=datetime.now(UTC) - timedelta(days=31))
        )
    # 4 incidents in 30 days, this one included: not more than 4
    below = record(database, stuck, trigger="slack", requested_by="U0ASKER", post_channel=CHANNEL, recurrence_after=4)
    assert "recurrence" not in _report(database, below.run_id)
    below_post = pending_post(database, below.run_id)
    assert below_post is not None
    assert "Recurring" not in str(blocks.verdict(below_post.diagnosis).blocks)
    # more than 3: the line, with the lasting fix of the cause
    at = record(database, stuck, trigger="slack", requested_by="U0ASKER", post_channel=CHANNEL, recurrence_after=3)
    assert at.incident_id == below.incident_id
    report = _report(database, at.run_id)
    assert report["recurrence"] == {
        "incidents": 4,
        "days": 30,
        "family": FAMILY,
        "text": (
            "APIService v1beta1.metrics.k8s.io has failed 4 times in 30 days: its APIService blocks every namespace "
            "deletion while it is down; make its backend highly available or remove the APIService"
        ),
    }
    posted = pending_post(database, at.run_id)
    assert posted is not None
    assert Diagnosis.from_json(report).recurrence == posted.diagnosis.recurrence
    section = blocks.verdict(posted.diagnosis).blocks[1]["text"]["text"]
    assert section.startswith(":repeat: *Recurring:* APIService v1beta1.metrics.k8s.io has failed 4 times in 30 days")


def test_without_a_database_the_report_has_no_seen_before(stuck: DiagnosisResult) -> None:
    assert "seen_before" not in stuck.diagnosis.to_json()
    assert "recurrence" not in stuck.diagnosis.to_json()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The same scenario served for the command line (the state restored: the same UIDs as `stuck`'s)."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
    try:
        apply_scenario_once(emu, SCENARIO)
        # its context names the cluster as the verdicts recorded here do
        yield emu.write_kubeconfig(tmp_path_factory.mktemp("seen-cli") / "kubeconfig", context="emulated")
    finally:
        emu.stop()


def test_diagnose_with_a_database_reads_what_it_remembers_and_records_nothing(
    database: Database, stuck: DiagnosisResult, cluster: Path
) -> None:
    """`nsstuck diagnose` with NSSTUCK_DATABASE_URL: the same `seen_before` a recorded verdict carries (read
    only: no incident or run is added), the recurrence counting this namespace as recording it would, and the
    text output's "Seen before" lines; a database it cannot read is one line on stderr, and the report is
    given without the keys."""
    itself = record(database, _earlier(stuck, "uid-itself"), trigger="schedule", requested_by="schedule")
    assert itself.incident_id
    _thread(database, itself.incident_id, "1764100000.000200")
    with database.unit_of_work() as uow:
        assert uow.incidents.resolve(itself.incident_id, datetime.now(UTC))
    record(database, _earlier(stuck, "uid-open"), trigger="schedule", requested_by="schedule")
    env = {"NSSTUCK_DATABASE_URL": database.url, "NSSTUCK_RECURRENCE_AFTER": "2"}
    with database.unit_of_work() as uow:
        before = len(uow.history.recent(limit=100))

    done = run_nsstuck("diagnose", "--kubeconfig", str(cluster), "--json", NAMESPACE, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [s["ended_by"]["what"] for s in report["seen_before"]] == ["still_open", "resolved_by_itself"]
    assert report["recurrence"]["incidents"] == 3  # the two recorded, and this one
    with database.unit_of_work() as uow:
        assert len(uow.history.recent(limit=100)) == before  # read only

    text = run_nsstuck("diagnose", "--kubeconfig", str(cluster), NAMESPACE, env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = lines.index("Seen before (same cluster, cause and blocking object):")
    assert lines[at + 1].startswith(f"  - incident {report['seen_before'][0]['incident']}, ")
    assert lines[at + 2].endswith(
        "resolved by itself (https://slack.com/app_redirect?channel=C0SEEN0001&message_ts=1764100000.000200)"
    )
    assert any(line.startswith("APIService v1beta1.metrics.k8s.io has failed 3 times in 30 days") for line in lines)


def test_diagnose_with_a_database_it_cannot_read_says_so_and_reports_all_the_same(
    cluster: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.db"
    env = {"NSSTUCK_DATABASE_URL": f"sqlite:///{empty}"}
    done = run_nsstuck("diagnose", "--kubeconfig", str(cluster), "--json", NAMESPACE, env=env)
    assert done.returncode == 0, done.stderr
    assert "seen_before" not in json.loads(done.stdout)
    [said] = [line for line in done.stderr.splitlines() if "seen before" in line]
    assert said.startswith("nsstuck: seen before: unknown (")
    assert "nsstuck db upgrade" in said


def test_the_mcp_diagnose_tool_carries_what_the_database_remembers(
    database: Database, stuck: DiagnosisResult, cluster: Path, tmp_path: Path
) -> None:
    """The agents' door (issue 39 §2 and §3): its `diagnose` answer names the earlier incident as the CLI's does."""
    fixed = record(database, _earlier(stuck, "uid-fixed"), trigger="slack", requested_by="U0ASKER")
    assert fixed.incident_id
    config = tmp_path / "nsstuck.yaml"
    config.write_text(f"clusters:\n  - name: emulated\n    kubeconfig: {cluster}\n")
    app = load_config(config)
    registry = ClusterRegistry.from_config(app, config)
    tools = AgentTools(
        app,
        registry,
        limits=CommandLimits(user_per_minute=20, channel_per_minute=60),
        database=lambda: Database(database.url),
        max_answer=1 << 20,
        no_progress_after=1800.0,
        remember=True,
    )
    try:
        asked = {"cluster": "emulated", "namespace": NAMESPACE}
        report = tools.call(Caller("holmes", frozenset({"emulated"})), "diagnose", asked)
    finally:
        registry.close()
    assert [s["incident"] for s in report["seen_before"]] == [fixed.incident_id]
    env = {"NSSTUCK_DATABASE_URL": database.url}
    cli = json.loads(run_nsstuck("diagnose", "--kubeconfig", str(cluster), "--json", NAMESPACE, env=env).stdout)
    # the same, apart from the durations each derives from its own observed_at
    assert [{**s, "stuck_for_seconds": 0} for s in report["seen_before"]] == [
        {**s, "stuck_for_seconds": 0} for s in cli["seen_before"]
    ]


def test_the_keys_are_added_to_the_stored_report_without_decoding_it(stuck: DiagnosisResult) -> None:
    """`with_keys` (what recording adds `seen_before` with): at the end of the one JSON object, nothing
    added for no keys, and a text that is not one object refused rather than made into bad JSON."""
    _, report, _ = stuck.stored()
    assert with_keys(report, {}) is report
    added = json.loads(with_keys(report, {"seen_before": []}))
    assert added == {**json.loads(report), "seen_before": []}
    assert json.loads(with_keys(StoredJson("{}"), {"a": 1})) == {"a": 1}
    with pytest.raises(ValueError, match="one JSON object"):
        with_keys(StoredJson("[1, 2]"), {"a": 1})
