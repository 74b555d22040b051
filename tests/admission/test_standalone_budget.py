"""`nsstuck admission serve` on a cluster too slow for its budget: the answer still comes within the budget
plus 0.5 s, with "nsstuck could not finish checking within N s", and kubectl prints it (issue 38 §2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.admission._endpoint import KUBECTL, Endpoint, configure, endpoint, kubectl, post, review
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

BUDGET = 1.0
SLOW = "nsstuck could not finish checking within 1 s"


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path, Endpoint]]:
    """Every read of the namespace team-slow's content takes 5 s (the emulator's latency knob); kubectl's
    own requests (discovery, the DELETE) do not."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        KubeHTTP(emu.url, emu.admin_token).post("/api/v1/namespaces", {"metadata": {"name": "team-slow"}})
        emu.knobs.latency(5000, match=r"^GET /apis?/.*namespaces/team-slow")
        directory = tmp_path_factory.mktemp("slow")
        kubeconfig = emu.write_kubeconfig(directory / "kubeconfig")
        with endpoint(kubeconfig, directory, "--budget", f"{BUDGET:g}") as served:
            configure(emu, "nsstuck", served.url(), served.ca_bundle, timeout=int(BUDGET) + 2)
            yield emu, kubeconfig, served


@pytest.mark.timing
def test_a_slow_cluster_is_answered_within_the_budget(slow: tuple[Emulator, Path, Endpoint]) -> None:
    _, _, served = slow
    for _ in range(2):  # the second one too: the first check, still running, holds nothing up
        status, data, seconds = post(served, review("team-slow"))
        assert status == 200
        assert json.loads(data)["response"] == {"uid": "uid-team-slow-DELETE", "allowed": True, "warnings": [SLOW]}
        assert seconds < BUDGET + 0.5


@pytest.mark.timing
def test_kubectl_prints_that_the_check_could_not_finish(slow: tuple[Emulator, Path, Endpoint]) -> None:
    emu, kubeconfig, _ = slow
    result = kubectl(kubeconfig, "delete", "ns", "team-slow", "--wait=false")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("Warning: ")] == [f"Warning: {SLOW}"]
    found = KubeHTTP(emu.url, emu.admin_token).get_or_none("/api/v1/namespaces/team-slow")
    assert found is None or found["metadata"].get("deletionTimestamp")
