"""`scan` over several emulated clusters: thresholds, unreachable clusters, errors, parallelism."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.domain.findings import Cause, NamespaceState
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import CallError, Transport
from bot.services import scanning
from bot.services.scanning import ClusterScan, scan, scan_cluster
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, base_cluster, run_for

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
OPTIONS = CollectOptions(deadline=20, call_timeout=5)


def _stuck(api: Api, ns: str) -> None:
    """A namespace held by a ConfigMap whose finalizer nobody removes (its controller is gone)."""
    api.namespace(ns)
    api.configmap(ns, "settings", data={"a": "b"}, finalizers=["example.com/cleanup"])
    api.delete_namespace(ns)


class Clusters:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.emulators: dict[str, Emulator] = {}

    def add(self, name: str) -> tuple[Emulator, ClusterTarget]:
        emu = Emulator(clock=FakeClock(START), seed=len(self.emulators)).start()
        self.emulators[name] = emu
        kubeconfig = emu.write_kubeconfig(self.tmp_path / name / "kubeconfig")
        return emu, ClusterTarget(name=name, kubeconfig=kubeconfig)

    def unreachable(self, name: str) -> ClusterTarget:
        path = self.tmp_path / name / "kubeconfig"
        path.parent.mkdir(parents=True)
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: {name}, cluster: {{server: 'https://127.0.0.1:1'}}}}]\n"
            f"users: [{{name: {name}, user: {{token: secret-token-{name}}}}}]\n"
            f"contexts: [{{name: {name}, context: {{cluster: {name}, user: {name}}}}}]\n"
            f"current-context: {name}\n"
        )
        return ClusterTarget(name=name, kubeconfig=path)

    def stop(self) -> None:
        for emu in self.emulators.values():
            emu.stop()


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    c = Clusters(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def _prod(clusters: Clusters) -> tuple[Emulator, ClusterTarget]:
    """`old-a` deleted at 08:00, `old-b` at 08:30, `young` at 09:50; the cluster's clock stops at 10:00."""
    emu, target = clusters.add("prod")
    api = Api(emu)
    base_cluster(api)
    for i in range(3):
        api.namespace(f"active-{i}")
        api.configmap(f"active-{i}", "settings", data={"a": "b"})
    _stuck(api, "old-a")
    run_for(emu, 30 * 60, step=600)
    _stuck(api, "old-b")
    run_for(emu, 80 * 60, step=600)
    _stuck(api, "young")
    run_for(emu, 10 * 60, step=300)
    assert emu.clock.now() == START + 2 * HOUR
    return emu, target


def test_threshold_and_order(clusters: Clusters) -> None:
    emu, target = _prod(clusters)
    emu.journal.clear()

    result = scan_cluster(target, stuck_after=HOUR, now=emu.clock.now(), options=OPTIONS)

    assert result.reachable
    assert result.error is None
    assert result.namespaces == 10  # default, kube-system, kube-public, kube-node-lease, 3 active, 3 terminating
    assert sorted(result.terminating.values()) == [START, START + timedelta(minutes=30), START + timedelta(minutes=110)]
    assert [s.namespace for s in result.stuck] == ["old-a", "old-b"]  # oldest first; `young` is 10 minutes old
    for found in result.stuck:
        assert found.cluster == "prod"
        assert found.error is None
        assert found.result is not None
        assert result.terminating[found.uid] == found.terminating_since
        diagnosis = found.result.diagnosis
        assert diagnosis.state is NamespaceState.TERMINATING
        assert diagnosis.cause is Cause.ORPHANED_FINALIZER
        assert [o.name for f in diagnosis.findings if f.blocking for o in f.objects] == ["settings"]
        assert found.result.snapshot.observed_at == emu.clock.now()
    # one list of the namespaces; nothing read in namespaces that are not (yet) stuck
    assert emu.journal.lines().count("GET /api/v1/namespaces") == 1
    assert not [r for r in emu.journal.lines() if "/namespaces/young" in r or "/namespaces/active-" in r]


def test_now_is_injected(clusters: Clusters) -> None:
    _emu, target = _prod(clusters)
    # the emulator's clock says 10:00; the scan is told it is 12:00 the next day: all three are stuck
    tomorrow = START + timedelta(days=1, hours=4)
    result = scan_cluster(target, stuck_after=HOUR, now=tomorrow, options=OPTIONS)
    assert [s.namespace for s in result.stuck] == ["old-a", "old-b", "young"]
    assert all(s.result is not None and s.result.snapshot.observed_at == tomorrow for s in result.stuck)
    # told it is 08:59, none is; at 09:00, old-a is
    result = scan_cluster(target, stuck_after=HOUR, now=START + timedelta(minutes=59), options=OPTIONS)
    assert [s.namespace for s in result.stuck] == []
    result = scan_cluster(target, stuck_after=HOUR, now=START + HOUR, options=OPTIONS)
    assert [s.namespace for s in result.stuck] == ["old-a"]  # exactly stuck_after old counts as stuck


def test_several_clusters_one_unreachable(clusters: Clusters, tmp_path: Path) -> None:
    emu, prod = _prod(clusters)
    quiet_emu, quiet = clusters.add("quiet")
    base_cluster(Api(quiet_emu))
    expired_emu, expired = clusters.add("expired")
    expired_emu.knobs.expired_tokens.add(expired_emu.user_token)
    down = clusters.unreachable("down")
    missing = ClusterTarget(name="missing", kubeconfig=tmp_path / "nowhere" / "kubeconfig")

    scans = scan([down, prod, missing, quiet, expired], stuck_after=HOUR, now=emu.clock.now(), options=OPTIONS)

    assert [s.cluster for s in scans] == ["down", "prod", "missing", "quiet", "expired"]
    by_name = {s.cluster: s for s in scans}
    assert [s.namespace for s in by_name["prod"].stuck] == ["old-a", "old-b"]
    assert by_name["quiet"] == ClusterScan("quiet", True, None, 4, {}, ())
    for name in ("down", "missing", "expired"):
        assert not by_name[name].reachable
        assert by_name[name].stuck == ()
        assert by_name[name].terminating == {}
        assert by_name[name].namespaces == 0
    assert by_name["down"].error is not None
    assert "'down' (https://127.0.0.1:1) is unreachable: cannot connect" in by_name["down"].error
    assert "secret-token" not in by_name["down"].error
    assert by_name["missing"].error is not None
    assert by_name["missing"].error.startswith(f"cluster 'missing': kubeconfig {missing.kubeconfig}: ")
    assert by_name["expired"].error is not None
    assert "refuses our credentials" in by_name["expired"].error
    assert scan([], stuck_after=HOUR, now=START) == []


def test_a_namespace_that_cannot_be_read(clusters: Clusters) -> None:
    emu, target = _prod(clusters)
    emu.knobs.inject_fault(r"^GET /api/v1/namespaces/old-a$", 500)
    # and so is the list of namespaces, where its read is made once more (by its name)
    emu.knobs.inject_fault(r"^GET /api/v1/namespaces$", 500, query=r"metadata\.name%3Dold-a")

    result = scan_cluster(target, stuck_after=HOUR, now=emu.clock.now(), options=OPTIONS)

    assert result.reachable
    old_a, old_b = result.stuck
    assert old_a.namespace == "old-a"
    assert old_a.result is None
    assert old_a.error is not None
    assert old_a.error.startswith("the namespace could not be read: cluster 'prod'")
    assert old_b.result is not None
    assert old_b.error is None


def test_a_namespace_gone_between_the_list_and_the_read(clusters: Clusters) -> None:
    emu, target = _prod(clusters)
    # the list still shows old-a terminating; its read finds it gone
    emu.knobs.inject_fault(r"^GET /api/v1/namespaces/old-a$", 404)
    result = scan_cluster(target, stuck_after=HOUR, now=emu.clock.now(), options=OPTIONS)
    assert [s.namespace for s in result.stuck] == ["old-b"]
    assert len(result.terminating) == 3


def test_a_failing_rule_is_an_error_of_that_namespace(clusters: Clusters, monkeypatch: pytest.MonkeyPatch) -> None:
    emu, target = _prod(clusters)
    real = scanning.diagnose

    def diagnose(snapshot: Any) -> Any:
        if snapshot.namespace == "old-b":
            raise KeyError("spec")
        return real(snapshot)

    monkeypatch.setattr(scanning, "diagnose", diagnose)
    result = scan_cluster(target, stuck_after=HOUR, now=emu.clock.now(), options=OPTIONS)
    assert [(s.namespace, s.error) for s in result.stuck] == [
        ("old-a", None),
        ("old-b", "the diagnosis failed (KeyError)"),
    ]


def test_a_bug_in_one_cluster_does_not_sink_the_scan(clusters: Clusters, monkeypatch: pytest.MonkeyPatch) -> None:
    real = scanning.scan_cluster

    def scan_cluster(target: ClusterTarget, **kwargs: Any) -> ClusterScan:
        if target.name == "b":
            raise RuntimeError("boom")
        return real(target, **kwargs)

    monkeypatch.setattr(scanning, "scan_cluster", scan_cluster)
    _emu_a, a = clusters.add("a")
    _, b = clusters.add("b")
    scans = scan([a, b], stuck_after=HOUR, now=START, options=OPTIONS)
    assert scans[0].reachable
    assert scans[1] == ClusterScan("b", False, "the scan failed (internal error: RuntimeError)", 0, {}, ())


@pytest.mark.parametrize(("parallel", "expected"), [(1, 1), (2, 2), (8, 4)])
def test_clusters_in_parallel(
    clusters: Clusters, monkeypatch: pytest.MonkeyPatch, parallel: int, expected: int
) -> None:
    targets = []
    for i in range(4):
        emu, target = clusters.add(f"c{i}")
        emu.knobs.latency(300, match=r"^GET /api/v1/namespaces$")
        targets.append(target)
    active = 0
    most = 0
    lock = threading.Lock()
    real = scanning.scan_cluster

    def counting(target: ClusterTarget, **kwargs: Any) -> ClusterScan:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        try:
            return real(target, **kwargs)
        finally:
            with lock:
                active -= 1

    monkeypatch.setattr(scanning, "scan_cluster", counting)
    started = time.monotonic()
    scans = scan(targets, stuck_after=HOUR, now=START, parallel_clusters=parallel, options=OPTIONS)
    elapsed = time.monotonic() - started

    assert [s.cluster for s in scans] == ["c0", "c1", "c2", "c3"]
    assert all(s.reachable for s in scans)
    assert most == expected
    if parallel == 1:
        assert elapsed >= 4 * 0.3


def test_clusters_with_one_ca_connect_at_once(clusters: Clusters) -> None:
    """The client's cache of inline certificates must not hand a half-written CA file to a parallel connect."""
    from kubernetes.config import kube_config

    emu, _ = clusters.add("shared-ca")
    targets = [
        ClusterTarget(name=f"ctx-{i}", kubeconfig=emu.write_kubeconfig(clusters.tmp_path / f"ctx-{i}.yaml"))
        for i in range(8)
    ]
    failures = []
    for _ in range(25):
        kube_config._temp_files.clear()  # as in a fresh process: every CA is written anew
        barrier = threading.Barrier(len(targets))

        def one(target: ClusterTarget, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            connection = connect(target)
            try:
                Transport(connection).get("/api/v1/namespaces/default", timeout=5)
            except CallError as e:
                failures.append(e.message)
            finally:
                connection.close()

        with ThreadPoolExecutor(len(targets)) as pool:
            list(pool.map(one, targets))
    assert failures == []


def test_a_tls_failure_says_so(clusters: Clusters) -> None:
    emu, target = clusters.add("wrong-ca")
    assert target.kubeconfig is not None
    doc = yaml.safe_load(target.kubeconfig.read_text())
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if not bundle.exists():
        pytest.skip("no system CA bundle to take a foreign CA from")
    foreign = bundle.read_text().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(foreign.encode()).decode()
    target.kubeconfig.write_text(yaml.safe_dump(doc))

    result = scan_cluster(target, stuck_after=HOUR, now=START, options=OPTIONS)

    assert not result.reachable
    assert result.error is not None
    assert "is unreachable: cannot connect: TLS failed: [SSL: CERTIFICATE_VERIFY_FAILED]" in result.error
    assert emu.user_token not in result.error
