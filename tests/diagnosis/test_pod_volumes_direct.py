"""bot/diagnosis/pod_volumes.py on snapshots built from dicts: which volumes of a deleting pod have a backend
to follow, an NFS server given by IP, and the backends that are not judged (not read, healthy, unknown).

(tests/diagnosis/test_stuck_or_slow.py has an NFS server named by its Service's DNS name and a CSI
driver without its node plugin, through the whole diagnosis.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.diagnosis.context import Context
from bot.diagnosis.pod_volumes import Source, broken_backends, sources
from bot.domain.findings import Cause, Gap
from bot.domain.snapshot import NamespaceSnapshot
from tests.diagnosis.test_stuck_or_slow import (
    CONTENT_FAILURE,
    NOW,
    _at,
    _csi_volume,
    _diagnose,
    _namespace,
    _nfs_volume,
    _node,
    _only,
    _pod,
)


def _context(**fields: Any) -> Context:
    base: dict[str, Any] = {
        "cluster": "c",
        "namespace": "ns",
        "observed_at": NOW,
        "namespace_object": _namespace(timedelta(minutes=20)),
    }
    base.update(fields)
    return Context(NamespaceSnapshot(**base))


def _with_volumes(*volumes: Any) -> dict[str, Any]:
    pod = _pod("web-0", past_grace=timedelta(minutes=45), containers="stopped")
    pod["spec"]["volumes"] = list(volumes)
    return pod


def _server_pod(ip: str, *, ready: bool, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "nfs-0", "namespace": "storage", "uid": "uid-nfs-0"}
    if deleting:
        meta["deletionTimestamp"] = _at(timedelta(minutes=1))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _nfs(name: str, server: str) -> dict[str, Any]:
    return {"name": name, "nfs": {"server": server, "path": "/export"}}


def test_the_sources_are_inline_nfs_and_csi_volumes_and_the_volumes_bound_to_its_claims() -> None:
    pod = _with_volumes(
        "not a volume",
        _nfs("share", "10.0.0.9"),
        {"name": "inline", "csi": {"driver": "inline.csi.example.com"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "config", "configMap": {"name": "settings"}},
    )
    elsewhere = _nfs_volume("data", "nfs.other.svc")
    elsewhere["metadata"]["name"] = "pv-elsewhere"
    elsewhere["spec"]["claimRef"]["namespace"] = "other"
    ctx = _context(
        persistent_volumes=(
            _csi_volume("web-0-scratch", "block.csi.example.com"),  # the ephemeral volume's claim
            _nfs_volume("data", "nfs.ns.svc"),
            _nfs_volume("someone-elses", "nfs.ns.svc"),  # another claim of the namespace
            elsewhere,  # the same claim name in another namespace
        )
    )
    assert sources(ctx, pod) == [
        Source("volume share", nfs_server="10.0.0.9"),
        Source("volume inline", csi_driver="inline.csi.example.com"),
        Source("volume scratch (PersistentVolume pv-web-0-scratch)", csi_driver="block.csi.example.com"),
        Source("volume data (PersistentVolume pv-data)", nfs_server="nfs.ns.svc"),
    ]


def test_an_nfs_server_given_by_a_services_cluster_ip_is_followed_through_that_service() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nfs", "namespace": "storage"},
        "spec": {"clusterIP": "10.96.0.50", "selector": {"app": "nfs"}},
    }
    ctx = _context(services=(service,))
    (broken,) = broken_backends(ctx, _with_volumes(_nfs("share", "10.96.0.50")), "node-1", [], timedelta(minutes=30))
    assert broken.short == "NFS server nfs.storage.svc does not answer (no ready endpoint)"
    assert broken.evidence[0].startswith(
        "volume share is an NFS share of server nfs.storage.svc: its Service nfs in storage has no ready endpoint"
    )
    assert (broken.target.kind, broken.target.name, broken.target.namespace) == ("Service", "nfs", "storage")


def test_an_nfs_server_given_by_a_pods_ip_is_said_gone_while_that_pod_is_deleted_or_not_ready() -> None:
    pod = _with_volumes(_nfs("share", "10.244.1.7"))
    for server, state in (
        (_server_pod("10.244.1.7", ready=True, deleting=True), "is being deleted"),
        (_server_pod("10.244.1.7", ready=False), "is not Ready"),
    ):
        ctx = _context(backend_pods=(server,))
        (broken,) = broken_backends(ctx, pod, "node-1", [], timedelta(minutes=30))
        assert broken.short == f"NFS server 10.244.1.7 (pod nfs-0) {state}"
        assert broken.evidence == (
            f"volume share is an NFS share of server 10.244.1.7, which is pod nfs-0 in storage: it {state}; an NFS "
            "mount whose server is gone cannot be unmounted",
        )
        assert broken.commands == ("kubectl -n storage get pod nfs-0 -o wide",)
        assert (broken.target.kind, broken.target.name) == ("Pod", "nfs-0")
    ready = _context(backend_pods=(_server_pod("10.244.1.7", ready=True),))
    assert broken_backends(ready, pod, "node-1", [], timedelta(minutes=30)) == []
    # an address nothing in the snapshot has: a server outside the cluster, not judged
    unrelated: dict[str, Any] = {"kind": "Service", "metadata": {"name": "db", "namespace": "ns"}}
    unrelated["spec"] = {"clusterIP": "10.96.0.9"}
    other = _context(services=(unrelated,), backend_pods=(_server_pod("10.244.9.9", ready=False),))
    assert broken_backends(other, pod, "node-1", [], timedelta(minutes=30)) == []


def test_an_nfs_service_that_could_not_be_read_or_answers_is_not_judged() -> None:
    pod = _with_volumes(_nfs("share", "nfs.storage.svc.cluster.local"))
    unread = _context(gaps=(Gap(what="get service storage/nfs", reason="forbidden"),))
    assert broken_backends(unread, pod, "node-1", [], timedelta(minutes=30)) == []
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nfs", "namespace": "storage"},
        "spec": {"selector": {"app": "nfs"}},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "nfs-1", "namespace": "storage", "labels": {"kubernetes.io/service-name": "nfs"}},
        "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": True}}],
    }
    healthy = _context(services=(service,), endpoint_slices=(endpoints,))
    assert broken_backends(healthy, pod, "node-1", [], timedelta(minutes=30)) == []
    # the same Service with no endpoint at all: it does not answer
    (broken,) = broken_backends(_context(services=(service,)), pod, "node-1", [], timedelta(minutes=30))
    assert broken.short == "NFS server nfs.storage.svc.cluster.local does not answer (no ready endpoint)"


def test_a_csi_volume_on_a_node_whose_csinode_was_not_read_is_not_judged() -> None:
    pod = _with_volumes({"name": "inline", "csi": {"driver": "inline.csi.example.com"}})
    assert broken_backends(_context(), pod, "node-1", [], timedelta(minutes=30)) == []
    # read, and the node has no CSINode at all
    (broken,) = broken_backends(_context(csi_nodes={"node-1": None}), pod, "node-1", [], timedelta(minutes=30))
    assert "node node-1 has no CSINode: no CSI node plugin is registered there" in broken.evidence[0]


def test_the_diagnosis_names_the_nfs_server_pod_that_is_being_deleted() -> None:
    pod = _with_volumes(_nfs("share", "10.244.1.7"))
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = _at(timedelta(minutes=45))
    diagnosis = _diagnose(
        conditions=[CONTENT_FAILURE],
        contents={"pods": (pod,)},
        nodes={"node-1": _node("node-1")},
        backend_pods=(_server_pod("10.244.1.7", ready=True, deleting=True),),
    )
    finding = _only(diagnosis, Cause.POD_NOT_TERMINATING)
    assert finding.summary.startswith(
        "the kubelet on Ready node node-1 has not finished pod web-0: no progress for 45m "
        "(NFS server 10.244.1.7 (pod nfs-0) is being deleted)"
    )
    assert finding.remedies[0].targets[0].name == "nfs-0"
