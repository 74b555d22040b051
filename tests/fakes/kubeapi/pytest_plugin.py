"""pytest fixtures for the emulated Kubernetes API.

- ``kube_emulator``: a started Emulator on a FakeClock (2026-11-20T08:00:00Z) with the default
  controllers registered and the background loop OFF (call ``emu.settle()``).
- ``kubeconfig_path``: a kubeconfig for the user identity.
- ``kube_api_client``: a ``kubernetes.client.ApiClient`` for the user identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .clock import FakeClock
from .emulator import Emulator


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
