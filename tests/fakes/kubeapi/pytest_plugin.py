"""pytest fixtures for the emulated Kubernetes API.

- ``kube_emulator``: a started Emulator on a FakeClock (2026-11-20T08:00:00Z) with the default
  controllers registered and the background loop OFF (call ``emu.settle()``).
- ``kubeconfig_path``: a kubeconfig for the user identity.
- ``kube_api_client``: a ``kubernetes.client.ApiClient`` for the user identity.

And for the whole run: the scenarios' saved states (``apply_scenario_once``) are shared between the
run's processes through files in the run's temporary directory (``state_files.py``): under
pytest-xdist the folder every worker's own temporary directory sits in, otherwise the process's own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import state_files
from .clock import FakeClock
from .emulator import Emulator


@pytest.fixture(scope="session", autouse=True)
def _scenario_states_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run's folder of saved scenario states: xdist gives each worker ``<run's basetemp>/<worker>``."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    state_files.share_states_in(run / "scenario-states")
    try:
        yield
    finally:
        state_files.share_states_in(None)


@pytest.fixture
def kube_emulator() -> Iterator[Emulator]:
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=True)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def kubeconfig_path(kube_emulator: Emulator, tmp_path: Path) -> Path:
    return kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")


def make_api_client(emu: Emulator, token: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` talking to ``emu`` with ``token`` (default: the user identity)."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = emu.url
    cfg.api_key = {"authorization": token or emu.user_token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


@pytest.fixture
def kube_api_client(kube_emulator: Emulator) -> Iterator[Any]:
    api = make_api_client(kube_emulator)
    try:
        yield api
    finally:
        api.close()
