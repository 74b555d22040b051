"""A scenario's state restored (`state.py`, `apply_scenario_once`) is the state its build leaves.

For every scenario, an emulator the scenario was built on (`one_built`, one at a time) and a
fresh one its captured state was restored into answer every read alike over HTTP: every object of every
listable type with its resourceVersion, the discovery documents (legacy and aggregated), the list's
resourceVersion, the watch replay from the oldest kept event, what the user identity is refused, and
the next Audit-Id. Some scenarios are also run on for five minutes on both, and read through the real
kubectl. The state restored is the one pickled and read back, as the run's processes share it
(``state_files.py``); a state another process built and saved reads as the one built here, and a saved
file that cannot be read means a build.
"""

from __future__ import annotations

import dataclasses
import http.client
import pickle
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests._python import PYTHON, assert_no_resource_warning
from tests.fakes.kubeapi import Emulator, FakeClock, state_files
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import (
    _BUILT,
    SCENARIOS,
    Api,
    _configure,
    _once_key,
    apply_scenario,
    apply_scenario_once,
    run_for,
    snapshot,
)
from tests.fakes.kubeapi.state import StateError, capture, restore

from ._scenario_support import (
    START,
    Applied,
    AppliedScenarios,
    applied_scenarios,
    kubectl,
    kubectl_available,
    new_emulator,
)

__all__ = ["applied_scenarios"]

NAMES = sorted(SCENARIOS)
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
# scenarios whose controllers carry memory between passes that decides what happens next (pod GC's
# timers, the kubelet's kills, the CRD finalizer's attempts, the namespace controller's queue, a stopped
# kube-controller-manager), run on after the restore
RUN_ON = (
    "pod-on-missing-node",
    "pod-on-notready-node",
    "seed003-kiali-orphaned-finalizer",
    "content-deleting",
    "controller-manager-down",
    "just-deleted",
)


def _served(emu: Emulator, namespace: str) -> dict[str, Any]:
    """What a client can read of ``emu`` (everything but the Audit-Id, which each read moves on, and the
    address it serves at)."""
    admin = KubeHTTP(emu.url, emu.admin_token)
    user = KubeHTTP(emu.url, emu.user_token)
    try:
        out: dict[str, Any] = {"objects": snapshot(emu)}
        out["/api"] = admin.raw("GET", "/api")
        out["/api/v1"] = admin.raw("GET", "/api/v1")
        out["/apis"] = admin.raw("GET", "/apis")
        out["/apis aggregated"] = admin.raw("GET", "/apis", accept=AGGREGATED)
        out["/api aggregated"] = admin.raw("GET", "/api", accept=AGGREGATED)
        for group in admin.get("/apis").get("groups") or []:
            for version in group.get("versions") or []:
                path = f"/apis/{version['groupVersion']}"
                out[path] = admin.raw("GET", path)
        out["list rv"] = admin.get("/api/v1/namespaces", limit="1")["metadata"]["resourceVersion"]
        since = str(emu.cluster.store.first_rv - 1)
        for path in ("/api/v1/namespaces", "/api/v1/pods", "/api/v1/events"):
            out[f"watch {path}"] = admin.raw(
                "GET", path, query={"watch": "1", "resourceVersion": since, "timeoutSeconds": "0.001"}
            )
        for what in ("pods", "secrets", "configmaps"):
            out[f"user {what}"] = user.raw("GET", f"/api/v1/namespaces/{namespace}/{what}")
        # the one thing that differs: the address each emulator serves at, which /api names
        here = emu.cluster.server_address.encode()
        return {k: (v[0], v[1], v[2].replace(here, b"<server>")) if isinstance(v, tuple) else v for k, v in out.items()}
    finally:
        admin.close_all()
        user.close_all()


def _next_audit_id(emu: Emulator) -> str | None:
    parts = urlsplit(emu.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request("GET", "/version", headers={"Authorization": f"Bearer {emu.admin_token}"})
        resp = conn.getresponse()
        resp.read()
        return resp.getheader("Audit-Id")
    finally:
        conn.close()


def _in_process(emu: Emulator) -> dict[str, Any]:
    """What the emulator decides answers from, beside the store: the clock, options, knobs, logs."""
    return {
        "now": emu.clock.now(),
        "options": dict(emu.options),
        "discovery_error_style": emu.discovery_error_style,
        "knobs": repr(emu.knobs),
        "pod_logs": dict(emu.pod_logs._lines),
        "tokens": dict(emu.tokens),
        "journal": [e.line for e in emu.journal.entries(admin=True)],
    }


@pytest.fixture(scope="module", params=NAMES)
def one_built(request: pytest.FixtureRequest) -> Iterator[Applied]:
    """One scenario built, stopped before the next is built: one idle emulator at a time instead of every
    scenario's (each polls, ``_scenario_support``)."""
    name = request.param
    emu = new_emulator(SCENARIOS[name])
    try:
        apply_scenario(emu, name)
        yield Applied(emu, SCENARIOS[name], snapshot(emu))
    finally:
        emu.stop()


def test_a_restored_state_reads_as_the_built_one(one_built: Applied) -> None:
    name, built = one_built.scenario.name, one_built.emu
    restored = Emulator(clock=FakeClock(START), seed=0).start()
    try:
        # as the run's shared files carry it (state_files.py): pickled, then read back
        restore(restored, pickle.loads(pickle.dumps(capture(built), protocol=pickle.HIGHEST_PROTOCOL)))
        assert _next_audit_id(restored) == _next_audit_id(built)
        assert _in_process(restored) == _in_process(built)
        ns = SCENARIOS[name].expected.namespace
        theirs, ours = _served(built, ns), _served(restored, ns)
    finally:
        restored.stop()
    assert ours.keys() == theirs.keys()
    assert [key for key in ours if ours[key] != theirs[key]] == []
    assert ours["objects"] == one_built.snapshot


@pytest.mark.parametrize("name", RUN_ON)
def test_a_restored_state_runs_on_as_the_built_one(name: str) -> None:
    built = new_emulator(SCENARIOS[name])
    restored = Emulator(clock=FakeClock(START), seed=0).start()
    try:
        apply_scenario(built, name)
        restore(restored, capture(built))
        for emu in (built, restored):
            run_for(emu, 300, step=30)
        ns = SCENARIOS[name].expected.namespace
        assert _served(restored, ns) == _served(built, ns)
    finally:
        built.stop()
        restored.stop()


def test_apply_scenario_once_restores_what_the_build_left(applied_scenarios: AppliedScenarios) -> None:
    name = "pvc-in-use"
    built = applied_scenarios.get(name).emu  # built by apply_scenario, which remembers what it left
    again = new_emulator(SCENARIOS[name])
    try:
        apply_scenario_once(again, name)
        store, theirs = again.cluster.store, built.cluster.store
        # the very objects the build stored (a build of its own would have stored new ones)
        assert store.data.keys() == theirs.data.keys()
        for key, bucket in store.data.items():
            assert all(entry is theirs.data[key][at] for at, entry in bucket.items()), key
        assert _served(again, "database") == _served(built, "database")
    finally:
        again.stop()


def test_apply_scenario_once_builds_on_an_emulator_holding_something_else(
    applied_scenarios: AppliedScenarios,
) -> None:
    name = "pvc-in-use"
    built = applied_scenarios.get(name)
    other = new_emulator(SCENARIOS[name])
    try:
        Api(other).namespace("already-here")
        apply_scenario_once(other, name)
        objects = snapshot(other)
    finally:
        other.stop()
    assert any("/namespaces//already-here" in key for key in objects)
    assert built.snapshot.keys() < objects.keys()


def test_what_cannot_be_captured_or_restored_is_refused() -> None:
    seven = Emulator(clock=FakeClock(START), seed=7).start()
    zero = Emulator(clock=FakeClock(START), seed=0).start()
    try:
        with pytest.raises(StateError, match="seed 7 cannot be restored into seed 0"):
            restore(zero, capture(seven))
        zero.route_service("ns", "svc", ("127.0.0.1", 1))
        with pytest.raises(StateError, match="routed Services"):
            capture(zero)
    finally:
        seven.stop()
        zero.stop()


@pytest.mark.kubectl
@pytest.mark.skipif(not kubectl_available(), reason="/usr/bin/kubectl is not installed")
@pytest.mark.parametrize("name", ["seed000-metrics-missing-endpoints", "seed003-kiali-orphaned-finalizer"])
def test_kubectl_reads_a_restored_state_as_the_built_one(
    name: str, applied_scenarios: AppliedScenarios, tmp_path: Path
) -> None:
    built = applied_scenarios.get(name).emu
    restored = Emulator(clock=FakeClock(START), seed=0).start()
    try:
        restore(restored, capture(built))
        reads = (
            ("api-resources", "-o", "wide"),
            ("get", "namespaces,pods,configmaps,apiservices,crd,events", "-A", "-o", "json"),
        )
        for args in reads:
            theirs = kubectl(built, tmp_path, *args, admin=True)
            ours = kubectl(restored, tmp_path, *args, admin=True)
            assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout), args
            assert theirs.stdout
    finally:
        restored.stop()


@pytest.fixture
def shared_in(tmp_path: Path) -> Iterator[Path]:
    """The run's shared folder of states replaced by an empty one of the test's, for the test."""
    before = state_files.shared_folder()
    folder = tmp_path / "states"
    state_files.share_states_in(folder)
    try:
        yield folder
    finally:
        state_files.share_states_in(before)


def _key(name: str) -> tuple[str, str]:
    emu = new_emulator(SCENARIOS[name])
    try:
        _configure(emu, SCENARIOS[name])
        key = _once_key(emu, SCENARIOS[name])
    finally:
        emu.stop()
    assert key is not None
    return key


CROSS = ("seed000-metrics-missing-endpoints", "pod-on-missing-node", "content-deleting")
_OTHER_PROCESS = """
import sys
from pathlib import Path
from tests.emulator._scenario_support import new_emulator
from tests.fakes.kubeapi import state_files
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario_once
state_files.share_states_in(Path(sys.argv[1]))
for name in sys.argv[2:]:
    emu = new_emulator(SCENARIOS[name])
    apply_scenario_once(emu, name)
    emu.stop()
"""


def test_a_state_another_process_saved_reads_as_the_one_built_here(shared_in: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [*PYTHON, "-c", _OTHER_PROCESS, str(shared_in), *CROSS],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert_no_resource_warning(done.stderr, "the other process")
    for name in CROSS:
        key = _key(name)  # the same starting state digests alike in both processes
        assert (shared_in / f"{key[0]}-{key[1]}.state").is_file(), sorted(p.name for p in shared_in.iterdir())
        state = state_files.load(key)
        assert state is not None, name
        built = new_emulator(SCENARIOS[name])
        restored = Emulator(clock=FakeClock(START), seed=0).start()
        try:
            apply_scenario(built, name)  # built here, read as it was left (no read before these)
            restore(restored, state)
            assert _next_audit_id(restored) == _next_audit_id(built)
            assert _in_process(restored) == _in_process(built)
            ns = SCENARIOS[name].expected.namespace
            assert _served(restored, ns) == _served(built, ns), name
        finally:
            built.stop()
            restored.stop()


def test_a_saved_state_is_read_instead_of_built_and_an_unreadable_one_means_a_build(
    applied_scenarios: AppliedScenarios, shared_in: Path
) -> None:
    name = "pvc-in-use"
    built = applied_scenarios.get(name)
    key = _key(name)
    kept = _BUILT.pop(key, None)  # what this process keeps in memory, put back after
    try:
        # a file that is not a state: a build, saved over it
        path = shared_in / f"{key[0]}-{key[1]}.state"
        path.write_bytes(b"not a pickle")
        assert state_files.load(key) is None
        first = new_emulator(SCENARIOS[name])
        try:
            apply_scenario_once(first, name)
            assert snapshot(first) == built.snapshot
        finally:
            first.stop()
        saved = state_files.load(key)
        assert saved is not None
        # read from the file (nothing kept in memory): the very objects the file holds, no build
        _BUILT.pop(key, None)
        again = new_emulator(SCENARIOS[name])
        try:
            apply_scenario_once(again, name)
            held = _BUILT[key]
            assert held is not saved  # read from the file anew
            for bucket_key, bucket in again.cluster.store.data.items():
                assert all(entry is held.data[bucket_key][at] for at, entry in bucket.items()), bucket_key
            assert _served(again, "database") == _served(built.emu, "database")
        finally:
            again.stop()
    finally:
        if kept is not None:
            _BUILT[key] = kept
        else:
            _BUILT.pop(key, None)


def test_two_wanting_one_state_at_once_build_it_once(
    applied_scenarios: AppliedScenarios, shared_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "pvc-in-use"
    built = applied_scenarios.get(name)
    key = _key(name)
    builds: list[str] = []
    scenario = SCENARIOS[name]

    def counted(emu: Any) -> None:
        builds.append(threading.current_thread().name)
        scenario.build(emu)

    monkeypatch.setitem(SCENARIOS, name, dataclasses.replace(scenario, build=counted))
    emus = [new_emulator(scenario), new_emulator(scenario)]
    kept = _BUILT.pop(key, None)  # nothing in memory: each thread looks in the shared folder
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def want(emu: Emulator) -> None:
        try:
            start.wait(timeout=30)
            apply_scenario_once(emu, name)
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=want, args=(emu,), name=f"want-{i}") for i, emu in enumerate(emus)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures, failures
        assert len(builds) == 1, builds  # the other waited on the lock file, then read what was saved
        assert state_files.load(key) is not None
        for emu in emus:
            assert snapshot(emu) == built.snapshot
    finally:
        for emu in emus:
            emu.stop()
        if kept is not None:
            _BUILT[key] = kept
        else:
            _BUILT.pop(key, None)
