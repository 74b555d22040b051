"""The namespace's Events as evidence (issues 22 and 23): read whole from events.k8s.io/v1, and from core
v1 on a server without that group (before 1.19, or one that hides it); either way the snapshot keeps
them as the server gave them and `bot.domain.events.view` reads both forms alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.domain.events import view
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from tests.emulator._api_support import Raw, make_ns
from tests.fakes.kubeapi import Emulator, FakeClock

NS = "shop"
OPTIONS = CollectOptions(deadline=10, call_timeout=3)
EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "widget.1", "namespace": NS},
    "involvedObject": {"kind": "ConfigMap", "name": "widget", "namespace": NS},
    "reason": "CleanupFailed",
    "message": 'jobs.batch "cleanup" is forbidden: unable to create new content in namespace shop',
    "type": "Warning",
    "source": {"component": "widget-operator"},
    "lastTimestamp": "2026-11-20T07:59:00Z",
    "count": 3,
}


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[tuple[Emulator, ClusterTarget]]:
    """A namespace held by a finalizer, with one Event recorded before its deletion (no controllers run,
    so nothing deletes the Event)."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=False)
    emu.start()
    try:
        admin = Raw(emu, emu.admin_token)
        make_ns(admin, NS)
        held = {"metadata": {"name": "widget", "namespace": NS, "finalizers": ["example.com/hold"]}}
        assert admin.post(f"/api/v1/namespaces/{NS}/configmaps", held).status == 201
        assert admin.post(f"/api/v1/namespaces/{NS}/events", EVENT).status == 201
        assert admin.delete(f"/api/v1/namespaces/{NS}").status == 200
        yield emu, ClusterTarget(name="emulated", kubeconfig=emu.write_kubeconfig(tmp_path / "kubeconfig"))
    finally:
        emu.stop()


def _event_lists(emu: Emulator) -> list[tuple[str, str]]:
    return [
        (e.path, e.accept)
        for e in emu.journal.entries()
        if e.path.endswith(f"/namespaces/{NS}/events") and e.accept == "application/json"
    ]


def test_events_are_read_from_events_k8s_io(stuck: tuple[Emulator, ClusterTarget]) -> None:
    emu, target = stuck
    emu.journal.clear()

    result = diagnose_namespace(target, NS, options=OPTIONS, clock=emu.clock.now)

    assert _event_lists(emu) == [(f"/apis/events.k8s.io/v1/namespaces/{NS}/events", "application/json")]
    [event] = result.snapshot.events
    assert event["apiVersion"] == "events.k8s.io/v1"
    seen = view(event)
    assert (seen.kind, seen.name, seen.reporter, seen.count) == ("ConfigMap", "widget", "widget-operator", 3)
    assert seen.message == EVENT["message"]
    assert result.diagnosis.complete, result.diagnosis.gaps


def test_events_fall_back_to_core_v1_where_events_k8s_io_is_missing(stuck: tuple[Emulator, ClusterTarget]) -> None:
    emu, target = stuck
    emu.knobs.inject_fault(rf"^GET /apis/events\.k8s\.io/v1/namespaces/{NS}/events$", 404)
    emu.journal.clear()

    result = diagnose_namespace(target, NS, options=OPTIONS, clock=emu.clock.now)

    assert _event_lists(emu) == [
        (f"/apis/events.k8s.io/v1/namespaces/{NS}/events", "application/json"),
        (f"/api/v1/namespaces/{NS}/events", "application/json"),
    ]
    [event] = result.snapshot.events
    assert event["apiVersion"] == "v1"
    seen = view(event)
    assert (seen.kind, seen.name, seen.reporter, seen.message) == (
        "ConfigMap",
        "widget",
        "widget-operator",
        EVENT["message"],
    )
    assert result.diagnosis.complete, result.diagnosis.gaps


def test_a_refused_event_list_is_a_gap(stuck: tuple[Emulator, ClusterTarget]) -> None:
    emu, target = stuck
    emu.knobs.inject_fault(rf"^GET /apis/events\.k8s\.io/v1/namespaces/{NS}/events$", 403)

    result = diagnose_namespace(target, NS, options=OPTIONS, clock=emu.clock.now)

    assert not result.snapshot.events
    # the evidence list, and the same path's list of content (events.k8s.io's Events as a type)
    assert sorted(g.what for g in result.diagnosis.gaps) == [
        f"list events in {NS}",
        f"list events.events.k8s.io in {NS}",
    ]
