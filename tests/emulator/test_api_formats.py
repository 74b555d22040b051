"""Patch implementations, the protobuf reader, access reviews, aggregated discovery and odd bodies."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, user
from tests.emulator.test_api_aggregation_admission import METRICS_APISERVICE
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.patching import PatchError, json_patch, merge_patch, strategic_merge_patch
from tests.fakes.kubeapi.protobuf import MAGIC, ProtobufError, decode_object

__all__ = ["admin", "emu", "user"]


def test_merge_patch() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": None}}) == {"a": {"c": [3]}, "d": "x", "e": {}}
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # not mutated
    assert merge_patch(target, {"metadata": {"finalizers": None}}) == {**target, "metadata": {}}


def test_json_patch() -> None:
    doc = {"metadata": {"finalizers": ["a", "b"], "labels": {"x/y": "1"}}}
    out = json_patch(
        doc,
        [
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
            {"op": "replace", "path": "/metadata/labels/x~1y", "value": "2"},
            {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
            {"op": "move", "from": "/metadata/annotations", "path": "/spec"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["b", "c"]},
        ],
    )
    assert out == {"metadata": {"finalizers": ["b", "c"], "labels": {"x/y": "2"}}, "spec": {"x/y": "2"}}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/metadata/finalizers", "value": []}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/spec/nothing"}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "replace", "path": "/metadata/missing", "value": 1}])


def test_strategic_merge_patch() -> None:
    pod: dict[str, Any] = {
        "metadata": {"finalizers": ["a", "b"], "labels": {"k": "v"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "s"},
            ],
            "tolerations": [{"key": "t"}],
        },
    }
    out = strategic_merge_patch(
        pod,
        {
            "metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "v2", "env": [{"name": "B", "value": "2"}]},
                    {"name": "side", "$patch": "delete"},
                ],
                "tolerations": [{"key": "u"}],
            },
        },
    )
    assert out["metadata"]["finalizers"] == ["b", "c"]
    assert out["spec"]["containers"] == [
        {"name": "app", "image": "v2", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    ]
    assert out["spec"]["tolerations"] == [{"key": "u"}]  # no merge key: replaced
    assert strategic_merge_patch(pod, {"metadata": {"finalizers": None}})["metadata"] == {"labels": {"k": "v"}}
    replaced = strategic_merge_patch(pod, {"metadata": {"$patch": "replace", "name": "n"}})
    assert replaced["metadata"] == {"name": "n"}
    ordered = strategic_merge_patch(
        {"metadata": {"finalizers": ["x", "y"]}}, {"metadata": {"$setElementOrder/finalizers": ["y", "x"]}}
    )
    assert ordered["metadata"]["finalizers"] == ["y", "x"]
    assert strategic_merge_patch({"spec": {"a": 1, "b": 2}}, {"spec": {"$retainKeys": ["a"], "a": 3}}) == {
        "spec": {"a": 3}
    }


def test_strategic_merge_patch_over_http(user: Raw) -> None:
    make_ns(user, "smp")
    make_cm(user, "smp", "c", finalizers=["example.com/a", "example.com/b"])
    resp = user.patch(
        "/api/v1/namespaces/smp/configmaps/c",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}},
        ptype="strategic",
    )
    assert resp.status == 200
    assert resp.json["metadata"]["finalizers"] == ["example.com/b"]
    resp = user.patch(
        "/api/v1/namespaces/smp/configmaps/c", [{"op": "test", "path": "/data/a", "value": "zzz"}], ptype="json"
    )
    assert resp.status == 422
    assert resp.json["message"] == "the server rejected our request due to an error in our request"
    resp = user.request("PATCH", "/api/v1/namespaces/smp/configmaps/c", {"data": {}}, content_type="text/plain")
    assert resp.status == 415
    assert user.patch("/api/v1/namespaces/smp/configmaps/missing", {"data": {}}).status == 404


def _field(num: int, payload: bytes) -> bytes:
    return bytes([num << 3 | 2, len(payload)]) + payload


def test_protobuf_reader() -> None:
    meta = _field(1, b"cfg") + _field(3, b"ns1") + _field(11, _field(1, b"app") + _field(2, b"web"))
    data_entry = _field(1, b"k") + _field(2, b"v")
    raw = _field(1, meta) + _field(2, data_entry)
    type_meta = _field(1, b"v1") + _field(2, b"ConfigMap")
    body = MAGIC + _field(1, type_meta) + _field(2, raw)
    assert decode_object(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "ns1", "labels": {"app": "web"}},
        "data": {"k": "v"},
    }
    secret = (
        MAGIC
        + _field(1, _field(1, b"v1") + _field(2, b"Secret"))
        + _field(2, _field(2, _field(1, b"p") + _field(2, b"\x00\x01")))
    )
    assert decode_object(secret)["data"] == {"p": base64.b64encode(b"\x00\x01").decode()}
    with pytest.raises(ProtobufError):
        decode_object(MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment")))
    with pytest.raises(ProtobufError):
        decode_object(b"{}")


def test_access_reviews(emu: Emulator, user: Raw, admin: Raw) -> None:
    emu.knobs.forbid("pods", verbs=("delete",), namespace="prod")
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "prod", "verb": "delete", "resource": "pods"}},
    }
    resp = user.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    assert resp.status == 201
    assert resp.json["status"]["allowed"] is False
    assert (
        admin.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review).json["status"]["allowed"] is True
    )
    review["spec"]["resourceAttributes"]["namespace"] = "dev"
    assert user.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review).json["status"]["allowed"] is True
    who = user.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert who.json["status"]["userInfo"]["username"] == "system:serviceaccount:nsstuck:nsstuck"
    assert user.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status == 405


def test_aggregated_discovery_option() -> None:
    emu = Emulator(clock=FakeClock(), controllers=False, aggregated_discovery=True).start()
    try:
        admin = Raw(emu, emu.admin_token)
        admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE)
        accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        resp = admin.get("/apis", headers={"Accept": accept})
        assert resp.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        items = {i["metadata"]["name"]: i for i in resp.json["items"]}
        assert items["metrics.k8s.io"]["versions"] == [{"version": "v1beta1", "freshness": "Stale"}]
        apps = items["apps"]["versions"][0]
        deploy = next(r for r in apps["resources"] if r["resource"] == "deployments")
        assert deploy["scope"] == "Namespaced"
        assert deploy["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
        assert {s["subresource"] for s in deploy["subresources"]} == {"scale", "status"}
        core = admin.get("/api", headers={"Accept": accept}).json
        assert core["items"][0]["metadata"]["name"] == ""
        # plain Accept still gets the legacy document
        assert admin.get("/apis").json["kind"] == "APIGroupList"
    finally:
        emu.stop()


def test_chunked_request_body(emu: Emulator, user: Raw) -> None:
    import http.client
    import json
    from urllib.parse import urlsplit

    make_ns(user, "chunk")
    parts = urlsplit(emu.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
    body = json.dumps({"metadata": {"name": "c"}, "data": {"x": "y"}}).encode()
    conn.request(
        "POST",
        "/api/v1/namespaces/chunk/configmaps",
        body=iter([body[:10], body[10:]]),
        headers={"Authorization": f"Bearer {emu.user_token}", "Content-Type": "application/json"},
        encode_chunked=True,
    )
    resp = conn.getresponse()
    assert resp.status == 201, resp.read()
    conn.close()
    assert user.get("/api/v1/namespaces/chunk/configmaps/c").json["data"] == {"x": "y"}


def test_server_side_tables(emu: Emulator, user: Raw) -> None:
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    node = {
        "metadata": {"name": "node-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "nodeInfo": {"kubeletVersion": "v1.32.4"}},
    }
    assert user.post("/api/v1/nodes", node).status == 201
    emu.clock.advance(7 * 3600 + 125)  # type: ignore[attr-defined]
    table = user.get("/api/v1/nodes", headers=accept).json
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Status", "Roles", "Age", "Version"]
    assert table["rows"][0]["cells"] == ["node-1", "NotReady", "control-plane", "7h2m", "v1.32.4"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    make_ns(user, "t")
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]}}
    user.post("/api/v1/namespaces/t/pods", pod)
    user.delete("/api/v1/namespaces/t/pods/p")
    row = user.get("/api/v1/namespaces/t/pods/p?includeObject=Object", headers=accept).json["rows"][0]
    assert row["cells"][:5] == ["p", "0/1", "Terminating", 0, "0s"]
    assert row["object"]["kind"] == "Pod"
