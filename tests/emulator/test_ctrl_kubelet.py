"""Kubelet, PodGC, PVC protection, endpoints and workloads: the controllers pods depend on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.kubeapi.controllers import controllers_of
from tests.fakes.kubeapi.controllers.kubelet import TEARDOWN_ERROR_ANNOTATION, pod_ip
from tests.fakes.kubeapi.scenarios import Api, run_for

from ._scenario_support import new_emulator

PODS = "/api/v1/namespaces/work/pods"


@pytest.fixture
def api() -> Iterator[Api]:
    emu = new_emulator()
    api = Api(emu)
    api.node("node-1", "192.168.0.41")
    api.node("node-2", "192.168.0.42")
    api.namespace("work")
    emu.settle()
    try:
        yield api
    finally:
        emu.stop()


def _pod(api: Api, name: str, *, node: str, grace: int = 30, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "c", "image": "busybox"}],
        **extra,
    }
    return api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def test_kubelet_starts_pods_on_ready_nodes(api: Api) -> None:
    _pod(api, "p1", node="node-1")
    api.emu.settle()
    pod = api.http.get(f"{PODS}/p1")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"] == pod_ip("work", "p1")
    assert pod["status"]["hostIP"] == "192.168.0.41"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-11-20T08:00:00Z"


def test_crash_looping_pod_is_running_but_not_ready(api: Api) -> None:
    api.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "crash", "annotations": {"emulator.nsstuck.dev/crash-loop": "true"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    api.emu.settle()
    status = api.http.get(f"{PODS}/crash")["status"]
    assert status["phase"] == "Running"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "False"


def test_graceful_deletion_completes_after_the_grace_period(api: Api) -> None:
    _pod(api, "p1", node="node-1", grace=30)
    api.emu.settle()
    api.delete(f"{PODS}/p1")
    pod = api.http.get(f"{PODS}/p1")
    assert pod["metadata"]["deletionTimestamp"] == "2026-11-20T08:00:30Z"
    run_for(api.emu, 29, step=29)
    assert api.http.get_or_none(f"{PODS}/p1") is not None
    run_for(api.emu, 1, step=1)
    assert api.http.get_or_none(f"{PODS}/p1") is None


def test_pods_on_a_not_ready_node_stay_terminating(api: Api) -> None:
    _pod(api, "p2", node="node-2", grace=5)
    api.emu.settle()
    api.node_lost("node-2")
    api.delete(f"{PODS}/p2")
    run_for(api.emu, 600, step=300)
    pod = api.http.get(f"{PODS}/p2")
    assert pod["metadata"]["deletionTimestamp"] == "2026-11-20T08:00:05Z"
    assert pod["status"]["phase"] == "Running"


def test_pod_gc_force_deletes_pods_of_missing_nodes_after_quarantine(api: Api) -> None:
    _pod(api, "p3", node="node-2")
    api.emu.settle()
    api.delete("/api/v1/nodes/node-2")
    api.delete(f"{PODS}/p3")
    run_for(api.emu, 30, step=10)
    assert api.http.get_or_none(f"{PODS}/p3") is not None
    run_for(api.emu, 10, step=10)
    assert api.http.get_or_none(f"{PODS}/p3") is None


def test_pod_gc_can_be_switched_off(api: Api) -> None:
    ctrls = controllers_of(api.emu)
    assert ctrls is not None
    ctrls.configure(pod_gc_orphans=False)
    _pod(api, "p4", node="ghost")
    run_for(api.emu, 300, step=100)
    assert api.http.get(f"{PODS}/p4")["status"]["phase"] == "Pending"


def test_pvc_protection_waits_for_the_pod_using_the_claim(api: Api) -> None:
    pvcs = "/api/v1/namespaces/work/persistentvolumeclaims"
    api.create(
        pvcs,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    _pod(api, "db", node="node-1", grace=10, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    api.emu.settle()
    api.delete(f"{pvcs}/data")
    api.emu.settle()
    pvc = api.http.get(f"{pvcs}/data")
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    api.delete(f"{PODS}/db")
    run_for(api.emu, 10, step=10)
    assert api.http.get_or_none(f"{pvcs}/data") is None


def test_endpoints_follow_pod_readiness(api: Api) -> None:
    api.deployment("work", "api", node="node-1", replicas=2, ports=[{"name": "http", "containerPort": 8080}])
    api.service("work", "api", selector={"app": "api"}, ports=[{"name": "http", "port": 80, "targetPort": "http"}])
    api.emu.settle()
    slices = api.http.list_items(
        "/apis/discovery.k8s.io/v1/namespaces/work/endpointslices", labelSelector="kubernetes.io/service-name=api"
    )
    assert len(slices) == 1
    assert slices[0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert [e["conditions"]["ready"] for e in slices[0]["endpoints"]] == [True, True]
    assert slices[0]["metadata"]["ownerReferences"][0]["kind"] == "Service"
    endpoints = api.http.get("/api/v1/namespaces/work/endpoints/api")
    assert len(endpoints["subsets"][0]["addresses"]) == 2
    deploy = api.http.get("/apis/apps/v1/namespaces/work/deployments/api")
    assert deploy["status"]["availableReplicas"] == 2
    assert next(c for c in deploy["status"]["conditions"] if c["type"] == "Available")["status"] == "True"
    # the Service goes: its Endpoints are deleted, the EndpointSlice is garbage collected
    api.delete("/api/v1/namespaces/work/services/api")
    api.emu.settle()
    assert api.http.get_or_none("/api/v1/namespaces/work/endpoints/api") is None
    assert api.http.list_items("/apis/discovery.k8s.io/v1/namespaces/work/endpointslices") == []


def test_replicaset_cannot_recreate_pods_in_a_terminating_namespace(api: Api) -> None:
    api.deployment("work", "batch", node="node-2", replicas=1, grace=300)
    api.emu.settle()
    api.node_lost("node-2")
    api.delete_namespace("work")
    run_for(api.emu, 30, step=10)
    pods = api.http.list_items(PODS)
    assert len(pods) == 1  # the deleted one; no replacement could be created
    assert pods[0]["metadata"]["deletionTimestamp"]


def test_pvc_protection_counts_a_finished_pod_until_it_is_deleted(api: Api) -> None:
    """`podUsesPVC` (pkg/controller/volume/pvcprotection): a scheduled pod naming the claim uses it,
    whatever its phase; only its deletion releases the claim."""
    pvcs = "/api/v1/namespaces/work/persistentvolumeclaims"
    api.create(
        pvcs,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "out"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    _pod(api, "job", node="node-1", volumes=[{"name": "o", "persistentVolumeClaim": {"claimName": "out"}}])
    api.emu.settle()
    api.put_status(f"{PODS}/job", {"phase": "Succeeded"})
    api.delete(f"{pvcs}/out")
    run_for(api.emu, 30, step=10)
    assert api.http.get(f"{pvcs}/out")["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    api.delete(f"{PODS}/job")
    run_for(api.emu, 10, step=10)
    assert api.http.get_or_none(f"{pvcs}/out") is None


def _events_about(api: Api, pod: str) -> list[dict[str, Any]]:
    return [e for e in api.http.list_items("/api/v1/namespaces/work/events") if e["involvedObject"]["name"] == pod]


def test_kubelet_records_killing_and_its_teardown_error_as_events(api: Api) -> None:
    meta = {"name": "hung", "annotations": {TEARDOWN_ERROR_ANNOTATION: "FailedKillPod"}}
    spec = {"nodeName": "node-1", "terminationGracePeriodSeconds": 10, "containers": [{"name": "c", "image": "x"}]}
    api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    api.emu.settle()
    api.delete(f"{PODS}/hung")
    run_for(api.emu, 40, step=10)
    events = {e["reason"]: e for e in _events_about(api, "hung")}
    assert events["Killing"]["type"] == "Normal"
    assert events["Killing"]["message"] == "Stopping container c"
    failed = events["FailedKillPod"]
    assert failed["type"] == "Warning"
    assert failed["source"] == {"component": "kubelet", "host": "node-1"}
    assert failed["message"].startswith('error killing pod: failed to "KillContainer" for "c"')
    assert failed["count"] >= 3  # one per pass past the grace period: the same event, patched
    assert api.http.get(f"{PODS}/hung")["metadata"]["deletionTimestamp"]  # never confirmed


def test_kubelet_events_are_lost_in_a_terminating_namespace_and_updates_still_land(api: Api) -> None:
    meta = {"name": "hung", "annotations": {TEARDOWN_ERROR_ANNOTATION: "FailedUnMount"}}
    spec = {"nodeName": "node-1", "terminationGracePeriodSeconds": 10, "containers": [{"name": "c", "image": "x"}]}
    api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    _pod(api, "late", node="node-2", grace=600)
    api.emu.settle()
    api.delete(f"{PODS}/hung")
    run_for(api.emu, 20, step=10)
    before = next(e for e in _events_about(api, "hung") if e["reason"] == "FailedUnMount")["count"]
    api.delete_namespace("work")
    run_for(api.emu, 30, step=10)
    # the namespace's deletion asked "late" to stop: its Killing could not be created (NamespaceLifecycle)
    assert _events_about(api, "late") == []
    # while the repeated FailedUnMount of "hung" is an update, which the API server still takes
    after = next(e for e in _events_about(api, "hung") if e["reason"] == "FailedUnMount")
    assert after["count"] > before
    statuses = api.http.get(f"{PODS}/hung")["status"]["containerStatuses"]
    assert [s["state"]["terminated"]["exitCode"] for s in statuses] == [137]  # stopped; the volume hangs
