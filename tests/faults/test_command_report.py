"""`nsstuck diagnose NS --kubeconfig K --json` under faults, as a user runs it: the JSON report says
`complete: false`, lists the gaps, offers no force-finalize, and the process ends within its timeout."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests._cli import run_nsstuck
from tests.faults._support import (
    APISERVICES,
    INTERNAL_ERROR,
    KIALI_LIST,
    NAMESPACE,
    SLOW_MS,
    Cluster,
)

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

TIMEOUT = 3
# the deadline is the collection's; a Python process starting and importing the client comes on top
PROCESS_MARGIN = 6.0


def _report(cluster: Cluster) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = run_nsstuck(
        "diagnose", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig), "--json", "--timeout", str(TIMEOUT)
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr  # contract §1: a report was produced, whatever it says
    return json.loads(result.stdout), elapsed


def _actions(report: dict[str, Any]) -> set[str]:
    return {r["action"] for f in report["findings"] for r in f["remedies"]}


def test_the_json_report_lists_the_gaps_and_keeps_the_cause(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(APISERVICES, 500, INTERNAL_ERROR)
    cluster.emu.knobs.forbid("secrets", namespace=NAMESPACE)

    report, elapsed = _report(cluster)

    assert report["schema"] == "nsstuck.diagnosis/v1"
    assert report["state"] == "terminating"
    assert report["complete"] is False
    gaps = {g["what"]: g for g in report["gaps"]}
    assert set(gaps) == {"list apiservices (cluster-wide)", f"list secrets in {NAMESPACE}"}
    assert gaps["list apiservices (cluster-wide)"]["reason"] == "error"
    assert "etcdserver: leader changed" in gaps["list apiservices (cluster-wide)"]["detail"]
    assert gaps[f"list secrets in {NAMESPACE}"]["reason"] == "forbidden"
    assert report["findings"][0]["cause"] == "orphaned_finalizer"
    assert "force_finalize_namespace" not in _actions(report)
    assert elapsed < TIMEOUT + PROCESS_MARGIN


def test_a_list_that_never_answers_ends_the_report_on_time(cluster: Cluster) -> None:
    cluster.emu.knobs.latency(SLOW_MS, match=KIALI_LIST)

    report, elapsed = _report(cluster)

    assert report["complete"] is False
    assert report["gaps"] == [
        {
            "what": f"list kialis.kiali.io in {NAMESPACE}",
            "reason": "timeout",
            "detail": f"not finished within {TIMEOUT}s",
        }
    ]
    assert "force_finalize_namespace" not in _actions(report)
    assert TIMEOUT <= elapsed < TIMEOUT + PROCESS_MARGIN


def test_a_list_that_trickles_ends_the_process_on_time(cluster: Cluster) -> None:
    """A server that sends its answer a byte at a time never lets a read time out: the call is left
    running on its thread at the deadline, and that thread does not hold the process's exit (the threads
    of a ThreadPoolExecutor would, until the call ends: bot/kube/collecting.py's `_Calls`)."""
    cluster.emu.knobs.trickle(KIALI_LIST, interval=0.5)

    report, elapsed = _report(cluster)

    assert report["complete"] is False
    assert [g["what"] for g in report["gaps"]] == [f"list kialis.kiali.io in {NAMESPACE}"]
    assert TIMEOUT <= elapsed < TIMEOUT + PROCESS_MARGIN
