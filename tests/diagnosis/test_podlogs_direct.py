"""bot/kube/podlogs.py: the selector a workload's pods are listed by, and the reads that end before any
log (no target, no selector, no scheduled pod), against the Kubernetes emulator where a call is made.

(tests/diagnosis/test_controller_log_reading.py has the log read itself, both client paths.)
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.domain.controller_logs import LogTarget, Subject
from bot.domain.refs import ClusterName
from bot.kube.connecting import ClusterTarget, Connection, connect
from bot.kube.podlogs import _reason, _restarts, read_controller_logs, selector_text
from bot.kube.transport import CallError, CallKind, Transport
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP

NOW = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
SUBJECT = Subject(key="things.example.com/thing", namespace="ops", name="thing")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchLabels": {"app": "op"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["x", "y"]},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "managed", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "odd", "operator": "Gt", "values": ["1"]},  # not a LabelSelector operator: left out
                ],
            },
            "app=op,tier in (x,y),env notin (dev),managed,!canary",
        ),
        ({}, None),  # selects nothing we can say
        ({"matchExpressions": [{"key": "odd", "operator": "Gt"}]}, None),
        (None, None),
        ("app=op", None),
    ],
)
def test_a_label_selector_is_written_as_the_label_selector_query(selector: Any, expected: str | None) -> None:
    assert selector_text(selector) == expected


def test_restarts_are_said_per_container_with_how_the_last_ended() -> None:
    pod = {
        "metadata": {"name": "op-0"},
        "status": {
            "containerStatuses": [
                {"name": "manager", "restartCount": 12, "lastState": {"terminated": {"reason": "OOMKilled"}}},
                {"name": "proxy", "restartCount": 1},
                {"name": "sidecar", "restartCount": 0},
            ]
        },
    }
    assert _restarts(pod) == [
        "pod op-0 container manager: 12 restarts, last ended OOMKilled",
        "pod op-0 container proxy: 1 restarts",
    ]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (CallError(CallKind.STATUS, "forbidden", status=403), "forbidden"),
        (CallError(CallKind.TIMEOUT, "timed out"), "timeout"),
        (CallError(CallKind.CONNECTION, "connection refused"), "unavailable"),
        (CallError(CallKind.STATUS, "internal error", status=500), "error"),
    ],
)
def test_a_failed_read_is_given_the_reason_of_a_gap(error: CallError, reason: str) -> None:
    assert _reason(error) == reason


@pytest.fixture
def connection(kube_emulator: Emulator, tmp_path: Path) -> Iterator[Connection]:
    target = ClusterTarget(name=ClusterName("emu"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))
    held = connect(target, pool_size=2)
    try:
        yield held
    finally:
        held.close()


def _target(selector: Any) -> LogTarget:
    return LogTarget(
        kind="Deployment",
        namespace="ops",
        name="operator",
        selector=selector,
        since=NOW - timedelta(hours=1),
        subjects=(SUBJECT,),
    )


def _read(connection: Connection, *targets: LogTarget, enabled: bool = True) -> Any:
    return read_controller_logs(
        Transport(connection, call_timeout=5.0),
        list(targets),
        deadline=time.monotonic() + 10,
        call_timeout=5.0,
        enabled=enabled,
    )


def test_no_target_reads_nothing_and_a_workload_without_a_selector_is_said_so(
    kube_emulator: Emulator, connection: Connection
) -> None:
    nothing = _read(connection)
    assert (nothing.logs, nothing.gaps) == ((), ())
    reading = _read(connection, _target({}))
    assert reading.gaps == ()
    [said] = reading.logs
    assert said.problem == "no pod selector on the workload"
    assert said.subjects == ("things.example.com/thing",)
    # neither asked the API server anything
    assert kube_emulator.journal.entries(path=re.compile("/pods"), admin=True) == []


def test_a_workload_whose_pods_are_not_scheduled_has_no_log_to_read(
    kube_emulator: Emulator, connection: Connection
) -> None:
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}})
    pending = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator-0", "labels": {"app": "operator"}},
        "spec": {"containers": [{"name": "manager", "image": "example/operator:1"}]},
    }
    http.post("/api/v1/namespaces/ops/pods", pending)
    reading = _read(connection, _target({"matchLabels": {"app": "operator"}}))
    assert reading.gaps == ()
    assert [e.path for e in kube_emulator.journal.entries("GET", re.compile("/pods"), admin=True)] == [
        "/api/v1/namespaces/ops/pods"
    ]
    [said] = reading.logs
    assert said.problem == "no pod of deployment/operator is scheduled to a node"
    assert said.pods == ()


def test_a_refused_list_of_the_pods_is_the_reads_problem_and_a_forbidden_gap(
    kube_emulator: Emulator, connection: Connection
) -> None:
    kube_emulator.enable_rbac()  # the kubeconfig's identity is granted nothing on pods
    reading = _read(connection, _target({"matchLabels": {"app": "operator"}}))
    [said] = reading.logs
    assert said.problem.startswith("forbidden: list pods app=operator: "), said.problem
    assert said.pods == ()
    [gap] = reading.gaps
    assert (gap.what, gap.reason) == ("read logs of deployment/operator in ops", "forbidden")
    assert gap.detail.startswith("list pods app=operator: ")
