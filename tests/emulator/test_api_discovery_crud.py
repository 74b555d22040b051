"""Discovery documents, CRUD, selectors, optimistic concurrency and Status error bodies."""

from __future__ import annotations

import time

import pytest

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, status_body, user
from tests.fakes.kubeapi import Emulator, FakeClock

__all__ = ["admin", "emu", "user"]


@pytest.mark.timing
def test_starts_fast_and_stops() -> None:
    t0 = time.monotonic()
    e = Emulator(clock=FakeClock(), controllers=False).start()
    try:
        assert time.monotonic() - t0 < 1.0
        assert e.url.startswith("http://127.0.0.1:")
        assert e.https_url.startswith("https://127.0.0.1:")
    finally:
        e.stop()


def test_legacy_discovery_documents(emu: Emulator, user: Raw) -> None:
    api = user.get("/api").json
    assert api["kind"] == "APIVersions"
    assert api["versions"] == ["v1"]
    assert api["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"

    core = user.get("/api/v1").json
    assert core["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["namespaces"] == {
        "name": "namespaces",
        "singularName": "namespace",
        "namespaced": False,
        "kind": "Namespace",
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        "shortNames": ["ns"],
    }
    assert by_name["namespaces/finalize"]["verbs"] == ["update"]
    assert by_name["namespaces/finalize"]["singularName"] == ""
    assert by_name["namespaces/status"]["verbs"] == ["get", "patch", "update"]
    assert "deletecollection" in by_name["pods"]["verbs"]
    assert by_name["bindings"]["verbs"] == ["create"]

    groups = user.get("/apis").json
    names = [g["name"] for g in groups["groups"]]
    assert names[:2] == ["apiregistration.k8s.io", "apps"]
    for wanted in (
        "batch",
        "discovery.k8s.io",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "coordination.k8s.io",
        "policy",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
    ):
        assert wanted in names
    apps = user.get("/apis/apps").json
    assert apps["kind"] == "APIGroup"
    assert apps["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    apps_v1 = user.get("/apis/apps/v1").json
    assert {r["name"] for r in apps_v1["resources"]} >= {"deployments", "statefulsets", "daemonsets", "replicasets"}
    assert user.get("/apis/nope.example.com/v1").status == 404


def test_builtin_groups_have_local_apiservices(user: Raw) -> None:
    svc = user.get("/apis/apiregistration.k8s.io/v1/apiservices/v1.apps").json
    assert "service" not in svc["spec"]
    (cond,) = svc["status"]["conditions"]
    assert cond["type"] == "Available"
    assert cond["status"] == "True"
    assert cond["reason"] == "Local"
    assert cond["message"] == "Local APIServices are always available"
    assert user.get("/apis/apiregistration.k8s.io/v1/apiservices/v1.").status == 200


def test_create_get_list_update(user: Raw) -> None:
    make_ns(user, "team")
    cm = make_cm(user, "team", "one", labels={"app": "x"})
    assert cm["metadata"]["uid"]
    assert cm["metadata"]["creationTimestamp"] == "2026-11-20T08:00:00Z"
    rv1 = int(cm["metadata"]["resourceVersion"])
    make_cm(user, "team", "two", labels={"app": "y"})
    got = user.get("/api/v1/namespaces/team/configmaps/one").json
    assert got["kind"] == "ConfigMap"
    assert got["apiVersion"] == "v1"
    lst = user.get("/api/v1/namespaces/team/configmaps").json
    assert lst["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in lst["items"]] == ["one", "two"]
    assert "kind" not in lst["items"][0]  # built-in list items carry no TypeMeta
    assert int(lst["metadata"]["resourceVersion"]) > rv1

    sel = user.get("/api/v1/namespaces/team/configmaps?labelSelector=app%3Dy").json
    assert [i["metadata"]["name"] for i in sel["items"]] == ["two"]
    sel = user.get("/api/v1/namespaces/team/configmaps?labelSelector=app%20in%20(x,z)").json
    assert [i["metadata"]["name"] for i in sel["items"]] == ["one"]
    sel = user.get("/api/v1/configmaps?fieldSelector=metadata.name%3Dtwo").json
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in sel["items"]] == [("team", "two")]
    sel = user.get("/api/v1/namespaces/team/configmaps?fieldSelector=metadata.name!%3Dtwo").json
    assert [i["metadata"]["name"] for i in sel["items"]] == ["one"]

    got["data"] = {"a": "changed"}
    upd = user.put("/api/v1/namespaces/team/configmaps/one", got)
    assert upd.status == 200
    assert int(upd.json["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    # a no-op update keeps the resourceVersion
    same = user.put("/api/v1/namespaces/team/configmaps/one", upd.json)
    assert same.json["metadata"]["resourceVersion"] == upd.json["metadata"]["resourceVersion"]


def test_pagination(user: Raw) -> None:
    make_ns(user, "many")
    for i in range(5):
        make_cm(user, "many", f"cm-{i}")
    first = user.get("/api/v1/namespaces/many/configmaps?limit=2").json
    assert [i["metadata"]["name"] for i in first["items"]] == ["cm-0", "cm-1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    second = user.get(f"/api/v1/namespaces/many/configmaps?limit=2&continue={token}").json
    assert [i["metadata"]["name"] for i in second["items"]] == ["cm-2", "cm-3"]


def test_field_selectors_for_pods(user: Raw) -> None:
    make_ns(user, "p")
    for name, node in (("a", "n1"), ("b", "n2")):
        pod = {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}
        assert user.post("/api/v1/namespaces/p/pods", pod).status == 201
    out = user.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn2").json
    assert [i["metadata"]["name"] for i in out["items"]] == ["b"]
    out = user.get("/api/v1/namespaces/p/pods?fieldSelector=status.phase%3DPending,spec.nodeName%3Dn1").json
    assert [i["metadata"]["name"] for i in out["items"]] == ["a"]
    bad = user.get("/api/v1/namespaces/p/pods?fieldSelector=spec.bogus%3Dx")
    assert bad.status == 400
    assert bad.json["message"] == "field label not supported: spec.bogus"


def test_not_found_and_already_exists_bodies(user: Raw) -> None:
    resp = user.get("/api/v1/namespaces/x")
    assert resp.status == 404
    assert resp.json == status_body(404, "NotFound", 'namespaces "x" not found', {"name": "x", "kind": "namespaces"})
    make_ns(user, "dup")
    resp = user.post("/api/v1/namespaces", {"metadata": {"name": "dup"}})
    assert resp.status == 409
    assert resp.json == status_body(
        409, "AlreadyExists", 'namespaces "dup" already exists', {"name": "dup", "kind": "namespaces"}
    )
    resp = user.get("/apis/apps/v1/namespaces/dup/deployments/nope")
    assert resp.json["message"] == 'deployments.apps "nope" not found'
    assert resp.json["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}
    assert user.get("/api/v1/nonsense").json == status_body(
        404, "NotFound", "the server could not find the requested resource", {}
    )


def test_create_in_missing_namespace_is_404(user: Raw) -> None:
    resp = user.post("/api/v1/namespaces/ghost/configmaps", {"metadata": {"name": "c"}})
    assert resp.status == 404
    assert resp.json["message"] == 'namespaces "ghost" not found'


def test_stale_resource_version_conflicts(user: Raw) -> None:
    make_ns(user, "occ")
    cm = make_cm(user, "occ", "c")
    user.put("/api/v1/namespaces/occ/configmaps/c", {**cm, "data": {"x": "1"}})
    stale = user.put("/api/v1/namespaces/occ/configmaps/c", {**cm, "data": {"x": "2"}})
    assert stale.status == 409
    assert stale.json == status_body(
        409,
        "Conflict",
        'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes '
        "to the latest version and try again",
        {"name": "c", "kind": "configmaps"},
    )
    # a merge patch carrying a stale resourceVersion also conflicts
    resp = user.patch(
        "/api/v1/namespaces/occ/configmaps/c", {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]}}
    )
    assert resp.status == 409
    # without resourceVersion a built-in update is unconditional
    body = {"metadata": {"name": "c"}, "data": {"x": "3"}}
    assert user.put("/api/v1/namespaces/occ/configmaps/c", body).status == 200
    # UID mismatch in the body
    body = {"metadata": {"name": "c", "uid": "not-it"}, "data": {"x": "4"}}
    resp = user.put("/api/v1/namespaces/occ/configmaps/c", body)
    assert resp.status == 409
    assert "Precondition failed: UID in precondition: not-it, UID in object meta: " in resp.json["message"]


def test_update_name_mismatch_is_bad_request(user: Raw) -> None:
    make_ns(user, "mm")
    make_cm(user, "mm", "c")
    resp = user.put("/api/v1/namespaces/mm/configmaps/c", {"metadata": {"name": "d"}})
    assert resp.status == 400
    assert resp.json["message"] == "the name of the object (d) does not match the name on the URL (c)"


def test_generate_name(user: Raw) -> None:
    make_ns(user, "gen")
    resp = user.post("/api/v1/namespaces/gen/configmaps", {"metadata": {"generateName": "cm-"}})
    assert resp.status == 201
    name = resp.json["metadata"]["name"]
    assert name.startswith("cm-")
    assert len(name) == 8
    resp = user.post("/api/v1/namespaces/gen/configmaps", {"metadata": {}})
    assert resp.status == 422
    assert (
        resp.json["message"]
        == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )


def test_method_not_allowed(user: Raw) -> None:
    resp = user.delete("/api/v1/namespaces")
    assert resp.status == 405
    assert resp.json["reason"] == "MethodNotAllowed"
    resp = user.get("/api/v1/namespaces/default/finalize")
    assert resp.status == 405


def test_dry_run(user: Raw) -> None:
    make_ns(user, "dry")
    resp = user.post("/api/v1/namespaces/dry/configmaps?dryRun=All", {"metadata": {"name": "c"}})
    assert resp.status == 201
    assert "resourceVersion" not in resp.json["metadata"]
    assert user.get("/api/v1/namespaces/dry/configmaps/c").status == 404
    cm = make_cm(user, "dry", "c")
    resp = user.patch("/api/v1/namespaces/dry/configmaps/c?dryRun=All", {"data": {"z": "1"}})
    assert resp.status == 200
    assert resp.json["data"] == {"a": "b", "z": "1"}
    assert resp.json["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]
    assert user.get("/api/v1/namespaces/dry/configmaps/c").json["data"] == {"a": "b"}
    resp = user.delete("/api/v1/namespaces/dry/configmaps/c?dryRun=All")
    assert resp.status == 200
    assert user.get("/api/v1/namespaces/dry/configmaps/c").status == 200
    # a dry run still checks preconditions
    resp = user.delete("/api/v1/namespaces/dry/configmaps/c?dryRun=All", {"preconditions": {"uid": "nope"}})
    assert resp.status == 409
    resp = user.delete("/api/v1/namespaces/dry/configmaps/c?dryRun=Yes")
    assert resp.status == 422
    assert resp.json["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Yes"}: supported values: "All"'
    )
    assert resp.json["details"]["kind"] == "DeleteOptions"
    assert resp.json["details"]["group"] == "meta.k8s.io"


def test_unauthenticated_and_expired_tokens(emu: Emulator, user: Raw) -> None:
    anon = Raw(emu, None)
    resp = anon.get("/api/v1/namespaces")
    assert resp.status == 401
    assert resp.json == status_body(401, "Unauthorized", "Unauthorized")
    emu.knobs.expired_tokens.add(emu.user_token)
    assert user.get("/api/v1/namespaces").status == 401
    assert Raw(emu, emu.admin_token).get("/api/v1/namespaces").status == 200


def test_create_with_a_resource_version_is_refused(user: Raw) -> None:
    make_ns(user, "rvc")
    resp = user.post("/api/v1/namespaces/rvc/configmaps", {"metadata": {"name": "c", "resourceVersion": "42"}})
    assert resp.status == 500
    assert resp.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "resourceVersion should not be set on objects to be created",
        "code": 500,
    }


def test_percent_encoded_names(user: Raw) -> None:
    body = {"metadata": {"name": "system:nsstuck:reader"}, "rules": []}
    assert user.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", body).status == 201
    got = user.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Ansstuck%3Areader")
    assert got.status == 200
    assert got.json["metadata"]["name"] == "system:nsstuck:reader"


def test_name_validation(user: Raw) -> None:
    resp = user.post("/api/v1/namespaces", {"metadata": {"name": "Team_A"}})
    assert resp.status == 422
    assert resp.json["message"] == (
        'Namespace "Team_A" is invalid: metadata.name: Invalid value: "Team_A": a lowercase RFC 1123 label must '
        "consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )
    make_ns(user, "ok")
    resp = user.post("/api/v1/namespaces/ok/configmaps", {"metadata": {"name": "a.b-c"}})
    assert resp.status == 201
    resp = user.post("/api/v1/namespaces/ok/configmaps", {"metadata": {"name": "Bad"}})
    assert resp.status == 422
    assert "a lowercase RFC 1123 subdomain must consist of" in resp.json["message"]
    assert "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'" in resp.json["message"]
    resp = user.post(
        "/api/v1/namespaces/ok/services", {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert resp.status == 422
    assert "a DNS-1035 label must consist of" in resp.json["message"]
