"""Fixtures shared by the remediation tests: a Patcher on the emulator, as the executor builds one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.kube.connecting import ClusterTarget, connect
from bot.kube.patching import Patcher
from bot.kube.transport import Transport


def make_patcher(kubeconfig: Path, *, timeout: float | None = None) -> tuple[Patcher, Any]:
    connection = connect(ClusterTarget(name="emulator", kubeconfig=kubeconfig))
    return Patcher(Transport(connection, call_timeout=10), timeout=timeout), connection


@pytest.fixture
def patcher(kubeconfig_path: Path) -> Iterator[Patcher]:
    made, connection = make_patcher(kubeconfig_path)
    try:
        yield made
    finally:
        connection.close()
