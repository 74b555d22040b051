"""`nsstuck admission serve` (issue 38 §7) as a process, called by the emulator on each namespace DELETE,
seen through the real kubectl: the warnings of a delete that would get stuck (an orphaned finalizer of a
custom resource, a dead APIService), none for a clean one, the same on `--dry-run=server` (and nothing
deleted), `--mode deny` refusing a certain case and letting the annotated namespace through, and deletes
going ahead unwarned once the endpoint is stopped (failurePolicy Ignore).

One endpoint per mode serves the whole module; each test deletes namespaces of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.admission._endpoint import KUBECTL, Endpoint, configure, endpoint, kubectl
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import Api, apply_scenario

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

# the API server gives a webhook timeoutSeconds; the check's own budget is within it
BUDGET = "8"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path]]:
    """A healthy cluster (metrics-server up), on a clock at the present (kube-controller-manager's Lease is
    fresh to a command that reads the real clock), with a Kiali CRD whose operator is not installed."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        Api(emu).crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
        emu.settle()
        yield emu, emu.write_kubeconfig(tmp_path_factory.mktemp("admission") / "kubeconfig")


@pytest.fixture(scope="module")
def warn(cluster: tuple[Emulator, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    emu, kubeconfig = cluster
    with endpoint(kubeconfig, tmp_path_factory.mktemp("warn"), "--budget", BUDGET) as served:
        configure(emu, "nsstuck", served.url(), served.ca_bundle)
        yield served


def http(emu: Emulator) -> KubeHTTP:
    return KubeHTTP(emu.url, emu.admin_token)


def namespace(emu: Emulator, name: str, **metadata: object) -> None:
    http(emu).post("/api/v1/namespaces", {"metadata": {"name": name, **metadata}})


def with_orphaned_kiali(emu: Emulator, name: str, **metadata: object) -> None:
    """A namespace holding a Kiali whose finalizer no controller will remove (the operator is not there)."""
    namespace(emu, name, **metadata)
    http(emu).post(
        f"/apis/kiali.io/v1alpha1/namespaces/{name}/kialis",
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]},
        },
    )


def deleting(emu: Emulator, name: str) -> bool:
    found = http(emu).get_or_none(f"/api/v1/namespaces/{name}")
    return bool(found and found["metadata"].get("deletionTimestamp"))


def warnings(result: object) -> list[str]:
    return [line for line in getattr(result, "stderr", "").splitlines() if line.startswith("Warning: ")]


def test_an_orphaned_finalizer_is_warned_of_and_the_delete_goes_ahead(
    cluster: tuple[Emulator, Path], warn: Endpoint
) -> None:
    emu, kubeconfig = cluster
    with_orphaned_kiali(emu, "team-kiali")

    result = kubectl(kubeconfig, "delete", "ns", "team-kiali", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'namespace "team-kiali" deleted'
    assert warnings(result) == [
        "Warning: nsstuck: orphaned_finalizer: kialis.kiali.io/kiali would hold it; see `nsstuck precheck team-kiali`"
    ]
    assert deleting(emu, "team-kiali")
