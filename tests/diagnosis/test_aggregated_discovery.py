"""Issue 23 §1: discovery as the namespace controller sees it, collected over HTTP from the emulator and
diagnosed by the real rules. A version aggregated discovery lists as Stale is failing; Stale while its
APIService is Available and its per-version document answers is the aggregator defect of
kubernetes/kubernetes#119662 on 1.27.0-1.27.5 and 1.28.0-1.28.1, and not on a release with the fix."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.domain.findings import Action, Cause, Finding
from bot.domain.snapshot import GroupVersionStatus, NamespaceSnapshot
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import apply_scenario_once

GV = "allocation.agones.dev/v1"


def _diagnose(tmp_path: Path, scenario: str, **then: Any) -> tuple[DiagnosisResult, list[str]]:
    """Build the scenario, set the emulator options `then` (the server as the diagnosis finds it), and
    diagnose game-servers; also returns the requests the diagnosis made."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
    try:
        apply_scenario_once(emu, scenario)
        emu.options.update(then)
        emu.journal.clear()
        result = diagnose_namespace(
            ClusterTarget(name="emulated", kubeconfig=emu.write_kubeconfig(tmp_path / "kubeconfig")),
            "game-servers",
            options=CollectOptions(deadline=10, call_timeout=3),
            clock=emu.clock.now,
        )
        return result, emu.journal.lines()
    finally:
        emu.stop()


def _status(snapshot: NamespaceSnapshot, gv: str) -> GroupVersionStatus:
    return next(s for s in snapshot.group_versions if s.group_version == gv)


def _first(result: DiagnosisResult) -> Finding:
    return result.diagnosis.findings[0]


def test_stale_while_available_on_an_unfixed_release_is_the_aggregator_defect(tmp_path: Path) -> None:
    result, requests = _diagnose(tmp_path, "aggregator-stale-defect")
    finding = _first(result)
    assert finding.cause is Cause.AGGREGATED_DISCOVERY_DEFECT
    assert finding.blocking
    assert [o.name for o in finding.objects] == ["v1.allocation.agones.dev"]
    assert "kubernetes/kubernetes#119662" in finding.summary
    assert "v1.28.1" in finding.summary
    assert "the API server's version (/version): v1.28.1" in finding.evidence
    assert any(e.startswith(f"aggregated discovery (apidiscovery.k8s.io/v2beta1) lists {GV}") for e in finding.evidence)
    assert f"GET /apis/{GV} (the per-version document, asked as a second opinion) answered 200" in finding.evidence
    assert any("Available=True" in e for e in finding.evidence)
    # upgrading comes first; deleting the healthy APIService and force-finalizing only after it
    actions = [r.action for r in finding.remedies]
    assert actions == [Action.RESTORE_BACKEND, Action.DELETE_APISERVICE, Action.FORCE_FINALIZE_NAMESPACE]
    assert finding.remedies[0].description.startswith("Upgrade the control plane to 1.28.2 or later")
    # no other finding blames the APIService's backend or the discovery of that version
    assert {f.cause for f in result.diagnosis.findings} == {Cause.AGGREGATED_DISCOVERY_DEFECT}
    # the collector read aggregated discovery: Current versions needed no per-version GET, the Stale one did
    status = _status(result.snapshot, GV)
    assert (status.available, status.aggregated, status.freshness, status.legacy_answered) == (
        False,
        "v2beta1",
        "Stale",
        True,
    )
    apps = _status(result.snapshot, "apps/v1")
    assert (apps.available, apps.freshness, apps.legacy_answered) == (True, "Current", None)
    assert "GET /apis/apps/v1" not in requests
    assert "GET /api/v1" not in requests
    assert f"GET /apis/{GV}" in requests
    assert any(t.key == "deployments.apps" for t in result.snapshot.resource_types)


def test_a_stale_version_whose_apiservice_is_down_is_apiservice_unavailable(tmp_path: Path) -> None:
    result, _ = _diagnose(tmp_path, "aggregated-stale-backend-down")
    finding = _first(result)
    assert finding.cause is Cause.APISERVICE_UNAVAILABLE
    assert Cause.AGGREGATED_DISCOVERY_DEFECT not in {f.cause for f in result.diagnosis.findings}
    assert any(e.startswith(f"aggregated discovery (apidiscovery.k8s.io/v2beta1) lists {GV}") for e in finding.evidence)
    assert any(e.startswith(f"GET /apis/{GV} answered 503") for e in finding.evidence)
    assert any("Available=False (MissingEndpoints)" in e for e in finding.evidence)
    assert finding.remedies[0].action is Action.RESTORE_BACKEND
    assert _status(result.snapshot, GV).legacy_answered is False


def test_on_a_release_with_the_fix_the_second_opinion_decides(tmp_path: Path) -> None:
    # a 1.28.2 aggregator that still lists the version Stale (its last fetch failed): not #119662
    result, _ = _diagnose(
        tmp_path, "aggregator-stale-defect", server_version="1.28.2", aggregated_discovery_defect=True
    )
    causes = {f.cause for f in result.diagnosis.findings}
    assert Cause.AGGREGATED_DISCOVERY_DEFECT not in causes
    finding = _first(result)
    assert finding.cause is Cause.DISCOVERY_FAILURE
    assert finding.blocking
    assert "v1.28.2 has the aggregator fix" in finding.summary
    assert any(
        "carries the fix of kubernetes/kubernetes#119662, so this is not that defect" in e for e in finding.evidence
    )
    assert finding.remedies[0].action is Action.INVESTIGATE
    assert Action.DELETE_APISERVICE not in [r.action for r in finding.remedies]


def test_on_a_release_with_the_fix_a_current_version_lets_the_namespace_go(tmp_path: Path) -> None:
    result, _ = _diagnose(tmp_path, "aggregator-stale-fixed")
    assert result.diagnosis.state.value == "not_found"


def test_a_minor_without_patch_is_said_to_be_unknown(tmp_path: Path) -> None:
    result, _ = _diagnose(tmp_path, "aggregator-stale-defect", server_version="1.28", aggregated_discovery_defect=True)
    finding = _first(result)
    assert finding.cause is Cause.AGGREGATED_DISCOVERY_DEFECT
    assert "the API server's version (/version): v1.28" in finding.evidence
    assert any(e.startswith("the patch release is not known") for e in finding.evidence)
    assert not any("is a release with" in e for e in finding.evidence)
    assert finding.remedies[0].action is Action.RESTORE_BACKEND


def test_group_version_status_json_is_additive() -> None:
    old = {"group_version": "apps/v1", "available": True, "status_code": 200, "error": None, "body": None}
    parsed = GroupVersionStatus.from_json(old)
    assert (parsed.aggregated, parsed.freshness, parsed.legacy_answered) == (None, None, None)
    assert parsed.to_json() == old
    stale = GroupVersionStatus(GV, False, 200, "stale", None, aggregated="v2", freshness="Stale", legacy_answered=True)
    assert GroupVersionStatus.from_json(stale.to_json()) == stale
    assert stale.to_json()["freshness"] == "Stale"
