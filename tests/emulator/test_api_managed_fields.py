"""metadata.managedFields as the API server keeps them: per manager, operation and subresource, the fields
it set and the time of its last change (issue 22: the diagnosis reads who last wrote an object's status,
and when)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.emulator._api_support import Raw, admin, emu, kubectl
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu"]

CM = "/api/v1/namespaces/default/configmaps"
SVC = "/api/v1/namespaces/default/services"


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj["metadata"].get("managedFields") or [])


def test_the_field_manager_and_the_time_of_its_last_change_are_recorded(emu: Emulator, admin: Raw) -> None:
    created = admin.post(
        f"{CM}?fieldManager=setup", {"metadata": {"name": "m", "labels": {"a": "1"}}, "data": {"k": "v"}}
    ).json
    [entry] = _entries(created)
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("setup", "Update", "v1")
    assert entry["time"] == "2026-11-20T08:00:00Z"
    assert set(entry["fieldsV1"]) == {"f:metadata", "f:data"}
    assert "f:labels" in entry["fieldsV1"]["f:metadata"]

    emu.clock.advance(120)  # type: ignore[attr-defined]
    # a write that changes nothing leaves the time alone; one by another manager adds its own entry
    admin.put(f"{CM}/m?fieldManager=setup", {**created, "metadata": {**created["metadata"]}})
    same = admin.get(f"{CM}/m").json
    assert _entries(same)[0]["time"] == "2026-11-20T08:00:00Z"
    changed = admin.patch(f"{CM}/m?fieldManager=tuner", {"data": {"k": "w"}}).json
    by_manager = {e["manager"]: e for e in _entries(changed)}
    assert by_manager["tuner"]["time"] == "2026-11-20T08:02:00Z"
    assert set(by_manager["tuner"]["fieldsV1"]) == {"f:data"}
    assert by_manager["setup"]["time"] == "2026-11-20T08:00:00Z"


def test_a_status_write_is_recorded_under_the_status_subresource(emu: Emulator, admin: Raw) -> None:
    svc = admin.post(SVC, {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}).json
    emu.clock.advance(60)  # type: ignore[attr-defined]
    status = {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}
    written = admin.put(f"{SVC}/lb/status?fieldManager=cloud-controller-manager", {**svc, "status": status}).json
    entry = next(e for e in _entries(written) if e["manager"] == "cloud-controller-manager")
    assert entry["subresource"] == "status"
    assert entry["time"] == "2026-11-20T08:01:00Z"
    assert set(entry["fieldsV1"]) == {"f:status"}


def test_without_field_manager_the_user_agent_names_the_manager(emu: Emulator, admin: Raw, tmp_path: Path) -> None:
    admin.post(
        CM, {"metadata": {"name": "ua"}, "data": {"k": "v"}}, headers={"User-Agent": "gadgetd/v1.2.3 (linux/amd64)"}
    )
    assert [e["manager"] for e in _entries(admin.get(f"{CM}/ua").json)] == ["gadgetd"]
    # and kubectl shows them as the real API server's (kubectl names itself kubectl-<verb>)
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    result = kubectl(kubeconfig, "label", "configmap", "ua", "team=a")
    assert result.returncode == 0, result.stderr
    managers = {e["manager"] for e in _entries(admin.get(f"{CM}/ua").json)}
    assert managers == {"gadgetd", "kubectl-label"}
