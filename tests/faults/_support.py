"""What the fault tests share: a cluster with one stuck namespace, the faults, and the checks.

The cluster is the scenario library's `seed003-kiali-orphaned-finalizer`: istio-system is stuck on a
Kiali object whose operator was uninstalled. With every piece of evidence, its diagnosis names that
object and offers, as the last resort, to force-finalize the namespace; any fault must take that
offer away, and faults on evidence the cause does not rest on must leave the cause found.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.domain.findings import Action, Diagnosis
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.scanning import SCAN_OPTIONS
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import apply_scenario_once

SCENARIO = "seed003-kiali-orphaned-finalizer"
NAMESPACE = "istio-system"
KIALIS = "kialis.kiali.io"

DEADLINE = 3.0  # seconds for a whole collection, where a fault must make the run end at its deadline
# the deadline of a run that is to finish: far beyond what a collection takes (0.1 s on a quiet machine,
# more than 4 s seen on one whose host took 60% of its time), so that nothing but a fault ends it early
ROOMY = 20.0
# how late a run may end after its deadline: the calls still running are abandoned at the deadline
# (their own timeouts end with it), then the rules run; generous, this checks behaviour, not speed
MARGIN = 1.5
SLOW_MS = 10_000  # a latency far beyond the deadline

APISERVICES = r"^GET /apis/apiregistration\.k8s\.io/v1/apiservices$"
DEPLOYMENTS = r"^GET /apis/apps/v1/deployments$"
KIALI_LIST = rf"^GET /apis/kiali\.io/v1alpha1/namespaces/{NAMESPACE}/kialis$"
KIALI_GROUP = r"^GET /apis/kiali\.io/"

# what a real API server answers (k8s-namespace-deletion.md §3.7; the 429 is its max-in-flight and
# priority-and-fairness rejection, the 504 its request timeout filter)
INTERNAL_ERROR = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Internal error occurred: etcdserver: leader changed",
    "reason": "InternalError",
    "details": {"causes": [{"message": "etcdserver: leader changed"}]},
    "code": 500,
}
TOO_MANY_REQUESTS = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Too many requests, please try again later.",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}
SERVER_TIMEOUT = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Timeout: request did not complete within requested timeout - context deadline exceeded",
    "reason": "Timeout",
    "details": {},
    "code": 504,
}


def too_many_requests(retry_after: int) -> dict[str, object]:
    return {**TOO_MANY_REQUESTS, "details": {"retryAfterSeconds": retry_after}}


@dataclass
class Cluster:
    emu: Emulator
    kubeconfig: Path
    target: ClusterTarget

    def diagnose(self, **options: Any) -> tuple[DiagnosisResult, float]:
        """Diagnose the stuck namespace over HTTP (by default with a ROOMY deadline); the result and the
        seconds it took."""
        opts = CollectOptions(**{"deadline": ROOMY, "call_timeout": ROOMY, **options})
        started = time.monotonic()
        result = diagnose_namespace(self.target, NAMESPACE, options=opts, clock=self.emu.clock.now)
        return result, time.monotonic() - started

    def requests(self, pattern: str) -> int:
        """How many requests of the diagnosing identity a regex (on "METHOD /path") matches."""
        return sum(1 for line in self.emu.journal.lines() if re.search(pattern, line))


def build_cluster(tmp_path: Path) -> Iterator[Cluster]:
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0)
    emu.start()
    try:
        apply_scenario_once(emu, SCENARIO)
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        emu.journal.clear()
        yield Cluster(emu, kubeconfig, ClusterTarget(name="emulated", kubeconfig=kubeconfig))
    finally:
        emu.stop()


@dataclass(frozen=True)
class Fault:
    """A way the cluster misbehaves, and the gap it must leave in a report."""

    name: str
    inject: Callable[[Emulator], object]
    what: str  # the gap's `what` (exactly)
    reason: str  # timeout | error | forbidden | unavailable
    detail: str = ""  # a part of the gap's detail
    options: dict[str, Any] = field(default_factory=dict)  # CollectOptions for this fault
    # whether a digest's scan, which lists in the namespace only the types its conditions name,
    # asks for what the fault breaks
    in_scan: bool = True

    def __str__(self) -> str:
        return self.name

    @property
    def deadline(self) -> float:
        """The deadline of a run under this fault."""
        return float(self.options.get("deadline", ROOMY))


# what a fault that makes calls hang needs: a deadline that bites
BITING = {"deadline": DEADLINE, "call_timeout": DEADLINE}


def offered(diagnosis: Diagnosis) -> set[Action]:
    return {r.action for f in diagnosis.findings for r in f.remedies}


def assert_partial(diagnosis: Diagnosis, fault: Fault) -> None:
    """Incomplete, the fault's gap named with its reason, and no force-finalize on that evidence."""
    gaps = [str(g) for g in diagnosis.gaps]
    assert diagnosis.complete is False, gaps
    matching = [g for g in diagnosis.gaps if g.what == fault.what]
    assert matching, (fault.what, gaps)
    assert matching[0].reason == fault.reason, gaps
    assert fault.detail in matching[0].detail, gaps
    assert Action.FORCE_FINALIZE_NAMESPACE not in offered(diagnosis)
    assert diagnosis.to_json()["complete"] is False


def _forbid_secrets(emu: Emulator) -> object:
    return emu.knobs.forbid("secrets", verbs=("list",), namespace=NAMESPACE)


def _forbid_kialis(emu: Emulator) -> object:
    return emu.knobs.forbid("kialis", group="kiali.io", verbs=("list",), namespace=NAMESPACE)


# Faults on evidence the cause does not rest on: the report is partial and still names the Kiali object.
FAULTS = [
    Fault(
        "client-timeout",  # the API server never answers the list of APIServices in time
        lambda emu: emu.knobs.latency(SLOW_MS, match=APISERVICES),
        what="list apiservices (cluster-wide)",
        reason="timeout",
        detail=f"not finished within {DEADLINE:g}s",
        options=BITING,
    ),
    Fault(
        "server-timeout-504",
        lambda emu: emu.knobs.inject_fault(rf"^GET /api/v1/namespaces/{NAMESPACE}/secrets$", 504, SERVER_TIMEOUT),
        what=f"list secrets in {NAMESPACE}",
        reason="timeout",
        detail="request did not complete within requested timeout",
        in_scan=False,
    ),
    Fault(
        "internal-error-500",
        lambda emu: emu.knobs.inject_fault(
            r"^GET /apis/apiextensions\.k8s\.io/v1/customresourcedefinitions$", 500, INTERNAL_ERROR
        ),
        what="list customresourcedefinitions",
        reason="error",
        detail="etcdserver: leader changed",
    ),
    Fault(
        "throttled-429-long-retry-after",
        lambda emu: emu.knobs.inject_fault(DEPLOYMENTS, 429, too_many_requests(30), {"Retry-After": "30"}),
        what="list deployments (cluster-wide workloads)",
        reason="unavailable",
        detail="Too many requests",
    ),
    Fault(
        "reset-on-second-page",
        lambda emu: emu.knobs.inject_fault(APISERVICES, 200, reset_connection=True, query=r"(^|&)continue="),
        what="list apiservices (cluster-wide)",
        reason="error",
        detail="connection dropped",
        options={"page_size": 5},
    ),
    Fault(
        "forbidden-secrets",
        _forbid_secrets,
        what=f"list secrets in {NAMESPACE}",
        reason="forbidden",
        detail='cannot list resource "secrets" in API group "" in the namespace "istio-system"',
        in_scan=False,
    ),
]

# The same kinds of fault on the list the cause rests on: no object can be named, nothing offered
# that changes the cluster.
KIALI_GAP = f"list {KIALIS} in {NAMESPACE}"
CULPRIT_FAULTS = [
    Fault(
        "kialis-timeout", lambda emu: emu.knobs.latency(SLOW_MS, match=KIALI_LIST), KIALI_GAP, "timeout", options=BITING
    ),
    Fault("kialis-500", lambda emu: emu.knobs.inject_fault(KIALI_LIST, 500, INTERNAL_ERROR), KIALI_GAP, "error"),
    Fault(
        "kialis-429",
        lambda emu: emu.knobs.inject_fault(KIALI_LIST, 429, too_many_requests(60), {"Retry-After": "60"}),
        KIALI_GAP,
        "unavailable",
    ),
    Fault(
        "kialis-reset",
        lambda emu: emu.knobs.inject_fault(KIALI_LIST, 200, reset_connection=True),
        KIALI_GAP,
        "error",
        "connection dropped",
    ),
    Fault("kialis-forbidden", _forbid_kialis, KIALI_GAP, "forbidden", "kialis.kiali.io is forbidden"),
    # the answer's headers come at once and then a byte every half second, so no read ever waits as long
    # as the call's timeout: the run must still end at its deadline, not wait for the call to finish
    Fault(
        "kialis-trickled",
        lambda emu: emu.knobs.trickle(KIALI_LIST, interval=0.5),
        KIALI_GAP,
        "timeout",
        f"not finished within {DEADLINE:g}s",
        options=BITING,
    ),
]


def scan_options(**options: Any) -> CollectOptions:
    """What a digest's scan collects with (only the types the namespace's conditions name), by default
    with a ROOMY deadline."""
    return replace(SCAN_OPTIONS, **{"deadline": ROOMY, "call_timeout": ROOMY, **options})
