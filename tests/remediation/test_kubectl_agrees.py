"""The kubectl command shown with each Operation makes the same change as the Operation itself.

Two emulators build the same scenario (the emulator is deterministic: same UIDs, resourceVersions and
clock). On one the Patcher runs the Operation, on the other the real `kubectl` runs the Operation's
command string through bash; afterwards both clusters must hold exactly the same objects.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.domain.changes import Verdict
from bot.kube.patching import PATCH_NOT_APPLICABLE, Patcher
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario_once, snapshot
from tests.remediation.test_patching import CASES, changed_keys, key_of, prepared, touch

pytestmark = pytest.mark.kubectl


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[Emulator]:
    """A second emulator started like `kube_emulator` (same seed, same clock)."""
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=True)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def run_kubectl(command: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def build_twin(twin: Emulator, scenario: str, tmp_path: Path) -> Path:
    apply_scenario_once(twin, scenario)
    return twin.write_kubeconfig(tmp_path / "twin" / "kubeconfig")


@pytest.mark.parametrize("name", CASES)
def test_the_kubectl_command_makes_the_same_change(
    name: str, kube_emulator: Emulator, twin: Emulator, patcher: Patcher, tmp_path: Path
) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    twin_kubeconfig = build_twin(twin, case.scenario, tmp_path)
    before = snapshot(kube_emulator)
    assert snapshot(twin) == before  # the same cluster twice
    for op in planned.ops:
        assert patcher.run(op, dry_run=False).verdict is Verdict.OK
        out = run_kubectl(op.kubectl, twin_kubeconfig)
        assert out.returncode == 0, f"{op.kubectl}\n{out.stderr}"
    after = snapshot(kube_emulator)
    assert changed_keys(before, after) == {key_of(op.target) for op in planned.ops}
    assert snapshot(twin) == after


@pytest.mark.parametrize("name", ["cr-finalizer", "configmap-finalizer", "namespace-metadata-finalizer"])
def test_a_stale_json_patch_fails_both_ways(
    name: str, kube_emulator: Emulator, twin: Emulator, patcher: Patcher, tmp_path: Path
) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    twin_kubeconfig = build_twin(twin, case.scenario, tmp_path)
    stale = [op for op in planned.ops if op.method == "PATCH"]
    assert stale, "this case plans no JSON patch"  # (the /finalize command re-reads the namespace)
    for emu in (kube_emulator, twin):
        for op in stale:
            touch(KubeHTTP(emu.url, emu.admin_token), op.target)
    before = snapshot(kube_emulator)
    assert snapshot(twin) == before
    for op in stale:
        result = patcher.run(op, dry_run=False)
        assert result.verdict is Verdict.CONFLICT
        out = run_kubectl(op.kubectl, twin_kubeconfig)
        assert out.returncode != 0
        assert PATCH_NOT_APPLICABLE in out.stderr
    assert snapshot(kube_emulator) == before
    assert snapshot(twin) == before
