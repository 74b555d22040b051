"""The evidence reads of issues 22 and 23 that fail: `/version`, the cluster's Leases, the
VolumeAttachments, and a deleting object read whole. A refusal of any of them is a named gap, which
makes the report incomplete (so no force-finalize is offered on it); a 404 from an API an older
server lacks (Leases, VolumeAttachments) or from an object gone since the list is no gap."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.domain.findings import Action
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from tests.emulator._api_support import Raw, make_ns
from tests.fakes.kubeapi import Emulator, FakeClock

NS = "shop"
OPTIONS = CollectOptions(deadline=10, call_timeout=3)
HELD = {
    "metadata": {"name": "widget", "namespace": NS, "finalizers": ["example.com/hold"]},
    "spec": {"ports": [{"port": 80}]},
}


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[tuple[Emulator, ClusterTarget]]:
    """A namespace terminating for an hour, held by a Service being deleted under a finalizer no
    controller is seen to work on (no controllers run, so nothing else moves)."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=False)
    emu.start()
    try:
        admin = Raw(emu, emu.admin_token)
        make_ns(admin, NS)
        assert admin.post(f"/api/v1/namespaces/{NS}/services", HELD).status == 201
        assert admin.delete(f"/api/v1/namespaces/{NS}/services/widget").status == 200  # kept by its finalizer
        assert admin.delete(f"/api/v1/namespaces/{NS}").status == 200
        emu.clock.advance(3600)  # stuck for an hour: nothing the writes above did is recent
        yield emu, ClusterTarget(name="emulated", kubeconfig=emu.write_kubeconfig(tmp_path / "kubeconfig"))
    finally:
        emu.stop()


def _diagnosed(stuck: tuple[Emulator, ClusterTarget]) -> DiagnosisResult:
    emu, target = stuck
    return diagnose_namespace(target, NS, options=OPTIONS, clock=emu.clock.now)


def _offers_force_finalize(result: DiagnosisResult) -> bool:
    return any(
        remedy.action is Action.FORCE_FINALIZE_NAMESPACE
        for finding in result.diagnosis.findings
        for remedy in finding.remedies
    )


def test_with_every_read_answered_the_report_is_complete(stuck: tuple[Emulator, ClusterTarget]) -> None:
    result = _diagnosed(stuck)
    assert result.diagnosis.complete, result.diagnosis.gaps
    [service] = result.snapshot.contents["services"]
    assert service["spec"]["ports"][0]["port"] == 80  # read whole: it is being deleted
    assert _offers_force_finalize(result)  # the baseline the refusals below take away


@pytest.mark.parametrize(
    ("request_line", "status", "gap", "reason"),
    [
        (r"^GET /version$", 403, "get /version", "forbidden"),
        (r"^GET /apis/coordination\.k8s\.io/v1/leases$", 403, "list leases (cluster-wide)", "forbidden"),
        (r"^GET /apis/storage\.k8s\.io/v1/volumeattachments$", 403, "list volumeattachments", "forbidden"),
        (r"^GET /api/v1/namespaces/shop/services/widget$", 403, "get services shop/widget", "forbidden"),
        (r"^GET /api/v1/namespaces/shop/services/widget$", 500, "get services shop/widget", "error"),
    ],
)
def test_a_refused_evidence_read_is_a_named_gap(
    stuck: tuple[Emulator, ClusterTarget], request_line: str, status: int, gap: str, reason: str
) -> None:
    emu, _ = stuck
    emu.knobs.inject_fault(request_line, status)

    result = _diagnosed(stuck)

    assert [(g.what, g.reason) for g in result.diagnosis.gaps] == [(gap, reason)]
    assert not result.diagnosis.complete
    assert not _offers_force_finalize(result)


@pytest.mark.parametrize(
    "request_line",
    [
        r"^GET /apis/coordination\.k8s\.io/v1/leases$",  # a server without coordination.k8s.io
        r"^GET /apis/storage\.k8s\.io/v1/volumeattachments$",  # ... or without VolumeAttachments
        r"^GET /api/v1/namespaces/shop/services/widget$",  # gone since the list
    ],
)
def test_a_404_from_an_absent_api_or_a_gone_object_is_no_gap(
    stuck: tuple[Emulator, ClusterTarget], request_line: str
) -> None:
    emu, _ = stuck
    emu.knobs.inject_fault(request_line, 404)

    result = _diagnosed(stuck)

    assert result.diagnosis.complete, result.diagnosis.gaps
