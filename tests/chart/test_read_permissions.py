"""The read-only ClusterRole is enough, and all of it is needed: every scenario of the emulator's
library is diagnosed and scanned (as a digest does) over HTTP, and every request made must be
allowed by `READ_PERMISSIONS`; across them, every rule must have been used.

The scenarios include an unavailable APIService (Service, endpoints and pods followed), webhooks,
CRDs whose group fails discovery, pods on lost nodes and forbidden lists, so every kind of read the
collector can make is made by one of them.

They are made over the emulator's plain HTTP listener: the requests are the same as over HTTPS (compared
for every scenario when this was changed, and for one, with the most reads of the seeds, by a test here),
and TLS on both ends cost half the module's CPU (12.5 against 6.7 CPU-seconds for the 61 scenarios).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.domain.access import Rule, parse_request
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.kube.permissions import READ_PERMISSIONS, READS, read_allowed, rules_used_by
from bot.services.diagnosing import diagnose_namespace
from bot.services.scanning import scan_cluster
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario_once

OPTIONS = CollectOptions(deadline=10, call_timeout=3)
# incomplete-timeout-group's reads of one API group hang for 10 s (TIMEOUT_LATENCY_MS): each waits out the
# call's timeout, four times over (discovery and list, by the diagnosis and by the scan). With 1 s instead
# of 3 s the very same requests are made (the journal records a request as it arrives; checked: the same
# 129 lines), and the scenario's diagnosis and scan take 5 s instead of 12 s
OPTIONS_FOR = {"incomplete-timeout-group": CollectOptions(deadline=10, call_timeout=1)}
# the module's fixture diagnoses and scans every scenario of the library (about a minute on a quiet
# machine, more beside the parallel run's other processes): the suite's 120 s guards against hangs
pytestmark = pytest.mark.timeout(600)


OVER_TLS_TOO = "seed000-metrics-missing-endpoints"


def _requests_of(name: str, tmp_path: Path, *, tls: bool = False) -> list[str]:
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0)
    emu.start()
    try:
        scenario = apply_scenario_once(emu, name)
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig", tls=tls)
        target = ClusterTarget(name="emulated", kubeconfig=kubeconfig)
        emu.journal.clear()
        options = OPTIONS_FOR.get(name, OPTIONS)
        diagnose_namespace(target, scenario.expected.namespace, options=options, clock=emu.clock.now)
        scan_cluster(target, stuck_after=timedelta(0), now=emu.clock.now(), options=options)
        return emu.journal.lines()
    finally:
        emu.stop()


@pytest.fixture(scope="module")
def requests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Per scenario, every request its diagnosis and scan made ("GET /path")."""
    return {name: _requests_of(name, tmp_path_factory.mktemp(name)) for name in sorted(SCENARIOS)}


def test_the_requests_over_https_are_the_same(
    requests: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What the module reads over plain HTTP is what it would have read over HTTPS (in another order, as the
    calls made at once answer)."""
    over_tls = _requests_of(OVER_TLS_TOO, tmp_path_factory.mktemp("tls"), tls=True)
    assert len(over_tls) > 100
    assert sorted(over_tls) == sorted(requests[OVER_TLS_TOO])


def test_every_read_of_diagnosis_is_allowed(requests: dict[str, list[str]]) -> None:
    refused = {
        f"{name}: {line}" for name, lines in requests.items() for line in lines if not read_allowed(*line.split(" ", 1))
    }
    assert not refused, sorted(refused)


def test_diagnosis_writes_nothing(requests: dict[str, list[str]]) -> None:
    writes = {line for lines in requests.values() for line in lines if not line.startswith("GET ")}
    assert not writes


def test_every_read_rule_is_needed(requests: dict[str, list[str]]) -> None:
    used: set[Rule] = set()
    for lines in requests.values():
        for line in lines:
            used.update(rules_used_by(parse_request(*line.split(" ", 1))))
    unused = [rule for rule in READ_PERMISSIONS if rule not in used]
    assert not unused, unused


def test_the_read_table_grants_no_write() -> None:
    verbs = {verb for rule in READ_PERMISSIONS for verb in rule.verbs}
    assert verbs <= {"get", "list"}, verbs
    assert tuple(dict.fromkeys(r for rules in READS.values() for r in rules)) == READ_PERMISSIONS


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api", "get /api"),
        ("GET", "/apis", "get /apis"),
        ("GET", "/apis/kiali.io/v1alpha1", "get /apis/kiali.io/v1alpha1"),
        ("GET", "/api/v1/namespaces", "list namespaces"),
        ("GET", "/api/v1/namespaces/web", "get namespaces in web"),
        ("PUT", "/api/v1/namespaces/web/finalize", "update namespaces/finalize in web"),
        ("GET", "/api/v1/namespaces/web/pods", "list pods in web"),
        ("DELETE", "/api/v1/namespaces/web/pods/p", "delete pods in web"),
        ("DELETE", "/api/v1/namespaces/web/pods", "deletecollection pods in web"),
        ("GET", "/apis/apps/v1/deployments", "list deployments.apps"),
        (
            "PATCH",
            "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis/kiali",
            "patch kialis.kiali.io in istio-system",
        ),
        ("GET", "/api/v1/namespaces/web/pods?watch=true", "watch pods in web"),
        ("GET", "/api/v1/nodes/node-1/status", "get nodes/status"),
    ],
)
def test_requests_read_as_the_authorizer_does(method: str, path: str, expected: str) -> None:
    assert str(parse_request(method, path)) == expected
