"""Aggregated discovery (issue 23 §1): what /api and /apis answer for client-go's Accept list, per server
version, and the aggregator defect of kubernetes/kubernetes#119662, with the real kubectl agreeing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.emulator._api_support import Raw, kubectl
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import apply_scenario_once

CLIENT_GO = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
ALLOCATION = {
    "apiVersion": "apiregistration.k8s.io/v1",
    "kind": "APIService",
    "metadata": {"name": "v1.allocation.agones.dev"},
    "spec": {
        "group": "allocation.agones.dev",
        "version": "v1",
        "groupPriorityMinimum": 1000,
        "versionPriority": 15,
        "service": {"namespace": "agones-system", "name": "agones-controller-service", "port": 443},
    },
}
RESOURCES = [{"name": "gameserverallocations", "singularName": "", "namespaced": True, "kind": "GameServerAllocation"}]


def _emulator(**options: Any) -> Emulator:
    return Emulator(clock=FakeClock(), controllers=False, aggregated_discovery=True, **options).start()


def _allocation_api(emu: Emulator, *, honours_accept: bool) -> Raw:
    """Agones' allocation API, Available, its backend answering /apis/allocation.agones.dev/v1."""
    admin = Raw(emu, emu.admin_token)
    emu.register_aggregated_backend("allocation.agones.dev", "v1", RESOURCES, honours_discovery_accept=honours_accept)
    created = admin.post("/apis/apiregistration.k8s.io/v1/apiservices", ALLOCATION).json
    created["status"] = {
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "Passed",
                "message": "all checks passed",
                "lastTransitionTime": "2026-11-20T08:00:00Z",
            }
        ]
    }
    put = admin.put("/apis/apiregistration.k8s.io/v1/apiservices/v1.allocation.agones.dev/status", created)
    assert put.status == 200, put.raw
    return admin


def _allocation_versions(doc: dict[str, Any]) -> list[dict[str, Any]]:
    items = {i["metadata"]["name"]: i for i in doc["items"]}
    versions: list[dict[str, Any]] = items["allocation.agones.dev"]["versions"]
    return versions


@pytest.mark.parametrize(
    ("version", "served"),
    [("1.25.16", None), ("1.26.15", "v2beta1"), ("1.27.3", "v2beta1"), ("1.29.0", "v2beta1"), ("1.30.0", "v2")],
)
def test_the_accept_list_is_negotiated_as_that_server_version_would(version: str, served: str | None) -> None:
    emu = _emulator(server_version=version)
    try:
        admin = Raw(emu, emu.admin_token)
        for path in ("/api", "/apis"):
            resp = admin.get(path, headers={"Accept": CLIENT_GO})
            assert resp.status == 200
            if served is None:
                assert resp.headers["Content-Type"] == "application/json"
                assert resp.json["kind"] in ("APIVersions", "APIGroupList")
            else:
                wanted = f"application/json;g=apidiscovery.k8s.io;v={served};as=APIGroupDiscoveryList"
                assert resp.headers["Content-Type"] == wanted
                assert resp.json["apiVersion"] == f"apidiscovery.k8s.io/{served}"
                assert resp.json["kind"] == "APIGroupDiscoveryList"
        # a client that asks for v2 alone is refused by a server that serves only v2beta1 (or nothing)
        v2_only = admin.get("/apis", headers={"Accept": CLIENT_GO.split(",", maxsplit=1)[0]})
        assert v2_only.status == (200 if served == "v2" else 406)
        assert admin.get("/apis").json["kind"] == "APIGroupList"
    finally:
        emu.stop()


@pytest.mark.parametrize(
    ("version", "stale"),
    [("1.27.5", True), ("1.27.6", False), ("1.28.0", True), ("1.28.1", True), ("1.28.2", False), ("1.29.3", False)],
)
def test_a_backend_that_ignores_accept_is_stale_only_on_an_unfixed_aggregator(version: str, stale: bool) -> None:
    emu = _emulator(server_version=version)
    try:
        admin = _allocation_api(emu, honours_accept=False)
        doc = admin.get("/apis", headers={"Accept": CLIENT_GO}).json
        (entry,) = _allocation_versions(doc)
        if stale:
            assert entry == {"version": "v1", "freshness": "Stale"}
        else:
            assert entry["freshness"] == "Current"
            assert [r["resource"] for r in entry["resources"]] == ["gameserverallocations"]
        # the per-version document answers either way: the APIService is healthy
        legacy = admin.get("/apis/allocation.agones.dev/v1")
        assert legacy.status == 200
        assert legacy.json["resources"][0]["name"] == "gameserverallocations"
    finally:
        emu.stop()


def test_a_backend_that_honours_accept_is_current_on_the_unfixed_aggregator() -> None:
    emu = _emulator(server_version="1.28.1")
    try:
        admin = _allocation_api(emu, honours_accept=True)
        (entry,) = _allocation_versions(admin.get("/apis", headers={"Accept": CLIENT_GO}).json)
        assert entry["freshness"] == "Current"
    finally:
        emu.stop()


def test_a_minor_alone_is_not_taken_as_unfixed_unless_the_option_says_so() -> None:
    emu = _emulator(server_version="1.27")
    try:
        admin = _allocation_api(emu, honours_accept=False)
        (entry,) = _allocation_versions(admin.get("/apis", headers={"Accept": CLIENT_GO}).json)
        assert entry["freshness"] == "Current"
        emu.options["aggregated_discovery_defect"] = True
        (entry,) = _allocation_versions(admin.get("/apis", headers={"Accept": CLIENT_GO}).json)
        assert entry == {"version": "v1", "freshness": "Stale"}
    finally:
        emu.stop()


def test_backends_declared_by_option_are_served() -> None:
    emu = _emulator(server_version="1.27")
    try:
        admin = Raw(emu, emu.admin_token)
        emu.options["aggregated_backends"] = [
            {"group": "allocation.agones.dev", "version": "v1", "resources": RESOURCES}
        ]
        admin.post("/apis/apiregistration.k8s.io/v1/apiservices", ALLOCATION)
        # no Available condition yet: the aggregator answers 503, as for any unavailable APIService
        assert admin.get("/apis/allocation.agones.dev/v1").status == 503
    finally:
        emu.stop()


def _scenario_kubectl(name: str, tmp_path: Path) -> tuple[Emulator, Path]:
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
    apply_scenario_once(emu, name)
    return emu, emu.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.mark.kubectl
def test_kubectl_reads_the_stale_version_of_the_unfixed_aggregator(tmp_path: Path) -> None:
    emu, kc = _scenario_kubectl("aggregator-stale-defect", tmp_path)
    try:
        # kubectl (client-go's aggregated discovery) leaves the Stale version out of what it knows...
        versions = kubectl(kc, "api-versions")
        assert versions.returncode == 0, versions.stderr
        assert "allocation.agones.dev/v1" not in versions.stdout.split()
        assert "apps/v1" in versions.stdout.split()
        resources = kubectl(kc, "api-resources", "--api-group=allocation.agones.dev", "--no-headers")
        assert resources.stdout.strip() == ""
        get = kubectl(kc, "get", "gameserverallocations", "-A")
        assert get.returncode != 0
        assert 'the server doesn\'t have a resource type "gameserverallocations"' in get.stderr
        # ...although the APIService is Available and the per-version document answers
        svc = kubectl(kc, "get", "apiservice", "v1.allocation.agones.dev", "--no-headers")
        assert svc.stdout.split()[:3] == ["v1.allocation.agones.dev", "agones-system/agones-controller-service", "True"]
        raw = kubectl(kc, "get", "--raw", "/apis/allocation.agones.dev/v1")
        assert raw.returncode == 0, raw.stderr
        assert "gameserverallocations" in raw.stdout
        ns = kubectl(kc, "get", "ns", "game-servers", "-o", "jsonpath={.status.conditions[0].message}")
        assert "stale GroupVersion discovery: allocation.agones.dev/v1" in ns.stdout
        # kubectl asked /apis for aggregated discovery, and that is what a 1.28 server answered
        asked = emu.journal.entries(path="/apis")
        assert asked
        assert all("as=APIGroupDiscoveryList" in j.accept for j in asked)
    finally:
        emu.stop()


@pytest.mark.kubectl
def test_kubectl_sees_the_version_current_on_the_fixed_aggregator(tmp_path: Path) -> None:
    emu, kc = _scenario_kubectl("aggregator-stale-fixed", tmp_path)
    try:
        assert "allocation.agones.dev/v1" in kubectl(kc, "api-versions").stdout.split()
        out = kubectl(kc, "api-resources", "--api-group=allocation.agones.dev", "--no-headers")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[0] == "gameserverallocations"
        gone = kubectl(kc, "get", "ns", "game-servers")
        assert gone.returncode != 0
        assert "NotFound" in gone.stderr
    finally:
        emu.stop()


@pytest.mark.kubectl
def test_kubectl_reads_a_v2_stale_version_of_an_apiservice_that_is_down(tmp_path: Path) -> None:
    emu, kc = _scenario_kubectl("aggregated-stale-backend-down", tmp_path)
    try:
        emu.options["server_version"] = "1.31.2"  # serves apidiscovery.k8s.io/v2
        versions = kubectl(kc, "api-versions")
        assert versions.returncode == 0, versions.stderr
        assert "allocation.agones.dev/v1" not in versions.stdout.split()
        assert "apps/v1" in versions.stdout.split()
        svc = kubectl(kc, "get", "apiservice", "v1.allocation.agones.dev", "--no-headers")
        assert svc.stdout.split()[2] == "False"
        raw = kubectl(kc, "get", "--raw", "/apis/allocation.agones.dev/v1")
        assert raw.returncode != 0
        assert "the server is currently unable to handle the request" in raw.stderr
        asked = [j.accept for j in emu.journal.entries(path="/apis")]
        assert asked
        assert all(a.startswith("application/json;g=apidiscovery.k8s.io;v=v2;") for a in asked)
    finally:
        emu.stop()
