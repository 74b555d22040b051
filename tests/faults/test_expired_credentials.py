"""A kubeconfig whose token has expired: a short error that says so, no report, no token shown."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from bot.errors import ClusterUnreachableError
from bot.services.scanning import scan_cluster
from tests._cli import run_nsstuck
from tests.faults._support import DEADLINE, Cluster, scan_options


def _expire(cluster: Cluster) -> str:
    token = cluster.emu.user_token
    assert token in cluster.kubeconfig.read_text()  # the kubeconfig does carry it
    cluster.emu.knobs.expired_tokens.add(token)
    return token


def test_diagnose_says_the_cluster_refuses_our_credentials(cluster: Cluster) -> None:
    token = _expire(cluster)

    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as refused:
        cluster.diagnose()

    assert time.monotonic() - started < DEADLINE
    message = str(refused.value)
    assert message.startswith("cluster 'emulated' (https://127.0.0.1:")
    assert "refuses our credentials: Unauthorized" in message
    assert token not in message


def test_the_command_exits_3_with_one_line_and_no_report(cluster: Cluster) -> None:
    token = _expire(cluster)

    result = run_nsstuck("diagnose", "istio-system", "--kubeconfig", str(cluster.kubeconfig), "--json")

    assert result.returncode == 3  # contract §1: cluster unreachable or unauthorized
    assert result.stdout == ""  # no report pretending to be a diagnosis
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nsstuck: cluster 'emulator' (https://")
    assert "refuses our credentials" in lines[0]
    assert token not in result.stderr + result.stdout


def test_a_scan_reports_the_cluster_as_refusing_us(cluster: Cluster) -> None:
    token = _expire(cluster)

    scan = scan_cluster(
        cluster.target, stuck_after=timedelta(minutes=1), now=cluster.emu.clock.now(), options=scan_options()
    )

    assert scan.reachable is False
    assert scan.error is not None
    assert "refuses our credentials" in scan.error
    assert token not in scan.error
    assert scan.stuck == ()
