"""The garbage collector: background, foreground and orphan propagation through ownerReferences."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import Api, run_for

from ._scenario_support import new_emulator

CM = "/api/v1/namespaces/gc/configmaps"


@pytest.fixture
def api() -> Iterator[Api]:
    emu = new_emulator()
    api = Api(emu)
    api.namespace("gc")
    emu.settle()
    try:
        yield api
    finally:
        emu.stop()


def _owner(obj: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def _names(api: Api) -> set[str]:
    return {c["metadata"]["name"] for c in api.http.list_items(CM)} - {"kube-root-ca.crt"}


def test_background_deletion_removes_dependents_after_the_owner(api: Api) -> None:
    parent = api.configmap("gc", "parent")
    child = api.configmap("gc", "child", ownerReferences=[_owner(parent)])
    api.configmap("gc", "grandchild", ownerReferences=[_owner(child)])
    api.delete(f"{CM}/parent")  # default propagation for configmaps: background
    assert _names(api) == {"child", "grandchild"}
    api.emu.settle()
    assert _names(api) == set()


def test_foreground_deletion_waits_for_blocking_dependents(api: Api) -> None:
    parent = api.configmap("gc", "parent")
    api.configmap("gc", "blocker", ownerReferences=[_owner(parent, block=True)], finalizers=["example.com/slow"])
    api.configmap("gc", "plain", ownerReferences=[_owner(parent)])
    api.delete(f"{CM}/parent", propagationPolicy="Foreground")
    api.emu.settle()
    parent_now = api.http.get(f"{CM}/parent")
    assert parent_now["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert parent_now["metadata"]["deletionTimestamp"]
    blocker = api.http.get(f"{CM}/blocker")
    assert blocker["metadata"]["deletionTimestamp"]  # the GC deleted it; its own finalizer holds it
    assert "plain" not in _names(api)
    api.http.patch(f"{CM}/blocker", {"metadata": {"finalizers": None}})
    api.emu.settle()
    assert _names(api) == set()


def test_orphan_deletion_strips_owner_references(api: Api) -> None:
    parent = api.configmap("gc", "parent")
    api.configmap("gc", "child", ownerReferences=[_owner(parent)])
    api.delete(f"{CM}/parent", propagationPolicy="Orphan")
    assert api.http.get(f"{CM}/parent")["metadata"]["finalizers"] == ["orphan"]
    api.emu.settle()
    assert _names(api) == {"child"}
    assert "ownerReferences" not in api.http.get(f"{CM}/child")["metadata"]


def test_a_live_owner_keeps_a_dependent_and_dangling_refs_are_dropped(api: Api) -> None:
    alive = api.configmap("gc", "alive")
    dead = api.configmap("gc", "dead")
    api.configmap("gc", "shared", ownerReferences=[_owner(alive), _owner(dead)])
    api.delete(f"{CM}/dead")
    api.emu.settle()
    shared = api.http.get(f"{CM}/shared")
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["alive"]


def test_owner_with_another_uid_counts_as_gone(api: Api) -> None:
    stale = {"apiVersion": "v1", "kind": "ConfigMap", "name": "reborn", "uid": "00000000-0000-0000-0000-000000000001"}
    api.configmap("gc", "reborn")
    api.configmap("gc", "orphaned", ownerReferences=[stale])
    api.emu.settle()
    assert _names(api) == {"reborn"}


def test_owner_of_an_unknown_kind_keeps_the_dependent(api: Api) -> None:
    workspace = {
        "apiVersion": "tenant.kubesphere.io/v1alpha1",
        "kind": "Workspace",
        "name": "system-workspace",
        "uid": "d4310acd-1fdc-11ea-a370-a2c490b9ae47",
    }
    api.configmap("gc", "kept", ownerReferences=[workspace])
    api.emu.settle()
    assert _names(api) == {"kept"}


def test_deployment_cascade_reaches_the_pods(api: Api) -> None:
    emu: Emulator = api.emu
    api.node("node-1", "192.168.0.41")
    api.deployment("gc", "web", node="node-1", replicas=2, grace=0)
    run_for(emu, 10, step=5)
    assert len(api.http.list_items("/api/v1/namespaces/gc/pods")) == 2
    api.delete("/apis/apps/v1/namespaces/gc/deployments/web")
    run_for(emu, 10, step=5)
    assert api.http.list_items("/apis/apps/v1/namespaces/gc/replicasets") == []
    assert api.http.list_items("/api/v1/namespaces/gc/pods") == []
