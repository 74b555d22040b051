"""Helpers shared by the controllers-half tests (test_ctrl_*, test_scenarios, test_kubectl_*).

``applied_scenarios`` (module scope) applies each scenario at most once per test module, on its own
emulator, and keeps it for read-only use by the module's tests (import the fixture into the test
module): take a ``snapshot`` right after applying, never mutate. ``restored_scenarios`` is the same with
each scenario's state restored (``apply_scenario_once``: built once per run) instead of built, for tests
that are not about the build. Tests that change the cluster build their own emulator with
``fresh_scenario``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import JSON, KubeHTTP
from tests.fakes.kubeapi.scenarios import SCENARIOS, Scenario, apply_scenario, apply_scenario_once, snapshot

KUBECTL = "/usr/bin/kubectl"
START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def new_emulator(scenario: Scenario | None = None, *, seed: int = 0, **options: Any) -> Emulator:
    """A started emulator on a FakeClock at START, with the options a scenario asks for."""
    opts = dict(scenario.options) if scenario is not None else {}
    opts.update(options)
    style = opts.pop("discovery_error_style", "legacy")
    emu = Emulator(clock=FakeClock(START), seed=seed, discovery_error_style=style, **opts)
    return emu.start()


def fresh_scenario(name: str, *, once: bool = False) -> tuple[Emulator, Scenario]:
    """A new emulator with scenario ``name`` on it: built (``apply_scenario``), or with ``once`` the state
    of the run's one build restored (``apply_scenario_once``), for tests that are not about the build."""
    scenario = SCENARIOS[name]
    emu = new_emulator(scenario)
    (apply_scenario_once if once else apply_scenario)(emu, name)
    return emu, scenario


@dataclass
class Applied:
    emu: Emulator
    scenario: Scenario
    snapshot: dict[str, Any]

    @property
    def admin(self) -> KubeHTTP:
        return KubeHTTP(self.emu.url, self.emu.admin_token)

    def namespace(self) -> JSON | None:
        return self.admin.get_or_none(f"/api/v1/namespaces/{self.scenario.expected.namespace}")


@dataclass
class AppliedScenarios:
    """Scenarios applied lazily, once per module: built, or with ``once`` the run's one build restored."""

    _applied: dict[str, Applied] = field(default_factory=dict)
    once: bool = False

    def get(self, name: str) -> Applied:
        if name not in self._applied:
            emu, scenario = fresh_scenario(name, once=self.once)
            self._applied[name] = Applied(emu, scenario, snapshot(emu))
        return self._applied[name]

    def close(self) -> None:
        for applied in self._applied.values():
            applied.emu.stop()
        self._applied.clear()


# Each module's scenarios are stopped when the module ends: a started emulator is not idle (its server
# polls every 10 ms: 61 idle emulators took 0.18 CPU-s a second), and a process kept the 61 of each
# session cache running for the rest of the run, charged to whatever tests it ran next.


@pytest.fixture(scope="module")
def applied_scenarios() -> Iterator[AppliedScenarios]:
    """Each scenario built (``apply_scenario``) for the module that asks: for the tests of the build
    and of its restored state."""
    applied = AppliedScenarios()
    try:
        yield applied
    finally:
        applied.close()


@pytest.fixture(scope="module")
def restored_scenarios() -> Iterator[AppliedScenarios]:
    """Each scenario's state restored (``apply_scenario_once``) for the module that asks: for the tests
    that only read a scenario (``tests/emulator/test_scenario_states.py`` holds a restored state to the
    built one)."""
    restored = AppliedScenarios(once=True)
    try:
        yield restored
    finally:
        restored.close()


_kubectl_homes: weakref.WeakKeyDictionary[Emulator, Path] = weakref.WeakKeyDictionary()


def _kubectl_home(emu: Emulator) -> Path:
    """One HOME (kubeconfigs, discovery cache) per emulator, so repeated kubectl calls reuse discovery."""
    home = _kubectl_homes.get(emu)
    if home is None:
        home = Path(tempfile.mkdtemp(prefix="kubectl-home-"))
        _kubectl_homes[emu] = home
        weakref.finalize(emu, shutil.rmtree, home, True)
    return home


def kubectl(
    emu: Emulator,
    tmp: Path,
    *args: str,
    stdin: str | None = None,
    check: bool = False,
    admin: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``emu`` with a generated kubeconfig.

    The identity is the user (``emu.user_token``), or the admin with ``admin=True`` (never delayed
    or forbidden by the knobs). ``tmp`` is the test's directory, used for files the test writes.
    """
    home = _kubectl_home(emu)
    kubeconfig = home / ("kubeconfig-admin" if admin else "kubeconfig-user")
    if not kubeconfig.exists():
        emu.write_kubeconfig(kubeconfig, token=emu.admin_token if admin else None)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "KUBECONFIG": str(kubeconfig),
        "KUBECACHEDIR": str(home / ("cache-admin" if admin else "cache-user")),
    }
    result = subprocess.run(
        [KUBECTL, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=60,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def kubectl_available() -> bool:
    return os.access(KUBECTL, os.X_OK)


def condition_tuples(ns: JSON) -> tuple[tuple[str, str, str, str], ...] | None:
    conds = (ns.get("status") or {}).get("conditions")
    if not conds:
        return None
    return tuple((c["type"], c["status"], c["reason"], c["message"]) for c in conds)
