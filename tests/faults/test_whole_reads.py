"""What the collector reads beyond the namespace's lists (issues 22 and 23): the objects being deleted,
whole and one by one, but never a Secret or a ConfigMap; every Lease outside kube-node-lease; the
VolumeAttachments of the namespace's deleting pods' nodes only; and the server's /version."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from tests.emulator._api_support import Raw, make_ns
from tests.fakes.kubeapi import Emulator, FakeClock

NS = "shop"
OPTIONS = CollectOptions(deadline=10, call_timeout=3)
HOLD = ["example.com/hold"]
ONE_OBJECT = re.compile(rf"^/(?:api/v1|apis/[^/]+/[^/]+)/namespaces/{NS}/[^/]+/[^/]+$")


def _lease(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": f"{name}-0", "leaseDurationSeconds": 15, "renewTime": "2026-11-20T07:59:58.000000Z"},
    }


def _attachment(name: str, node: str) -> dict[str, object]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": f"pv-{name}"}},
    }


@pytest.fixture
def diagnosed(tmp_path: Path) -> Iterator[tuple[Emulator, DiagnosisResult]]:
    emu = Emulator(
        clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=False, server_version="1.29.7"
    )
    emu.start()
    try:
        admin = Raw(emu, emu.admin_token)
        make_ns(admin, NS)
        for kind in ("secrets", "configmaps"):
            body = {"metadata": {"name": "held", "namespace": NS, "finalizers": HOLD}, "data": {}}
            assert admin.post(f"/api/v1/namespaces/{NS}/{kind}", body).status == 201
        sa = {"metadata": {"name": "robot", "namespace": NS, "finalizers": HOLD}}
        assert admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", sa).status == 201
        node = {"metadata": {"name": "node-1"}}
        assert admin.post("/api/v1/nodes", node).status == 201
        pod = {
            "metadata": {"name": "web", "namespace": NS, "finalizers": HOLD},
            "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}]},
        }
        assert admin.post(f"/api/v1/namespaces/{NS}/pods", pod).status == 201
        for namespace, name in (("kube-system", "kube-controller-manager"), ("kube-node-lease", "node-1")):
            assert (
                admin.post(
                    f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", _lease(namespace, name)
                ).status
                == 201
            )
        for name, on in (("here", "node-1"), ("elsewhere", "node-2")):
            assert admin.post("/apis/storage.k8s.io/v1/volumeattachments", _attachment(name, on)).status == 201
        assert admin.delete(f"/api/v1/namespaces/{NS}").status == 200
        for kind, name in (("secrets", "held"), ("configmaps", "held"), ("serviceaccounts", "robot"), ("pods", "web")):
            assert admin.delete(f"/api/v1/namespaces/{NS}/{kind}/{name}").status == 200
        emu.journal.clear()
        target = ClusterTarget(name="emulated", kubeconfig=emu.write_kubeconfig(tmp_path / "kubeconfig"))
        yield emu, diagnose_namespace(target, NS, options=OPTIONS, clock=emu.clock.now)
    finally:
        emu.stop()


def test_deleting_objects_are_read_whole_but_never_secrets_or_configmaps(
    diagnosed: tuple[Emulator, DiagnosisResult],
) -> None:
    emu, result = diagnosed
    by_name = {e.path for e in emu.journal.entries("GET", ONE_OBJECT)}
    assert by_name == {f"/api/v1/namespaces/{NS}/serviceaccounts/robot"}
    [robot] = result.snapshot.objects("serviceaccounts")
    assert robot["metadata"]["finalizers"] == HOLD
    for key in ("secrets", "configmaps"):
        [held] = result.snapshot.objects(key)
        assert set(held) == {"apiVersion", "kind", "metadata"}, held


def test_leases_attachments_and_version(diagnosed: tuple[Emulator, DiagnosisResult]) -> None:
    emu, result = diagnosed
    [lease_list] = emu.journal.entries(path="/apis/coordination.k8s.io/v1/leases")
    assert "fieldSelector=metadata.namespace%21%3Dkube-node-lease" in lease_list.query
    snapshot = result.snapshot
    assert [(x["metadata"]["namespace"], x["metadata"]["name"]) for x in snapshot.leases] == [
        ("kube-system", "kube-controller-manager")
    ]
    assert snapshot.lease("kube-system", "kube-controller-manager") is not None
    assert [a["metadata"]["name"] for a in snapshot.volume_attachments] == ["here"]
    assert snapshot.server_version is not None
    assert snapshot.server_version["gitVersion"] == "v1.29.7"
    assert result.diagnosis.complete, result.diagnosis.gaps
