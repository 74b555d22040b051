"""Issue 37 §1, progress across follow-ups: each look at an open incident's namespace keeps what it saw (a
time, the namespace controller's remaining count, the resourceVersions of the objects held), and the next
diagnosis of that incident is made with them, so that a follow-up tells "progressing: 5 → 2 objects" from
"no progress for 3h". Through the real services (recording, the follow-up, the diagnosis) against the
Kubernetes emulator, on SQLite and PostgreSQL (the runtime role too).

One cluster holds two terminating namespaces, deleted 3 h ago, each with Kiali CRs that keep
kiali.io/finalizer while the Kiali operator runs (Ready, its log silent about them):
- kiali-moving: between two follow-ups, three of its five CRs are finished;
- kiali-still: nothing moves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.domain.refs import ClusterName
from bot.domain.snapshot import Earlier
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.followup import follow_up
from bot.services.recording import earlier_of, record
from bot.store.database import Database
from tests._rows import rows
from tests.approvals._flow import remediation_bot
from tests.diagnosis.test_alive_not_finishing import _ask
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import Api, _kiali_crd, _start, run_for
from tests.fakes.kubeapi.state import EmulatorState, capture, restore
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL

CLUSTER = ClusterName("prod-eu")
STUCK_FOR = timedelta(hours=3)
MOVING, STILL = "kiali-moving", "kiali-still"
CRS = {MOVING: 5, STILL: 2}


def _kiali(api: Api, ns: str, name: str) -> None:
    api.custom(
        "kiali.io",
        "v1alpha1",
        "kialis",
        ns,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": name, "finalizers": ["kiali.io/finalizer"]},
            "spec": {"deployment": {"namespace": ns}},
        },
    )


def _build(emulator: Emulator) -> None:
    """The cluster: the Kiali operator running, both namespaces deleted with their CRs held."""
    api = _start(emulator)
    _kiali_crd(api)
    api.namespace("kiali-operator")
    api.deployment(
        "kiali-operator",
        "kiali-operator",
        node="node-1",
        image="quay.io/kiali/kiali-operator:v2.17.0",
        labels={"app.kubernetes.io/name": "kiali-operator"},
    )
    for ns, count in CRS.items():
        api.namespace(ns)
        for i in range(count):
            _kiali(api, ns, f"kiali-{i}")
    run_for(emulator, 30)
    for ns in CRS:
        api.delete_namespace(ns)
    run_for(emulator, 30)


@pytest.fixture(scope="module")
def built() -> EmulatorState:
    """The cluster built once for the module's tests (a build runs the controllers for a simulated minute;
    a restore costs milliseconds), on a clock that starts 3 h and 2 min before the present."""
    started = datetime.now(UTC) - STUCK_FOR - timedelta(minutes=2)
    with Emulator(clock=FakeClock(started), seed=0) as emulator:
        _build(emulator)
        return capture(emulator)


@pytest.fixture
def kube(built: EmulatorState) -> Iterator[Emulator]:
    # one per test (each backend's test finishes CRs of its own): the module's cluster restored
    # the services read the real clock: the emulator's ends at the present, the deletions 3 h before
    with Emulator(clock=FakeClock(built.now), seed=0) as emulator:
        restore(emulator, built)
        emulator.clock.advance((datetime.now(UTC) - emulator.clock.now()).total_seconds() - 60)  # type: ignore[attr-defined]
        emulator.settle()
        yield emulator


@pytest.fixture
def target(kube: Emulator, tmp_path: Path) -> ClusterTarget:
    # the plain HTTP listener: what the services see does not depend on TLS, which cost CPU on both ends
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", tls=False)
    return ClusterTarget(name=CLUSTER, kubeconfig=kubeconfig)


def _diagnoser(database: Database, target: ClusterTarget) -> Any:
    """What the bot's worker pool does: the open incident's earlier looks go with the diagnosis."""

    def diagnose(cluster: ClusterName, namespace: str) -> DiagnosisResult:
        return diagnose_namespace(target, namespace, earlier=earlier_of(database, cluster, namespace))

    return diagnose


def _progress(result: DiagnosisResult) -> dict[str, Any]:
    report = result.diagnosis.to_json()
    found = [f["progress"] for f in report["findings"] if f.get("progress")]
    assert found, report["findings"]
    progress: dict[str, Any] = found[0]
    return progress


def _finish(kube: Emulator, ns: str, names: list[str]) -> None:
    """The operator finishes these CRs: their finalizer goes, the namespace controller counts again."""
    http = KubeHTTP(kube.url, kube.admin_token)
    for name in names:
        http.patch(f"/apis/kiali.io/v1alpha1/namespaces/{ns}/kialis/{name}", {"metadata": {"finalizers": None}})
    run_for(kube, 15)


def test_follow_ups_tell_progress_from_standing_still(
    kube: Emulator, target: ClusterTarget, database: Database, database_url: str
) -> None:
    diagnose = _diagnoser(database, target)
    # the first look (someone asked): no earlier look, so no trend; the incidents are opened
    for ns in CRS:
        first = diagnose(CLUSTER, ns)
        assert first.snapshot.earlier == ()
        assert _progress(first)["remaining"] == []
        record(database, first, trigger="slack", requested_by="U0ALICE01")
    # a follow-up: nothing changed yet; each incident keeps a second look
    done = follow_up(database, registered=lambda c: c == CLUSTER, diagnoser=diagnose, notifier=None)
    assert (done.checked, done.resolved) == (2, 0)
    kept = {r["namespace"]: r["observations"] for r in rows(database_url, "SELECT * FROM incidents")}
    assert {ns: [o["remaining"] for o in _loaded(kept[ns])] for ns in CRS} == {MOVING: [5, 5], STILL: [2, 2]}
    assert all(len(o["versions"]) == CRS[ns] for ns in CRS for o in _loaded(kept[ns]))

    # the operator finishes three CRs of one namespace; the next follow-up sees the count drop
    _finish(kube, MOVING, ["kiali-0", "kiali-1", "kiali-2"])
    done = follow_up(database, registered=lambda c: c == CLUSTER, diagnoser=diagnose, notifier=None)
    assert done.checked == 2
    assert done.cause_changed == 1  # kiali-moving: its controller is at work after all
    runs = rows(database_url, "SELECT namespace, cause, report FROM diagnoses ORDER BY id")
    moving = [r for r in runs if r["namespace"] == MOVING]
    assert [r["cause"] for r in moving] == ["unknown", "content_deleting"]
    report = _loaded(moving[-1]["report"])
    [found] = [f["progress"] for f in report["findings"] if f.get("progress")]
    assert found["progressing"] is True
    assert re.fullmatch(r"progressing: 5 → 2 objects in \d+ min", found["text"])
    assert [r["count"] for r in found["remaining"]] == [5, 5, 2]

    # kiali-still: same count, same resourceVersions, three looks: no progress, the trend read and flat
    again = diagnose(CLUSTER, STILL)
    assert len(again.snapshot.earlier) == 3
    progress = _progress(again)
    assert progress["progressing"] is False
    assert progress["text"].startswith("no progress for 3h")
    assert [r["count"] for r in progress["remaining"]] == [2, 2, 2, 2]
    assert again.diagnosis.cause is not None
    assert again.diagnosis.cause.value == "unknown"
    assert [r["cause"] for r in runs if r["namespace"] == STILL] == ["unknown"]  # no change, no run


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def test_a_recreated_namespace_does_not_take_the_old_incidents_looks(
    kube: Emulator, target: ClusterTarget, database: Database
) -> None:
    diagnose = _diagnoser(database, target)
    record(database, diagnose(CLUSTER, STILL), trigger="slack", requested_by="U0ALICE01")
    earlier = earlier_of(database, CLUSTER, STILL)
    assert earlier is not None
    assert len(earlier.observations) == 1
    # the same name under another UID: the earlier looks are of another namespace
    other = Earlier(namespace_uid="another-uid", observations=earlier.observations)
    result = diagnose_namespace(target, STILL, earlier=other)
    assert result.snapshot.earlier == ()
    assert _progress(result)["remaining"] == []


# --- the bot: its follow-ups and a repeated /nsstuck, through its worker processes --------------------


@pytest.mark.slow
def test_the_bots_follow_up_sees_the_count_drop_and_a_repeated_ask_shows_it(
    kube: Emulator, slack_emulator: SlackEmulator, tmp_path: Path
) -> None:
    fast = {"NSSTUCK_FOLLOW_UP_SECONDS": "1"}
    with remediation_bot(slack_emulator, kube, tmp_path, extra_env=fast) as flow:
        line, _ = _ask(flow, MOVING)
        assert "`unknown`" in line
        assert "*Progress:* no progress for 3h" in line

        def looks() -> int | None:
            kept = rows(flow.database, "SELECT observations FROM incidents")
            count = len(_loaded(kept[0]["observations"]) or []) if kept else 0
            return count if count >= 2 else None

        slack_emulator.wait_for(looks, timeout=20)  # a follow-up looked again, and kept what it saw
        _finish(kube, MOVING, ["kiali-0", "kiali-1", "kiali-2"])

        # the next follow-up sees the count drop: the controller is at work, and the thread is told
        verdict = next(m for m in slack_emulator.channel_messages(OPS_CHANNEL) if MOVING in slack_emulator.render(m))

        def thread_says(words: str) -> str | None:
            notes = [slack_emulator.render(m) for m in slack_emulator.thread(OPS_CHANNEL, str(verdict["ts"]))]
            return next((n for n in notes if words in n), None)

        note = slack_emulator.wait_for(lambda: thread_says("The cause changed"), timeout=20)
        assert "`unknown` → `content_deleting`" in note
        # asked again: the verdict goes to the incident's thread, with the count's trend
        flow.bot.driver.slash_command("/nsstuck", f"prod-eu {MOVING}", user=ALICE, channel=OPS_CHANNEL)
        again = slack_emulator.wait_for(lambda: thread_says("*Progress:* progressing"), timeout=30)
    assert "not stuck yet" in again
    assert re.search(r"\*Progress:\* progressing: 5 → 2 objects in \d+ min", again)


def test_a_database_that_does_not_answer_leaves_the_diagnosis_without_earlier_looks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = Database("postgresql+psycopg://nsstuck@127.0.0.1:1/nsstuck")  # nothing listens on port 1
    try:
        assert earlier_of(gone, CLUSTER, STILL) is None
    finally:
        gone.dispose()
    assert "the earlier looks at prod-eu/kiali-still could not be read: StoreUnavailableError" in caplog.text
