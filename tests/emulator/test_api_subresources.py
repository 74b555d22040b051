"""Subresources other than status/finalize, create-on-update, metadata normalisation, and the
Python client's watch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, watch

from tests.emulator._api_support import Raw, admin, emu, kubectl, make_cm, make_ns, user
from tests.fakes.kubeapi import Emulator, Journaled
from tests.fakes.kubeapi.pytest_plugin import make_api_client

__all__ = ["admin", "emu", "user"]


def _pod(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def test_binding_and_eviction(user: Raw) -> None:
    make_ns(user, "sched")
    user.post("/api/v1/namespaces/sched/pods", _pod("p"))
    resp = user.post(
        "/api/v1/namespaces/sched/pods/p/binding", {"apiVersion": "v1", "kind": "Binding", "target": {"name": "node-a"}}
    )
    assert resp.status == 201
    assert resp.json["status"] == "Success"
    assert user.get("/api/v1/namespaces/sched/pods/p").json["spec"]["nodeName"] == "node-a"
    again = user.post("/api/v1/namespaces/sched/pods/p/binding", {"target": {"name": "node-b"}})
    assert again.status == 409
    assert (
        again.json["message"] == 'Operation cannot be fulfilled on pods "p": pod p is already assigned to node "node-a"'
    )
    resp = user.post(
        "/api/v1/namespaces/sched/pods/p/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}},
    )
    assert resp.status == 201
    pod = user.get("/api/v1/namespaces/sched/pods/p").json
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30


def test_service_account_token_is_a_new_identity(emu: Emulator, user: Raw) -> None:
    make_ns(user, "ci")
    user.post("/api/v1/namespaces/ci/serviceaccounts", {"metadata": {"name": "bot"}})
    resp = user.post("/api/v1/namespaces/ci/serviceaccounts/bot/token", {"spec": {"expirationSeconds": 600}})
    assert resp.status == 201
    token = resp.json["status"]["token"]
    assert resp.json["status"]["expirationTimestamp"] == "2026-11-20T08:10:00Z"
    who = Raw(emu, token).post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    assert who.json["status"]["userInfo"]["username"] == "system:serviceaccount:ci:bot"


def test_endpoints_are_created_on_update(user: Raw) -> None:
    make_ns(user, "ep")
    body = {"metadata": {"name": "svc"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]}
    resp = user.put("/api/v1/namespaces/ep/endpoints/svc", body)
    assert resp.status == 201
    assert user.put("/api/v1/namespaces/ep/configmaps/nope", {"metadata": {"name": "nope"}}).status == 404


def test_emptied_metadata_fields_disappear(user: Raw) -> None:
    make_ns(user, "norm")
    make_cm(user, "norm", "c", labels={"a": "b"}, annotations={"x": "y"})
    resp = user.patch(
        "/api/v1/namespaces/norm/configmaps/c", {"metadata": {"labels": {"a": None}, "annotations": {"x": None}}}
    )
    assert "labels" not in resp.json["metadata"]
    assert "annotations" not in resp.json["metadata"]


def test_python_client_watch(emu: Emulator, user: Raw) -> None:
    make_ns(user, "pw")
    api = make_api_client(emu)
    try:
        core = client.CoreV1Api(api)
        rv = core.list_namespaced_config_map("pw").metadata.resource_version
        make_cm(user, "pw", "one")
        user.delete("/api/v1/namespaces/pw/configmaps/one")
        seen = [
            (ev["type"], ev["object"].metadata.name)
            for ev in watch.Watch().stream(
                core.list_namespaced_config_map, "pw", resource_version=rv, timeout_seconds=1
            )
        ]
        assert seen == [("ADDED", "one"), ("DELETED", "one")]
    finally:
        api.close()


def test_kubectl_auth_can_i_and_whoami(emu: Emulator, tmp_path: Path) -> None:
    kc = emu.write_kubeconfig(tmp_path / "kc")
    emu.knobs.forbid("namespaces", verbs=("delete",))
    out = kubectl(kc, "auth", "can-i", "delete", "namespaces")
    assert (out.returncode, out.stdout.strip()) == (1, "no")
    out = kubectl(kc, "auth", "can-i", "list", "pods", "-n", "default")
    assert (out.returncode, out.stdout.strip()) == (0, "yes")
    out = kubectl(kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert out.stdout == "system:serviceaccount:nsstuck:nsstuck"


def test_metadata_client_media_type(user: Raw) -> None:
    make_ns(user, "meta")
    make_cm(user, "meta", "c", finalizers=["example.com/x"])
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    lst = user.get("/api/v1/namespaces/meta/configmaps", headers={"Accept": accept}).json
    assert lst["kind"] == "PartialObjectMetadataList"
    assert lst["items"][0]["kind"] == "PartialObjectMetadata"
    assert lst["items"][0]["metadata"]["finalizers"] == ["example.com/x"]
    assert "data" not in lst["items"][0]
    one = user.get(
        "/api/v1/namespaces/meta/configmaps/c",
        headers={"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
    )
    assert one.json["kind"] == "PartialObjectMetadata"


def test_metadata_answers_to_writes_and_the_request_journal(emu: Emulator, user: Raw) -> None:
    # as the API server's transformResponseObject: a PATCH (dry run or not) answers with metadata only
    make_ns(user, "meta")
    make_cm(user, "meta", "c", finalizers=["example.com/x", "example.com/y"])
    emu.journal.clear()
    only = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
    patch = [{"op": "remove", "path": "/metadata/finalizers/0"}]
    for query in ("?dryRun=All", ""):
        answer = user.patch(f"/api/v1/namespaces/meta/configmaps/c{query}", patch, "json", headers=only).json
        assert answer["kind"] == "PartialObjectMetadata"
        assert "data" not in answer
    assert answer["metadata"]["finalizers"] == ["example.com/y"]
    user.get("/api/v1/namespaces/meta/configmaps/c")
    journal = emu.journal.entries()
    assert [(e.method, e.path, e.query, e.metadata_only) for e in journal] == [
        ("PATCH", "/api/v1/namespaces/meta/configmaps/c", "dryRun=All", True),
        ("PATCH", "/api/v1/namespaces/meta/configmaps/c", "", True),
        ("GET", "/api/v1/namespaces/meta/configmaps/c", "", False),
    ]
    assert journal[2].accept == "application/json"
    # client-go's metadata client falls back to the whole object: that is not metadata only
    fallback = Journaled(
        "GET", "/x", "", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    )
    assert not fallback.metadata_only


def test_scale_subresource(user: Raw) -> None:
    make_ns(user, "sc")
    dep = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    user.post("/apis/apps/v1/namespaces/sc/deployments", dep)
    scale = user.get("/apis/apps/v1/namespaces/sc/deployments/web/scale").json
    assert scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"]["selector"] == "app=web"
    resp = user.patch("/apis/apps/v1/namespaces/sc/deployments/web/scale", {"spec": {"replicas": 4}})
    assert resp.json["spec"] == {"replicas": 4}
    got = user.get("/apis/apps/v1/namespaces/sc/deployments/web").json
    assert got["spec"]["replicas"] == 4
    assert got["metadata"]["generation"] == 2


def test_command_line_entry_point(tmp_path: Path) -> None:
    import signal
    import subprocess

    from tests._python import PYTHON, assert_no_resource_warning

    kc = tmp_path / "kc"
    with subprocess.Popen(
        [*PYTHON, "-m", "tests.fakes.kubeapi", "--fake-clock", "--no-controllers", "--kubeconfig", str(kc)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            url_line = proc.stdout.readline().strip()
            kc_line = proc.stdout.readline().strip()
            assert url_line.startswith("URL: http://127.0.0.1:")
            assert kc_line == f"KUBECONFIG: {kc}"
            out = kubectl(kc, "get", "ns", "default", "-o", "jsonpath={.status.phase}")
            assert out.stdout == "Active", out.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert_no_resource_warning(stderr, "python -m tests.fakes.kubeapi")
