"""The namespace controller's per-resource deletion against a recording fake API (no server).

Covers what the emulated built-in types never exercise: resources without ``deletecollection``,
a 405 on DELETECOLLECTION (the operation cache), and the exact sequence of calls.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from tests.fakes.kubeapi.controllers._http import ApiError, KubeHTTP
from tests.fakes.kubeapi.controllers.discovery_client import APIResource, DiscoveryResult
from tests.fakes.kubeapi.controllers.namespace import NamespaceController, _Sync

NOW = datetime(2026, 11, 20, 8, 1, tzinfo=UTC)
NS_PATH = "/api/v1/namespaces/demo"


class RecordingKube(KubeHTTP):
    """Serves one terminating namespace and a few collections; records every call."""

    def __init__(self, collections: dict[str, list[dict[str, Any]]], *, deny_collection: set[str]) -> None:
        super().__init__("http://127.0.0.1:1", "t")
        self.collections = collections
        self.deny_collection = deny_collection
        self.calls: list[tuple[str, str, Any]] = []
        self.namespace: dict[str, Any] = {
            "metadata": {
                "name": "demo",
                "uid": "u1",
                "resourceVersion": "7",
                "deletionTimestamp": "2026-11-20T08:00:00Z",
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Terminating"},
        }

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None, content_type: str = "") -> Any:
        self.calls.append((method, path, body))
        if path == NS_PATH and method == "GET":
            return dict(self.namespace)
        if path == f"{NS_PATH}/status" and method == "PUT":
            self.namespace = {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}
            return self.namespace
        if path == f"{NS_PATH}/finalize" and method == "PUT":
            return {**body, "metadata": {**body["metadata"], "resourceVersion": "9"}}
        if path in self.collections:
            if method == "GET":
                return {"items": list(self.collections[path])}
            if method == "DELETE":
                if path in self.deny_collection:
                    raise ApiError(405, method, path, b"", "")
                deleted = self.collections[path]
                self.collections[path] = []
                return {"items": deleted}
        collection, _, name = path.rpartition("/")
        if method == "DELETE" and collection in self.collections:
            self.collections[collection] = [i for i in self.collections[collection] if i["metadata"]["name"] != name]
            return {"kind": "Status", "status": "Success"}
        raise ApiError(404, method, path, b"", "")


def _res(name: str, verbs: tuple[str, ...]) -> APIResource:
    return APIResource(group="example.com", version="v1", name=name, kind=name.title(), namespaced=True, verbs=verbs)


def _run(kube: RecordingKube, resources: list[APIResource], ctrl: NamespaceController | None = None) -> _Sync:
    ctrl = ctrl or NamespaceController(ordered_deletion=True)
    emu = SimpleNamespace(options={}, clock=SimpleNamespace(now=lambda: NOW))
    sync = _Sync(ctrl, emu, kube, "demo", discovery=DiscoveryResult(resources=resources, failed=None), now=NOW)
    sync.run()
    return sync


def test_list_and_delete_each_item_with_background_propagation() -> None:
    path = "/apis/example.com/v1/namespaces/demo/widgets"
    kube = RecordingKube({path: [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}, deny_collection=set())
    sync = _run(kube, [_res("widgets", ("delete", "get", "list"))])
    deletes = [(m, p, b) for m, p, b in kube.calls if m == "DELETE"]
    assert [(m, p) for m, p, _ in deletes] == [("DELETE", f"{path}/a"), ("DELETE", f"{path}/b")]
    assert all(b["propagationPolicy"] == "Background" for _, _, b in deletes)
    assert kube.calls[-1][1] == f"{NS_PATH}/finalize"
    assert kube.calls[-1][2]["spec"]["finalizers"] == []
    assert sync.changed


def test_405_on_deletecollection_falls_back_and_is_remembered() -> None:
    path = "/apis/example.com/v1/namespaces/demo/gadgets"
    kube = RecordingKube({path: [{"metadata": {"name": "g"}}]}, deny_collection={path})
    ctrl = NamespaceController(ordered_deletion=True)
    res = _res("gadgets", ("delete", "deletecollection", "get", "list"))
    _run(kube, [res], ctrl)
    assert ("DELETE", path) in [(m, p) for m, p, _ in kube.calls]
    assert ("DELETE", f"{path}/g") in [(m, p) for m, p, _ in kube.calls]
    kube.collections[path] = [{"metadata": {"name": "h"}}]
    kube.calls.clear()
    _run(kube, [res], ctrl)
    # the operation cache: no second DELETECOLLECTION attempt
    assert [(m, p) for m, p, _ in kube.calls if m == "DELETE"] == [("DELETE", f"{path}/h")]


def test_resources_without_delete_are_not_touched() -> None:
    path = "/apis/example.com/v1/namespaces/demo/readonly"
    kube = RecordingKube({path: [{"metadata": {"name": "r"}}]}, deny_collection=set())
    _run(kube, [_res("readonly", ("get", "list"))])
    assert all(p != path and not p.startswith(f"{path}/") for _, p, _ in kube.calls)
    assert kube.calls[-1][1] == f"{NS_PATH}/finalize"
