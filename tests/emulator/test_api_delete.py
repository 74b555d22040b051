"""Generic deletion (section 3): finalizers, deletionTimestamp, pods, custom resources, CRDs."""

from __future__ import annotations

from typing import Any

from tests.emulator._api_support import KIALI_CRD, Raw, admin, emu, make_cm, make_ns, status_body, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

KIALIS = "/apis/kiali.io/v1alpha1/namespaces/istio/kialis"


def _pod(name: str, node: str = "", grace: int | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


def _install_kiali(raw: Raw) -> None:
    assert raw.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", KIALI_CRD).status == 201
    make_ns(raw, "istio")


def test_configmap_immediate_delete_returns_status(user: Raw) -> None:
    make_ns(user, "d")
    cm = make_cm(user, "d", "c")
    resp = user.delete("/api/v1/namespaces/d/configmaps/c")
    assert resp.status == 200
    assert resp.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "c", "kind": "configmaps", "uid": cm["metadata"]["uid"]},
    }
    assert user.delete("/api/v1/namespaces/d/configmaps/c").status == 404


def test_return_deleted_object_types_answer_with_the_object(user: Raw) -> None:
    make_ns(user, "rdo")
    user.post("/api/v1/namespaces/rdo/serviceaccounts", {"metadata": {"name": "sa"}})
    resp = user.delete("/api/v1/namespaces/rdo/serviceaccounts/sa")
    assert resp.status == 200
    assert resp.json["kind"] == "ServiceAccount"


def test_object_with_finalizers_is_marked_not_removed(emu: Emulator, user: Raw) -> None:
    make_ns(user, "f")
    make_cm(user, "f", "c", finalizers=["example.com/hold"])
    emu.clock.advance(5)  # type: ignore[attr-defined]
    resp = user.delete("/api/v1/namespaces/f/configmaps/c")
    assert resp.status == 200
    meta = resp.json["metadata"]
    assert resp.json["kind"] == "ConfigMap"
    assert meta["deletionTimestamp"] == "2026-11-20T08:00:05Z"
    assert meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == ["example.com/hold"]
    # a second delete changes nothing (same resourceVersion)
    emu.clock.advance(5)  # type: ignore[attr-defined]
    again = user.delete("/api/v1/namespaces/f/configmaps/c")
    assert again.status == 200
    assert again.json["metadata"]["deletionTimestamp"] == "2026-11-20T08:00:05Z"
    assert again.json["metadata"]["resourceVersion"] == meta["resourceVersion"]
    # orphanDependents=false on a not-yet-removed object is the one 202
    assert user.delete("/api/v1/namespaces/f/configmaps/c", {"orphanDependents": False}).status == 202


def test_no_new_finalizers_while_deleting_and_timestamp_is_immutable(user: Raw) -> None:
    make_ns(user, "imm")
    make_cm(user, "imm", "c", finalizers=["example.com/a"])
    deleting = user.delete("/api/v1/namespaces/imm/configmaps/c").json
    resp = user.patch(
        "/api/v1/namespaces/imm/configmaps/c", {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}
    )
    assert resp.status == 422
    assert resp.json["message"] == (
        'ConfigMap "c" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is '
        "being "
        'deleted, found new finalizers []string{"example.com/b"}'
    )
    assert resp.json["details"] == {
        "name": "c",
        "kind": "ConfigMap",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: no new finalizers can be added if the object is being deleted, found new "
                'finalizers []string{"example.com/b"}',
                "field": "metadata.finalizers",
            }
        ],
    }
    # removing or changing deletionTimestamp is silently undone
    resp = user.patch(
        "/api/v1/namespaces/imm/configmaps/c", {"metadata": {"deletionTimestamp": None}, "data": {"k": "v"}}
    )
    assert resp.status == 200
    assert resp.json["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    resp = user.patch(
        "/api/v1/namespaces/imm/configmaps/c", {"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}
    )
    assert resp.json["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    # setting it on an object that is not being deleted is 422 field is immutable
    make_cm(user, "imm", "live")
    resp = user.patch(
        "/api/v1/namespaces/imm/configmaps/live", {"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}
    )
    assert resp.status == 422
    assert resp.json["message"] == (
        'ConfigMap "live" is invalid: metadata.deletionTimestamp: Invalid value: 2030-01-01 00:00:00 +0000 UTC: '
        "field is immutable"
    )
    # removing the last finalizer removes the object; the response is the updated object
    resp = user.patch("/api/v1/namespaces/imm/configmaps/c", {"metadata": {"finalizers": None}})
    assert resp.status == 200
    assert resp.json["kind"] == "ConfigMap"
    assert "finalizers" not in resp.json["metadata"]
    assert user.get("/api/v1/namespaces/imm/configmaps/c").status == 404


def test_builtin_finalizer_names_are_validated(user: Raw) -> None:
    make_ns(user, "names")
    resp = user.post(
        "/api/v1/namespaces/names/configmaps", {"metadata": {"name": "c", "finalizers": ["kubernetes", "bad"]}}
    )
    assert resp.status == 422
    assert resp.json["message"] == (
        'ConfigMap "c" is invalid: metadata.finalizers[1]: Invalid value: "bad": name is neither a standard finalizer '
        "name nor is it fully qualified"
    )
    resp = user.post(
        "/api/v1/namespaces/names/configmaps",
        {"metadata": {"name": "c", "finalizers": ["orphan", "foregroundDeletion"]}},
    )
    assert resp.status == 422
    assert "finalizer orphan and foregroundDeletion cannot be both set" in resp.json["message"]
    ok = user.post(
        "/api/v1/namespaces/names/configmaps", {"metadata": {"name": "c", "finalizers": ["example.com/x", "orphan"]}}
    )
    assert ok.status == 201
    assert ok.header_list("Warning") == []


def test_custom_resource_finalizer_names_only_warn(user: Raw) -> None:
    _install_kiali(user)
    resp = user.post(
        KIALIS,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "k", "finalizers": ["kiali.io/finalizer"]},
        },
    )
    assert resp.status == 201
    assert resp.header_list("Warning") == []
    resp = user.post(
        KIALIS,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "k2", "finalizers": ["finalizer.kiali.io", "plain"]},
        },
    )
    assert resp.status == 201
    assert resp.header_list("Warning") == [
        '299 - "metadata.finalizers: \\"finalizer.kiali.io\\": prefer a domain-qualified finalizer name including '
        "a path "
        '(/) to avoid accidental conflicts with other finalizer writers"',
        '299 - "metadata.finalizers: \\"plain\\": prefer a domain-qualified finalizer name to avoid accidental '
        "conflicts "
        'with other finalizer writers"',
    ]
    # on update only newly added names warn
    resp = user.patch(f"{KIALIS}/k2", {"metadata": {"finalizers": ["finalizer.kiali.io", "plain", "zzz"]}})
    assert resp.status == 200
    assert resp.header_list("Warning") == [
        '299 - "metadata.finalizers: \\"zzz\\": prefer a domain-qualified finalizer name to avoid accidental '
        'conflicts with other finalizer writers"'
    ]


def test_custom_resource_delete_bodies(user: Raw) -> None:
    _install_kiali(user)
    k = user.post(KIALIS, {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": {"name": "plain"}}).json
    resp = user.delete(f"{KIALIS}/plain")
    assert resp.status == 200
    assert resp.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "plain", "group": "kiali.io", "kind": "kialis", "uid": k["metadata"]["uid"]},
    }
    resp = user.get(f"{KIALIS}/plain")
    assert resp.json == status_body(
        404, "NotFound", 'kialis.kiali.io "plain" not found', {"name": "plain", "group": "kiali.io", "kind": "kialis"}
    )
    user.post(
        KIALIS,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "held", "finalizers": ["kiali.io/finalizer"]},
        },
    )
    resp = user.delete(f"{KIALIS}/held")
    assert resp.status == 200
    assert resp.json["kind"] == "Kiali"
    assert resp.json["metadata"]["deletionTimestamp"]
    resp = user.delete(f"{KIALIS}/held", {"preconditions": {"uid": "other"}})
    assert resp.status == 409
    assert resp.json["message"].startswith(
        'Operation cannot be fulfilled on Kiali.kiali.io "held": the UID in the precondition (other) does not match '
        "the UID in record ("
    )
    assert resp.json["message"].endswith("). The object might have been deleted and then recreated")
    assert resp.json["details"] == {"name": "held", "group": "kiali.io", "kind": "Kiali"}
    # custom resources need a resourceVersion for a PUT
    obj = user.get(f"{KIALIS}/held").json
    del obj["metadata"]["resourceVersion"]
    resp = user.put(f"{KIALIS}/held", obj)
    assert resp.status == 422
    assert resp.json["message"] == (
        'kialis.kiali.io "held" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update'
    )
    # strategic merge patch is not for custom resources
    assert user.patch(f"{KIALIS}/held", {"metadata": {"finalizers": None}}, ptype="strategic").status == 415
    assert user.patch(f"{KIALIS}/held", {"metadata": {"finalizers": None}}).status == 200
    assert user.get(f"{KIALIS}/held").status == 404


def test_resource_version_precondition_on_delete(user: Raw) -> None:
    make_ns(user, "rvp")
    cm = make_cm(user, "rvp", "c")
    resp = user.delete("/api/v1/namespaces/rvp/configmaps/c", {"preconditions": {"resourceVersion": "5"}})
    assert resp.status == 409
    assert resp.json["message"] == (
        'Operation cannot be fulfilled on ConfigMap "c": the ResourceVersion in the precondition (5) does not match '
        "the "
        f"ResourceVersion in record ({cm['metadata']['resourceVersion']}). The object might have been modified"
    )
    resp = user.delete("/api/v1/namespaces/rvp/configmaps/c", {"propagationPolicy": "Sideways"})
    assert resp.status == 422
    assert resp.json["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: '
        '"Foreground", "Background", "Orphan"'
    )


def test_foreground_delete_adds_the_gc_finalizer(user: Raw) -> None:
    make_ns(user, "gc")
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    created = user.post("/apis/apps/v1/namespaces/gc/deployments", dep).json
    assert created["metadata"]["generation"] == 1
    resp = user.delete("/apis/apps/v1/namespaces/gc/deployments/d", {"propagationPolicy": "Foreground"})
    assert resp.status == 200
    assert resp.json["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert resp.json["metadata"]["generation"] == 2
    assert resp.json["metadata"]["deletionGracePeriodSeconds"] == 0


def test_pod_graceful_deletion(emu: Emulator, user: Raw) -> None:
    make_ns(user, "pods")
    user.post("/api/v1/namespaces/pods/pods", _pod("bound", node="node-1", grace=30))
    resp = user.delete("/api/v1/namespaces/pods/pods/bound")
    assert resp.status == 200
    meta = resp.json["metadata"]
    assert meta["deletionTimestamp"] == "2026-11-20T08:00:30Z"
    assert meta["deletionGracePeriodSeconds"] == 30
    # pending graceful: a second delete returns the pod unchanged
    again = user.delete("/api/v1/namespaces/pods/pods/bound")
    assert again.json["metadata"]["resourceVersion"] == meta["resourceVersion"]
    # a shorter grace period moves the deletionTimestamp earlier
    shorter = user.delete("/api/v1/namespaces/pods/pods/bound", {"gracePeriodSeconds": 10})
    assert shorter.json["metadata"]["deletionTimestamp"] == "2026-11-20T08:00:10Z"
    assert shorter.json["metadata"]["deletionGracePeriodSeconds"] == 10
    # the kubelet's grace-0 delete removes it; pods return the deleted object
    final = user.delete("/api/v1/namespaces/pods/pods/bound", {"gracePeriodSeconds": 0})
    assert final.status == 200
    assert final.json["kind"] == "Pod"
    assert user.get("/api/v1/namespaces/pods/pods/bound").status == 404


def test_unscheduled_or_finished_pods_go_at_once(user: Raw) -> None:
    make_ns(user, "pods2")
    user.post("/api/v1/namespaces/pods2/pods", _pod("unscheduled"))
    assert user.delete("/api/v1/namespaces/pods2/pods/unscheduled").status == 200
    assert user.get("/api/v1/namespaces/pods2/pods/unscheduled").status == 404
    user.post("/api/v1/namespaces/pods2/pods", _pod("done", node="node-1"))
    pod = user.get("/api/v1/namespaces/pods2/pods/done").json
    pod["status"] = {"phase": "Succeeded"}
    assert user.put("/api/v1/namespaces/pods2/pods/done/status", pod).status == 200
    user.delete("/api/v1/namespaces/pods2/pods/done")
    assert user.get("/api/v1/namespaces/pods2/pods/done").status == 404


def test_pod_with_finalizer_survives_grace_zero(user: Raw) -> None:
    make_ns(user, "jobs")
    user.post("/api/v1/namespaces/jobs/pods", _pod("p", node="n", finalizers=["batch.kubernetes.io/job-tracking"]))
    user.delete("/api/v1/namespaces/jobs/pods/p", {"gracePeriodSeconds": 0})
    pod = user.get("/api/v1/namespaces/jobs/pods/p").json
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0
    assert user.patch("/api/v1/namespaces/jobs/pods/p", {"metadata": {"finalizers": None}}).status == 200
    assert user.get("/api/v1/namespaces/jobs/pods/p").status == 404


def test_pod_status_is_ignored_on_create_and_main_update(user: Raw) -> None:
    make_ns(user, "ps")
    pod = _pod("p", node="n")
    pod["status"] = {"phase": "Running"}
    created = user.post("/api/v1/namespaces/ps/pods", pod).json
    assert created["status"]["phase"] == "Pending"
    created["status"] = {"phase": "Failed"}
    assert user.put("/api/v1/namespaces/ps/pods/p", created).json["status"]["phase"] == "Pending"
    assert user.put("/api/v1/namespaces/ps/pods/p/status", created).json["status"]["phase"] == "Failed"
    resp = user.post("/api/v1/namespaces/ps/pods", {"metadata": {"name": "empty"}, "spec": {}})
    assert resp.status == 422
    assert resp.json["message"] == 'Pod "empty" is invalid: spec.containers: Required value'


def test_pvc_protection_finalizer_is_added(user: Raw) -> None:
    make_ns(user, "vol")
    pvc = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    created = user.post("/api/v1/namespaces/vol/persistentvolumeclaims", pvc).json
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    resp = user.delete("/api/v1/namespaces/vol/persistentvolumeclaims/data")
    assert resp.json["kind"] == "PersistentVolumeClaim"
    assert resp.json["metadata"]["deletionTimestamp"]


def test_delete_collection(user: Raw) -> None:
    make_ns(user, "coll")
    make_cm(user, "coll", "a", labels={"x": "1"})
    make_cm(user, "coll", "b", labels={"x": "2"})
    make_cm(user, "coll", "held", labels={"x": "1"}, finalizers=["example.com/h"])
    resp = user.delete("/api/v1/namespaces/coll/configmaps?labelSelector=x%3D1", {"propagationPolicy": "Background"})
    assert resp.status == 200
    assert resp.json["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in resp.json["items"]) == ["a", "held"]
    left = user.get("/api/v1/namespaces/coll/configmaps").json["items"]
    assert [(i["metadata"]["name"], bool(i["metadata"].get("deletionTimestamp"))) for i in left] == [
        ("b", False),
        ("held", True),
    ]


def test_crd_lifecycle(user: Raw) -> None:
    _install_kiali(user)
    crd = user.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io").json
    conds = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conds["Established"]["status"] == "True"
    assert crd["status"]["acceptedNames"]["kind"] == "Kiali"
    assert crd["status"]["storedVersions"] == ["v1alpha1"]
    disc = user.get("/apis/kiali.io/v1alpha1").json
    assert disc["resources"][0]["name"] == "kialis"
    assert disc["resources"][1] == {
        "name": "kialis/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Kiali",
        "verbs": ["get", "patch", "update"],
    }
    assert "kiali.io" in [g["name"] for g in user.get("/apis").json["groups"]]
    assert user.get("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.kiali.io").status == 200
    user.post(
        KIALIS,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "k", "finalizers": ["kiali.io/finalizer"]},
        },
    )

    resp = user.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io")
    assert resp.status == 200
    crd = resp.json
    assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    term = next(c for c in crd["status"]["conditions"] if c["type"] == "Terminating")
    assert term["status"] == "True"
    assert term["reason"] == "InstanceDeletionPending"
    assert term["message"] == "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
    # instances stay served while the CRD terminates, but no new ones can be created
    assert user.get(f"{KIALIS}/k").status == 200
    resp = user.post(KIALIS, {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": {"name": "new"}})
    assert resp.status == 405
    assert resp.json["message"] == 'create is not supported on resources of kind "kialis.kiali.io"'
    # the CRD finalizer controller removes its finalizer through /status once instances are gone
    crd["metadata"]["finalizers"] = []
    resp = user.put("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io/status", crd)
    assert resp.status == 200
    assert user.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io").status == 404
    assert user.get("/apis/kiali.io/v1alpha1").status == 404
    assert user.get(f"{KIALIS}/k").status == 404
    assert "kiali.io" not in [g["name"] for g in user.get("/apis").json["groups"]]


def test_crd_status_update_keeps_its_cleanup_finalizer(user: Raw) -> None:
    _install_kiali(user)
    crd = user.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io").json
    term = next(c for c in crd["status"]["conditions"] if c["type"] == "Terminating")
    term["reason"] = "InstanceDeletionInProgress"
    term["message"] = "CustomResource deletion is in progress"
    resp = user.put("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io/status", crd)
    assert resp.status == 200, resp.raw
    assert resp.json["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
