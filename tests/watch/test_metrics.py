"""The metrics below the running bot (issue 25 §2): every request the transport makes to a cluster is
told to the observer handed in, with its outcome (the real client against the Kubernetes API
emulator, its faults set by knobs), and what /metrics computes from the database still answers, saying
so, when the database does not."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bot.domain.refs import ClusterName
from bot.errors import ClusterUnreachableError
from bot.kube.connecting import ClusterTarget
from bot.kube.observing import CallOutcome
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import CallError, Transport
from bot.services.diagnosing import diagnose_registered
from bot.services.metrics import Metrics, StoreMetrics
from bot.store.database import Database
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, CallOutcome]] = []

    def call_observed(self, cluster: str, outcome: CallOutcome, seconds: float) -> None:
        assert seconds >= 0
        self.calls.append((cluster, outcome))


def test_each_request_is_observed_with_its_outcome(kube_emulator: Emulator, tmp_path: Path) -> None:
    seen = Seen()
    registry = ClusterRegistry(
        [ClusterTarget(name=ClusterName("prod-eu"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))],
        observer=seen,
    )
    knobs = kube_emulator.knobs
    knobs.forbid("secrets", verbs=("list",))
    knobs.inject_fault(r"^GET /apis/apps/v1/deployments$", 429, headers={"Retry-After": "0"}, times=1)
    try:
        with registry.lease(ClusterName("prod-eu")) as connection:
            transport = Transport(connection)
            transport.get("/version")
            for path in ("/api/v1/secrets", "/api/v1/namespaces/nope"):
                with contextlib.suppress(CallError):
                    transport.get(path)
            transport.get("/apis/apps/v1/deployments")  # throttled once, then answered
    finally:
        registry.close()
    assert seen.calls == [
        ("prod-eu", CallOutcome.SUCCESS),
        ("prod-eu", CallOutcome.UNAUTHORIZED),
        ("prod-eu", CallOutcome.CLIENT_ERROR),
        ("prod-eu", CallOutcome.THROTTLED),
        ("prod-eu", CallOutcome.SUCCESS),
    ]


def test_a_diagnosis_through_the_registry_is_counted_per_cluster_and_outcome(
    kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    (tmp_path / "gone.kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    metrics = Metrics()
    registry = ClusterRegistry(
        [
            ClusterTarget(name=ClusterName("prod-eu"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc")),
            ClusterTarget(name=ClusterName("gone"), kubeconfig=tmp_path / "gone.kubeconfig"),
        ],
        observer=metrics,
    )
    kube_emulator.journal.clear()
    try:
        diagnose_registered(registry, ClusterName("prod-eu"), "ddd")
        with contextlib.suppress(ClusterUnreachableError):
            diagnose_registered(registry, ClusterName("gone"), "ddd")
    finally:
        registry.close()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    asked = len(kube_emulator.journal.entries())
    counted = sum(
        v
        for (n, labels), v in samples.items()
        if n == "nsstuck_kube_requests_total" and ("cluster", "prod-eu") in labels
    )
    assert counted == asked > 0  # every request the emulator saw, and no other
    timed = samples[("nsstuck_kube_request_duration_seconds_count", (("cluster", "prod-eu"), ("outcome", "success")))]
    assert timed == samples[("nsstuck_kube_requests_total", (("cluster", "prod-eu"), ("outcome", "success")))]
    assert samples[("nsstuck_kube_requests_total", (("cluster", "gone"), ("outcome", "connection_error")))] >= 1
    assert samples[("nsstuck_build_info", (("version", "0.1.0"),))] == 1


def test_metrics_from_the_database_say_when_it_does_not_answer(tmp_path: Path) -> None:
    # a PostgreSQL URL where nothing listens: the scrape answers, without the database's metrics
    down = Database("postgresql+psycopg://nsstuck@127.0.0.1:1/nsstuck", connect_args={"connect_timeout": 2})
    metrics = Metrics()
    metrics.registry.register(
        StoreMetrics(down, clock=lambda: datetime.now(UTC), registered=lambda _: True, watched=["x"])
    )
    try:
        text = metrics.render().decode()
    finally:
        down.dispose()
    assert "nsstuck_database_up 0.0" in text
    assert "nsstuck_namespace_terminating_seconds" not in text
    assert "nsstuck_build_info" in text
