"""The "could not finish checking" warning names the gap (issue 38 §2): when the evidence is incomplete, which
part could not be read (an aggregated API whose discovery fails, a list the identity may not read); when the
budget ran out, "nsstuck could not finish checking within N s", answered within the budget plus 0.5 s.
Through `nsstuck admission serve` (a process) called by the emulator, and the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.domain.findings import Gap
from bot.services.admission import MAX_WARNING, unfinished_warning
from tests.admission._endpoint import KUBECTL, Endpoint, configure, endpoint, kubectl, post, review
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import Api, apply_scenario

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path]]:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        http = KubeHTTP(emu.url, emu.admin_token)
        for name in ("team-api", "team-forbidden", "team-slowish"):
            http.post("/api/v1/namespaces", {"metadata": {"name": name}})
        # one list the command's identity may not read, in one namespace
        emu.knobs.forbid("configmaps", namespace="team-forbidden")
        # one list slower than any budget here, in one namespace; the rest of it answers at once
        emu.knobs.latency(5000, match=r"^GET /api/v1/namespaces/team-slowish/configmaps")
        emu.settle()
        yield emu, emu.write_kubeconfig(tmp_path_factory.mktemp("gaps") / "kubeconfig")


@pytest.fixture(scope="module")
def served(cluster: tuple[Emulator, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    emu, kubeconfig = cluster
    with endpoint(kubeconfig, tmp_path_factory.mktemp("gaps-endpoint"), "--budget", "8") as running:
        configure(emu, "nsstuck", running.url(), running.ca_bundle)
        yield running


def warnings_of(kubeconfig: Path, name: str) -> list[str]:
    result = kubectl(kubeconfig, "delete", "ns", name, "--wait=false", "--dry-run=server")
    assert result.returncode == 0, result.stderr
    return [line.removeprefix("Warning: ") for line in result.stderr.splitlines() if line.startswith("Warning: ")]


def test_an_apiservice_down_is_named_as_the_part_not_read(cluster: tuple[Emulator, Path], served: Endpoint) -> None:
    emu, kubeconfig = cluster
    # an aggregated API whose Service was removed with its deployment: its discovery fails in every namespace
    Api(emu).apiservice("metrics.example.io", "v1beta1", svc_ns="kube-system", svc_name="gone-adapter")
    emu.settle()
    try:
        said = warnings_of(kubeconfig, "team-api")
    finally:
        KubeHTTP(emu.url, emu.admin_token).delete(
            "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.example.io"
        )
        emu.settle()
    assert said == [
        "nsstuck: apiservice_unavailable: apiservice/v1beta1.metrics.example.io would hold it; "
        "see `nsstuck precheck team-api`",
        "nsstuck could not finish checking: discovery of metrics.example.io/v1beta1 failed (unavailable)",
    ]


def test_a_forbidden_list_is_named_as_the_part_not_read(served: Endpoint) -> None:
    status, data, _ = post(served, review("team-forbidden"))
    assert status == 200
    response = json.loads(data)["response"]
    assert response["allowed"] is True
    [said] = response["warnings"]
    assert said.startswith("nsstuck could not finish checking: list configmaps")
    assert said.endswith("in team-forbidden failed (forbidden)")
    assert "within" not in said


def test_nothing_missing_says_nothing(cluster: tuple[Emulator, Path], served: Endpoint) -> None:
    # the same cluster, a namespace with no gap: no warning at all (the gaps above are the namespaces' own)
    KubeHTTP(cluster[0].url, cluster[0].admin_token).post("/api/v1/namespaces", {"metadata": {"name": "team-ok"}})
    assert warnings_of(cluster[1], "team-ok") == []


@pytest.fixture(scope="module")
def hurried(cluster: tuple[Emulator, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    emu, kubeconfig = cluster
    with endpoint(kubeconfig, tmp_path_factory.mktemp("gaps-hurried"), "--budget", "1") as running:
        configure(emu, "nsstuck", running.url(), running.ca_bundle, timeout=3)
        yield running


@pytest.mark.timing
def test_a_read_slower_than_the_budget_says_the_budget_in_time(
    cluster: tuple[Emulator, Path], hurried: Endpoint
) -> None:
    status, data, seconds = post(hurried, review("team-slowish"))
    assert status == 200
    assert json.loads(data)["response"]["warnings"] == ["nsstuck could not finish checking within 1 s"]
    assert seconds < 1.5
    assert warnings_of(cluster[1], "team-slowish") == ["nsstuck could not finish checking within 1 s"]


def test_the_gap_warning_stays_under_120_characters() -> None:
    long = Gap(what=f"list {'x' * 200}.example.io/v1 in {'n' * 63}", reason="forbidden", detail="no")
    text = unfinished_warning(3, (long, long))
    assert len(text) <= MAX_WARNING
    assert text.startswith("nsstuck could not finish checking: list xxx")
    assert text.endswith("... (+1 more)")
    # the server's own words (the gap's detail) are never repeated in the warning
    secretish = Gap(what="resources of a.example.io/v1", reason="error", detail="discovery failed: token=abc")
    assert unfinished_warning(3, (secretish,)) == (
        "nsstuck could not finish checking: discovery of a.example.io/v1 failed (error)"
    )
    ours = Gap(what="list pods in x", reason="timeout", detail="not finished within 2.4s")
    assert unfinished_warning(3, (ours, secretish)) == unfinished_warning(3, (secretish,))
    assert unfinished_warning(3, (ours,)) == "nsstuck could not finish checking within 3 s"
