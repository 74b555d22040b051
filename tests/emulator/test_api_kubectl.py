"""The real kubectl (/usr/bin/kubectl) against the emulator's HTTPS listener."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.emulator._api_support import KIALI_CRD, Raw, admin, emu, kubectl, make_cm, make_ns, user
from tests.emulator.test_api_aggregation_admission import METRICS_APISERVICE
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

pytestmark = pytest.mark.kubectl


@pytest.fixture
def kc(emu: Emulator, tmp_path: Path) -> Path:
    return emu.write_kubeconfig(tmp_path / "kubeconfig")


def test_get_prints_server_side_tables(emu: Emulator, kc: Path, user: Raw) -> None:
    make_ns(user, "team")
    emu.clock.advance(3600)  # type: ignore[attr-defined]
    out = kubectl(kc, "get", "ns")
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert lines[0] == ["NAME", "STATUS", "AGE"]
    assert ["team", "Active", "60m"] in lines
    user.delete("/api/v1/namespaces/team")
    out = kubectl(kc, "get", "ns", "team", "--no-headers")
    assert out.stdout.split() == ["team", "Terminating", "60m"]


def test_create_apply_patch_and_yaml(emu: Emulator, kc: Path, tmp_path: Path) -> None:
    # kubectl's typed "create namespace/configmap" send protobuf
    assert kubectl(kc, "create", "namespace", "shop").returncode == 0
    out = kubectl(kc, "create", "configmap", "settings", "-n", "shop", "--from-literal=color=blue")
    assert out.returncode == 0, out.stderr
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "applied", "namespace": "shop"},
                    "data": {"k": "1"},
                },
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "creds", "namespace": "shop"},
                    "stringData": {"password": "hunter2"},
                },
            ]
        )
    )
    out = kubectl(kc, "apply", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["configmap/applied created", "secret/creds created"]
    out = kubectl(kc, "apply", "-f", str(manifest))
    assert out.stdout.splitlines() == ["configmap/applied unchanged", "secret/creds unchanged"]
    manifest.write_text(manifest.read_text().replace("k: '1'", "k: '2'"))
    out = kubectl(kc, "apply", "-f", str(manifest))
    assert out.stdout.splitlines()[0] == "configmap/applied configured", out.stdout + out.stderr
    out = kubectl(kc, "patch", "configmap", "settings", "-n", "shop", "-p", '{"data":{"size":"xl"}}')
    assert out.returncode == 0, out.stderr
    out = kubectl(
        kc,
        "patch",
        "configmap",
        "settings",
        "-n",
        "shop",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/data/color"}]',
    )
    assert out.returncode == 0, out.stderr
    got = yaml.safe_load(kubectl(kc, "get", "configmap", "settings", "-n", "shop", "-o", "yaml").stdout)
    assert got["data"] == {"size": "xl"}
    assert yaml.safe_load(kubectl(kc, "get", "cm", "applied", "-n", "shop", "-o", "yaml").stdout)["data"] == {"k": "2"}
    out = kubectl(kc, "create", "-f", str(manifest))
    assert out.returncode == 1
    assert 'Error from server (AlreadyExists): error when creating "' in out.stderr
    assert 'configmaps "applied" already exists' in out.stderr


def test_delete_waits_for_finalizers_through_watch(kc: Path, user: Raw) -> None:
    make_ns(user, "w")
    make_cm(user, "w", "held", finalizers=["example.com/hold"])

    def release() -> None:
        time.sleep(0.6)
        user.patch("/api/v1/namespaces/w/configmaps/held", {"metadata": {"finalizers": None}})

    t = threading.Thread(target=release)
    t.start()
    t0 = time.monotonic()
    out = kubectl(kc, "delete", "configmap", "held", "-n", "w", "--timeout=10s")
    elapsed = time.monotonic() - t0
    t.join()
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'configmap "held" deleted'
    assert elapsed >= 0.55  # it really waited for the finalizer
    assert user.get("/api/v1/namespaces/w/configmaps/held").status == 404
    make_cm(user, "w", "stuck", finalizers=["example.com/hold"])
    out = kubectl(kc, "delete", "configmap", "stuck", "-n", "w", "--timeout=1s")
    assert out.returncode == 1
    assert "timed out waiting for the condition" in out.stderr


def test_finalize_by_replace_raw_but_not_by_replace(kc: Path, user: Raw, tmp_path: Path) -> None:
    make_ns(user, "stuck")
    assert kubectl(kc, "delete", "ns", "stuck", "--wait=false").returncode == 0
    ns = json.loads(kubectl(kc, "get", "ns", "stuck", "-o", "json").stdout)
    assert ns["status"]["phase"] == "Terminating"
    ns["spec"]["finalizers"] = []
    edited = tmp_path / "ns.json"
    edited.write_text(json.dumps(ns))
    # the kubectl-edit way: accepted, silently ignored
    out = kubectl(kc, "replace", "-f", str(edited))
    assert out.returncode == 0, out.stderr
    assert json.loads(kubectl(kc, "get", "ns", "stuck", "-o", "json").stdout)["spec"]["finalizers"] == ["kubernetes"]
    ns = json.loads(kubectl(kc, "get", "ns", "stuck", "-o", "json").stdout)
    ns["spec"]["finalizers"] = []
    out = kubectl(kc, "replace", "--raw", "/api/v1/namespaces/stuck/finalize", "-f", "-", stdin=json.dumps(ns))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["spec"]["finalizers"] == []
    out = kubectl(kc, "get", "ns", "stuck")
    assert out.returncode == 1
    assert out.stderr.strip() == 'Error from server (NotFound): namespaces "stuck" not found'


def test_api_resources_with_an_unavailable_aggregated_api(kc: Path, admin: Raw) -> None:
    assert admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE).status == 201
    out = kubectl(kc, "api-resources")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "error: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently "
        "unable to handle the request"
    )
    rows = {line.split()[0] for line in out.stdout.splitlines()[1:]}
    assert {"namespaces", "pods", "deployments", "customresourcedefinitions", "apiservices"} <= rows
    out = kubectl(kc, "get", "--raw", "/apis/metrics.k8s.io/v1beta1")
    assert out.returncode == 1
    assert "Error from server (ServiceUnavailable): the server is currently unable to handle the request" in out.stderr
    out = kubectl(kc, "get", "apiservice", "v1beta1.metrics.k8s.io", "--no-headers")
    assert out.stdout.split()[:3] == ["v1beta1.metrics.k8s.io", "kube-system/metrics-server", "Unknown"]


def test_custom_resource_finalizer_released_with_merge_patch(kc: Path, user: Raw, tmp_path: Path) -> None:
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(KIALI_CRD))
    out = kubectl(kc, "apply", "-f", str(crd))
    assert out.stdout.strip() == "customresourcedefinition.apiextensions.k8s.io/kialis.kiali.io created", out.stderr
    make_ns(user, "istio")
    cr = tmp_path / "cr.yaml"
    cr.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kiali.io/v1alpha1",
                "kind": "Kiali",
                "metadata": {"name": "kiali", "namespace": "istio", "finalizers": ["finalizer.kiali.io"]},
            }
        )
    )
    out = kubectl(kc, "create", "-f", str(cr))
    assert out.returncode == 0, out.stderr
    assert (
        'Warning: metadata.finalizers: "finalizer.kiali.io": prefer a domain-qualified finalizer name including a '
        "path (/) "
        "to avoid accidental conflicts with other finalizer writers"
    ) in out.stderr
    assert kubectl(kc, "delete", "kiali", "kiali", "-n", "istio", "--wait=false").returncode == 0
    out = kubectl(kc, "get", "kialis.kiali.io", "-n", "istio", "-o", "jsonpath={.items[0].metadata.deletionTimestamp}")
    assert out.stdout
    out = kubectl(
        kc, "patch", "kiali", "kiali", "-n", "istio", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kiali.kiali.io/kiali patched"
    assert user.get("/apis/kiali.io/v1alpha1/namespaces/istio/kialis/kiali").status == 404


def test_forbidden_and_expired_identities(emu: Emulator, kc: Path, user: Raw) -> None:
    make_ns(user, "x")
    emu.knobs.forbid("pods", namespace="x")
    out = kubectl(kc, "get", "pods", "-n", "x")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:nsstuck:nsstuck" cannot list '
        'resource "pods" in API group "" in the namespace "x"'
    )
    admin_kc = emu.write_kubeconfig(kc.parent / "admin", token=emu.admin_token)
    assert kubectl(admin_kc, "get", "pods", "-n", "x").returncode == 0
    emu.knobs.expired_tokens.add(emu.user_token)
    out = kubectl(kc, "get", "ns", "x")
    assert out.returncode == 1
    assert "error: You must be logged in to the server (Unauthorized)" in out.stderr


def test_get_watch_streams_changes(kc: Path, user: Raw) -> None:
    import subprocess

    make_ns(user, "wt")
    env = {"KUBECONFIG": str(kc), "HOME": str(kc.parent)}
    proc = subprocess.Popen(
        ["/usr/bin/kubectl", "get", "configmaps", "-n", "wt", "-w", "--no-headers"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        time.sleep(0.5)
        make_cm(user, "wt", "first")
        make_cm(user, "wt", "second")
        time.sleep(0.4)
    finally:
        proc.terminate()
        stdout, _ = proc.communicate(timeout=5)
    names = [line.split()[0] for line in stdout.splitlines() if line.strip()]
    assert names[:2] == ["first", "second"]
