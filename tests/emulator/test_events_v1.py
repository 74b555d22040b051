"""Events in two API groups, one storage (as kube-apiserver: pkg/apis/events/v1/conversion.go): an Event
written through core v1 reads back through events.k8s.io/v1 with its fields renamed, and the other way
round; the real kubectl shows the same Event through both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.emulator._api_support import Raw, admin, emu, kubectl, make_ns
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu"]

CORE = "/api/v1/namespaces/shop/events"
V1 = "/apis/events.k8s.io/v1/namespaces/shop/events"

CORE_EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web.17f0", "namespace": "shop"},
    "involvedObject": {"kind": "Pod", "name": "web", "namespace": "shop", "uid": "u-1"},
    "reason": "FailedKillPod",
    "message": 'error killing pod: failed to "KillPodSandbox"',
    "type": "Warning",
    "source": {"component": "kubelet", "host": "node-1"},
    "firstTimestamp": "2026-11-20T08:00:00Z",
    "lastTimestamp": "2026-11-20T08:05:00Z",
    "count": 4,
}


def test_a_core_event_reads_back_through_events_k8s_io(admin: Raw) -> None:
    make_ns(admin, "shop")
    assert admin.post(CORE, CORE_EVENT).status == 201

    listed = admin.get(V1).json
    assert listed["apiVersion"] == "events.k8s.io/v1"
    [item] = listed["items"]
    assert item["regarding"] == CORE_EVENT["involvedObject"]
    assert (item["note"], item["reason"], item["type"]) == (CORE_EVENT["message"], "FailedKillPod", "Warning")
    assert (item["deprecatedSource"], item["deprecatedCount"]) == ({"component": "kubelet", "host": "node-1"}, 4)
    assert item["deprecatedLastTimestamp"] == "2026-11-20T08:05:00Z"
    assert not {"message", "involvedObject"} & set(item)
    one = admin.get(f"{V1}/web.17f0").json
    assert (one["apiVersion"], one["kind"], one["note"]) == ("events.k8s.io/v1", "Event", CORE_EVENT["message"])


def test_an_events_k8s_io_event_reads_back_through_core(admin: Raw) -> None:
    make_ns(admin, "shop")
    created = admin.post(
        V1,
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "ray.1", "namespace": "shop"},
            "eventTime": "2026-11-20T08:00:00.000000Z",
            "regarding": {"kind": "RayCluster", "name": "ray", "namespace": "shop"},
            "note": "cleanup job is forbidden",
            "reason": "FailedToCreateJob",
            "type": "Warning",
            "action": "Create",
            "reportingController": "kuberay-operator",
            "reportingInstance": "kuberay-operator-7d9",
        },
    )
    assert created.status == 201, created.raw
    assert created.json["note"] == "cleanup job is forbidden"
    core = admin.get(f"{CORE}/ray.1").json
    assert (core["apiVersion"], core["message"], core["reportingComponent"]) == (
        "v1",
        "cleanup job is forbidden",
        "kuberay-operator",
    )
    assert core["involvedObject"]["kind"] == "RayCluster"
    assert admin.delete(f"{V1}/ray.1").status == 200
    assert admin.get(f"{CORE}/ray.1").status == 404


@pytest.mark.kubectl
def test_kubectl_shows_the_same_event_through_both_groups(emu: Emulator, admin: Raw, tmp_path: Path) -> None:
    make_ns(admin, "shop")
    assert admin.post(CORE, CORE_EVENT).status == 201
    kc = emu.write_kubeconfig(tmp_path / "kubeconfig")

    core = kubectl(kc, "get", "events", "-n", "shop", "-o", "json")
    v1 = kubectl(kc, "get", "events.v1.events.k8s.io", "-n", "shop", "-o", "json")

    assert (core.returncode, v1.returncode) == (0, 0), core.stderr + v1.stderr
    [core_item] = json.loads(core.stdout)["items"]
    [v1_item] = json.loads(v1.stdout)["items"]
    assert core_item["metadata"]["uid"] == v1_item["metadata"]["uid"]
    assert (core_item["message"], v1_item["note"]) == (CORE_EVENT["message"], CORE_EVENT["message"])
    assert v1_item["regarding"]["name"] == "web"


def test_a_server_before_1_19_has_no_events_k8s_io_v1(emu: Emulator, admin: Raw) -> None:
    emu.options["server_version"] = "1.18.20"
    make_ns(admin, "shop")

    assert admin.get(V1).status == 404
    groups = {g["name"] for g in admin.get("/apis").json["groups"]}
    assert "events.k8s.io" not in groups
    assert admin.post(CORE, CORE_EVENT).status == 201  # core Events as ever
    emu.options["server_version"] = "1.19.0"
    assert [i["note"] for i in admin.get(V1).json["items"]] == [CORE_EVENT["message"]]
