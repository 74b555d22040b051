"""Every scenario of the emulator's library, diagnosed end to end: collect over HTTP, run the rules.

The expectations are the scenario library's own (tests/fakes/kubeapi/scenarios.py), written from the
reference and the seed articles, not from what the rules happen to say.
"""

from __future__ import annotations

import fnmatch
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.domain.findings import Action, Cause, Diagnosis, NamespaceState
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, Scenario, apply_scenario_once

# the scenario library's remedy vocabulary -> ours (on the namespace itself, removing a finalizer
# is its own action: a JSON patch of metadata.finalizers, or a PUT of /finalize for spec.finalizers)
REMEDY = {"fix_controller": Action.RESTORE_CONTROLLER.value}
NAMESPACE_REMEDY = {"remove_finalizer": Action.REMOVE_NAMESPACE_FINALIZER.value}


def _diagnose(scenario: Scenario, tmp_path: Path) -> Diagnosis:
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0)
    emu.start()
    try:
        apply_scenario_once(emu, scenario.name)
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        target = ClusterTarget(name="emulated", kubeconfig=kubeconfig)
        result = diagnose_namespace(
            target,
            scenario.expected.namespace,
            options=CollectOptions(deadline=10, call_timeout=3),
            clock=emu.clock.now,
        )
        return result.diagnosis
    finally:
        emu.stop()


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, Diagnosis]:
    """Each scenario is built (once per run: apply_scenario_once) and diagnosed once; every test below reads
    the same diagnosis."""
    scenario = SCENARIOS[request.param]
    return scenario, _diagnose(scenario, tmp_path_factory.mktemp(request.param))


def test_state_and_completeness(case: tuple[Scenario, Diagnosis]) -> None:
    scenario, diagnosis = case
    expected = scenario.expected
    assert diagnosis.state.value == expected.state
    assert diagnosis.complete is expected.complete, [str(g) for g in diagnosis.gaps]
    for gap in expected.gaps:
        assert any(gap in g.what for g in diagnosis.gaps), (gap, [str(g) for g in diagnosis.gaps])
    if not diagnosis.complete:
        offered = {r.action for f in diagnosis.findings for r in f.remedies}
        assert Action.FORCE_FINALIZE_NAMESPACE not in offered
    if diagnosis.state is not NamespaceState.TERMINATING:
        assert diagnosis.findings == ()


def test_causes(case: tuple[Scenario, Diagnosis]) -> None:
    scenario, diagnosis = case
    expected = scenario.expected
    if not expected.causes:
        assert diagnosis.cause is None
        return
    assert diagnosis.cause is not None
    assert diagnosis.cause.value == expected.causes[0], _summary(diagnosis)
    found = {f.cause.value for f in diagnosis.findings}
    assert set(expected.causes) <= found, _summary(diagnosis)
    blocking = {f.cause.value for f in diagnosis.findings if f.blocking}
    assert blocking <= set(expected.causes), _summary(diagnosis)


def test_blocking_objects(case: tuple[Scenario, Diagnosis]) -> None:
    scenario, diagnosis = case
    named = [o for f in diagnosis.findings if f.blocking for o in f.objects]
    for want in scenario.expected.blocking:
        assert any(
            o.kind == want.kind
            and fnmatch.fnmatchcase(o.name, want.name)
            and (want.namespace is None or o.namespace == want.namespace)
            for o in named
        ), (want, [o.display for o in named])


def test_first_remedy(case: tuple[Scenario, Diagnosis]) -> None:
    scenario, diagnosis = case
    want = scenario.expected.first_remedy
    if want == "none":
        assert diagnosis.first_remedy is None
        return
    assert diagnosis.first_remedy is not None, _summary(diagnosis)
    vocabulary = NAMESPACE_REMEDY if diagnosis.cause is Cause.NAMESPACE_FINALIZER else REMEDY
    assert diagnosis.first_remedy.action.value == vocabulary.get(want, want), _summary(diagnosis)


def test_blocked_remedies(case: tuple[Scenario, Diagnosis]) -> None:
    """Exactly the remedies the scenario says a dead fail-closed webhook would reject carry `blocked_by`,
    and the fix of that webhook is ranked before each of them in its finding."""
    scenario, diagnosis = case
    found = set()
    for finding in diagnosis.findings:
        for index, remedy in enumerate(finding.remedies):
            for blocker in remedy.blocked_by:
                found.add((remedy.action.value, blocker.webhook))
                earlier = finding.remedies[:index]
                assert any(
                    r.action is Action.DELETE_WEBHOOK_CONFIGURATION
                    and r.targets[0].name == blocker.configuration
                    and r.targets[0].kind == blocker.kind
                    for r in earlier
                ), _summary(diagnosis)
                assert any(o.kind == blocker.kind and o.name == blocker.configuration for o in finding.objects)
                assert any(blocker.webhook in e for e in finding.evidence)
    assert found == set(scenario.expected.blocked), _summary(diagnosis)


def test_controller_state(case: tuple[Scenario, Diagnosis]) -> None:
    """Issue 22 §1: the first finding about a finalizer says whether its controller is alive, dead or
    unknown, with the evidence; "uninstalled" is said only of a dead one."""
    scenario, diagnosis = case
    judged = [f for f in diagnosis.findings if f.controller is not None]
    for finding in judged:
        assert finding.controller is not None
        assert finding.controller.evidence, _summary(diagnosis)
        if "uninstalled" in finding.summary:
            assert finding.controller.state.value == "dead", _summary(diagnosis)
    if scenario.expected.controller is None:
        return
    assert judged, _summary(diagnosis)
    controller = judged[0].controller
    assert controller is not None
    assert controller.state.value == scenario.expected.controller, (controller, _summary(diagnosis))
    if scenario.expected.found_by is not None:  # issue 37 §3: how the controller was found
        assert controller.found_by is not None
        assert controller.found_by.value == scenario.expected.found_by, (controller, _summary(diagnosis))


def test_report_round_trips_through_json(case: tuple[Scenario, Diagnosis]) -> None:
    _, diagnosis = case
    assert Diagnosis.from_json(diagnosis.to_json()) == diagnosis


def _summary(diagnosis: Diagnosis) -> str:
    lines = [f"{diagnosis.state.value} cause={diagnosis.cause}"]
    for f in diagnosis.findings:
        lines.append(f"  {f.cause.value} blocking={f.blocking}: {f.summary}")
        lines.extend(
            f"    - {r.action.value} ({r.risk.value}): {r.description}" + (" [blocked]" if r.blocked_by else "")
            for r in f.remedies
        )
    return "\n".join(lines)
