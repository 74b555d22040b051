"""The opt-in RBAC authorizer and the impersonation filter, over HTTP and with the real kubectl."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from tests.emulator._api_support import Raw, admin, emu, kubectl, make_cm, make_ns, user
from tests.emulator.test_api_aggregation_admission import METRICS_APISERVICE
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

SA = "system:serviceaccount:nsstuck:nsstuck"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def role(admin: Raw, name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> None:
    kind, path = (
        ("Role", f"{RBAC}/namespaces/{namespace}/roles") if namespace else ("ClusterRole", f"{RBAC}/clusterroles")
    )
    body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules}
    resp = admin.post(path, body)
    assert resp.status == 201, resp.raw


def bind(
    admin: Raw,
    name: str,
    role_kind: str,
    role_name: str,
    subjects: list[dict[str, Any]],
    *,
    namespace: str | None = None,
) -> None:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    path = f"{RBAC}/namespaces/{namespace}/rolebindings" if namespace else f"{RBAC}/clusterrolebindings"
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }
    resp = admin.post(path, body)
    assert resp.status == 201, resp.raw


def forbidden_status(message: str, name: str = "", group: str = "", kind: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


@pytest.fixture
def rbac_on(emu: Emulator, admin: Raw) -> Emulator:
    make_ns(admin, "team")
    make_ns(admin, "other")
    make_cm(admin, "team", "settings")
    make_cm(admin, "other", "settings")
    emu.enable_rbac()
    return emu


def test_rbac_is_off_by_default(user: Raw) -> None:
    assert user.get("/api/v1/namespaces/default/pods").status == 200


def test_no_binding_is_the_api_servers_403(rbac_on: Emulator, user: Raw) -> None:
    resp = user.get("/api/v1/namespaces/team/configmaps/settings")
    assert resp.status == 403
    assert resp.json == forbidden_status(
        f'configmaps "settings" is forbidden: User "{SA}" cannot get resource "configmaps" in API group "" '
        'in the namespace "team"',
        name="settings",
        kind="configmaps",
    )
    resp = user.get("/apis/apps/v1/deployments")
    assert resp.json["message"] == (
        f'deployments.apps is forbidden: User "{SA}" cannot list resource "deployments" in API group "apps" '
        "at the cluster scope"
    )
    assert resp.json["details"] == {"group": "apps", "kind": "deployments"}
    # discovery stays open to every authenticated identity (the bootstrap system:discovery binding)
    assert user.get("/apis").status == 200


def test_roles_bindings_and_subjects(rbac_on: Emulator, admin: Raw, user: Raw) -> None:
    alice = Raw(rbac_on, rbac_on.add_token("alice"))
    role(admin, "cm-patch", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}], "team")
    bind(admin, "alice-cm", "Role", "cm-patch", [{"kind": "User", "name": "alice"}], namespace="team")
    assert alice.patch("/api/v1/namespaces/team/configmaps/settings", {"data": {"x": "1"}}).status == 200
    other = alice.patch("/api/v1/namespaces/other/configmaps/settings", {"data": {"x": "1"}})
    assert other.status == 403
    assert other.json["message"].endswith('cannot patch resource "configmaps" in API group "" in the namespace "other"')
    assert alice.delete("/api/v1/namespaces/team/configmaps/settings").status == 403
    # resourceNames, resource/subresource and */subresource, a ClusterRole bound by a RoleBinding
    role(
        admin,
        "finalize-team",
        [
            {"apiGroups": [""], "resources": ["namespaces/finalize"], "verbs": ["update"], "resourceNames": ["team"]},
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
        ],
    )
    bind(
        admin,
        "sa-finalize",
        "ClusterRole",
        "finalize-team",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    ns = admin.get("/api/v1/namespaces/team").json
    assert user.put("/api/v1/namespaces/team/finalize", ns).status == 200
    ns_other = admin.get("/api/v1/namespaces/other").json
    assert user.put("/api/v1/namespaces/other/finalize", ns_other).status == 403
    assert user.put("/api/v1/namespaces/team", ns).status == 403  # not the subresource
    assert user.get("/api/v1/namespaces/team/status").status == 200
    # a Group subject: the service account's groups
    role(admin, "pods-read", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    bind(admin, "sas-read", "ClusterRole", "pods-read", [{"kind": "Group", "name": "system:serviceaccounts:nsstuck"}])
    assert user.get("/api/v1/pods").status == 200
    assert alice.get("/api/v1/pods").status == 403
    # a binding to a missing role: the RBAC reason says so
    bind(admin, "alice-ghost", "ClusterRole", "ghost", [{"kind": "User", "name": "alice"}])
    resp = alice.get("/api/v1/nodes")
    assert resp.json["message"] == (
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope: '
        'RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found'
    )


def test_non_resource_paths(rbac_on: Emulator, admin: Raw, user: Raw) -> None:
    assert admin.delete(f"{RBAC}/clusterrolebindings/system:discovery").status == 200
    resp = user.get("/apis")
    assert resp.status == 403
    assert resp.json == forbidden_status(f'forbidden: User "{SA}" cannot get path "/apis"')
    assert user.get("/version").status == 200  # system:public-info-viewer


def _impersonating(
    emu: Emulator, token: str, method: str, path: str, headers: list[tuple[str, str]], *, body: Any = None
) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection(emu.url.split("//", 1)[1], timeout=10)
    try:
        conn.putrequest(method, path)
        conn.putheader("Authorization", f"Bearer {token}")
        conn.putheader("Accept", "application/json")
        data = json.dumps(body).encode() if body is not None else b""
        if body is not None:
            conn.putheader("Content-Type", "application/merge-patch+json" if method == "PATCH" else "application/json")
        conn.putheader("Content-Length", str(len(data)))
        for k, v in headers:
            conn.putheader(k, v)
        conn.endheaders(data)
        resp = conn.getresponse()
        return resp.status, resp.headers.get("Content-Type") or "", resp.read()
    finally:
        conn.close()


def test_impersonation_is_authorized_then_acts_as_the_user(rbac_on: Emulator, admin: Raw) -> None:
    emu = rbac_on
    path = "/api/v1/namespaces/team/configmaps/settings"
    as_alice = [("Impersonate-User", "alice"), ("Impersonate-Group", "sre")]
    code, _, raw = _impersonating(emu, emu.user_token, "GET", path, as_alice)
    assert code == 403
    assert json.loads(raw) == forbidden_status(
        f'users "alice" is forbidden: User "{SA}" cannot impersonate resource "users" in API group "" '
        "at the cluster scope",
        name="alice",
        kind="users",
    )
    role(
        admin,
        "impersonator",
        [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]},
            {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["sre"]},
        ],
    )
    bind(
        admin,
        "impersonator",
        "ClusterRole",
        "impersonator",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    code, _, raw = _impersonating(emu, emu.user_token, "GET", path, [*as_alice, ("Impersonate-Group", "admins")])
    assert json.loads(raw)["message"] == (
        f'groups "admins" is forbidden: User "{SA}" cannot impersonate resource "groups" in API group "" '
        "at the cluster scope"
    )
    # allowed to impersonate alice and sre, but sre may not patch: the refusal names alice
    code, _, raw = _impersonating(emu, emu.user_token, "PATCH", path, as_alice, body={"data": {"x": "1"}})
    assert code == 403
    assert json.loads(raw)["message"] == (
        'configmaps "settings" is forbidden: User "alice" cannot patch resource "configmaps" in API group "" '
        'in the namespace "team"'
    )
    role(admin, "cm-patch", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}], "team")
    bind(admin, "sre-cm", "Role", "cm-patch", [{"kind": "Group", "name": "sre"}], namespace="team")
    emu.journal.clear()
    code, _, raw = _impersonating(emu, emu.user_token, "PATCH", path, as_alice, body={"data": {"x": "1"}})
    assert code == 200, raw
    assert [
        (e.method, e.path, e.dry_run, e.user, e.groups, e.impersonated_by) for e in emu.journal.entries(admin=True)
    ] == [("PATCH", path, False, "alice", ("sre", "system:authenticated"), SA)]
    # the same request without impersonation: the service account itself may not
    code, _, raw = _impersonating(emu, emu.user_token, "PATCH", path, [], body={"data": {"x": "2"}})
    assert code == 403
    # a group without a user: the filter's BadRequest
    code, ctype, raw = _impersonating(emu, emu.user_token, "GET", path, [("Impersonate-Group", "sre")])
    assert (code, ctype) == (400, "application/json")
    assert json.loads(raw) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "requested [{Group  sre    }] without impersonating a user",
        "reason": "BadRequest",
        "code": 400,
    }


def test_reviews_answer_for_the_impersonated_user(rbac_on: Emulator, admin: Raw) -> None:
    emu = rbac_on
    role(admin, "impersonator", [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}])
    bind(
        admin,
        "impersonator",
        "ClusterRole",
        "impersonator",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    role(admin, "cm-patch", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}], "team")
    bind(admin, "alice-cm", "Role", "cm-patch", [{"kind": "User", "name": "alice"}], namespace="team")

    def review(who: str, namespace: str) -> dict[str, Any]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "patch", "resource": "configmaps", "namespace": namespace}},
        }
        conn = http.client.HTTPConnection(emu.url.split("//", 1)[1], timeout=10)
        try:
            data = json.dumps(body).encode()
            conn.request(
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                body=data,
                headers={
                    "Authorization": f"Bearer {emu.user_token}",
                    "Content-Type": "application/json",
                    "Impersonate-User": who,
                },
            )
            resp = conn.getresponse()
            status: dict[str, Any] = json.loads(resp.read())["status"]
            return status
        finally:
            conn.close()

    assert review("alice", "team") == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "alice-cm/team" of Role "cm-patch" to User "alice"',
    }
    assert review("alice", "other") == {"allowed": False, "denied": False}
    assert review("bob", "team") == {"allowed": False, "denied": False}
    code, _, raw = _impersonating(
        emu,
        emu.user_token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        [("Impersonate-User", "alice"), ("Impersonate-Group", "sre")],
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert code == 201, raw
    assert json.loads(raw)["status"]["userInfo"] == {"username": "alice", "groups": ["sre", "system:authenticated"]}


@pytest.mark.kubectl
def test_kubectl_agrees(rbac_on: Emulator, admin: Raw, tmp_path: Path) -> None:
    kc = rbac_on.write_kubeconfig(tmp_path / "kc")
    role(
        admin,
        "impersonator",
        [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice", "bob"]},
            {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["sre"]},
        ],
    )
    bind(
        admin,
        "impersonator",
        "ClusterRole",
        "impersonator",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    role(admin, "cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}], "team")
    bind(admin, "alice-cm", "Role", "cm", [{"kind": "User", "name": "alice"}], namespace="team")
    role(admin, "cm-read", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], "team")
    bind(
        admin, "bob-cm", "Role", "cm-read", [{"kind": "User", "name": "bob"}], namespace="team"
    )  # kubectl patch gets first
    out = kubectl(kc, "auth", "can-i", "patch", "configmaps", "-n", "team", "--as", "alice")
    assert (out.returncode, out.stdout.strip()) == (0, "yes"), out.stderr
    out = kubectl(kc, "auth", "can-i", "patch", "configmaps", "-n", "team", "--as", "bob")
    assert (out.returncode, out.stdout.strip()) == (1, "no")
    out = kubectl(kc, "auth", "can-i", "patch", "configmaps", "-n", "team")
    assert (out.returncode, out.stdout.strip()) == (1, "no")
    out = kubectl(kc, "auth", "whoami", "--as", "alice", "--as-group", "sre", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"]["userInfo"] == {
        "username": "alice",
        "groups": ["sre", "system:authenticated"],
    }
    out = kubectl(
        kc, "patch", "configmap", "settings", "-n", "team", "--as", "bob", "--type=merge", "-p", '{"data":{"x":"1"}}'
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'Error from server (Forbidden): configmaps "settings" is forbidden: User "bob" cannot patch resource '
        '"configmaps" in API group "" in the namespace "team"'
    )
    out = kubectl(
        kc, "patch", "configmap", "settings", "-n", "team", "--as", "alice", "--type=merge", "-p", '{"data":{"x":"1"}}'
    )
    assert out.returncode == 0, out.stderr
    out = kubectl(kc, "get", "configmap", "settings", "-n", "team", "--as", "carol")
    assert out.stderr.strip() == (
        f'Error from server (Forbidden): users "carol" is forbidden: User "{SA}" cannot impersonate resource '
        '"users" in API group "" at the cluster scope'
    )
    assert admin.get("/api/v1/namespaces/team/configmaps/settings").json["data"] == {"a": "b", "x": "1"}


def test_aggregated_apis_are_authorized_before_the_aggregator_answers(rbac_on: Emulator, admin: Raw, user: Raw) -> None:
    # metrics.k8s.io has no available APIService: an allowed caller gets the aggregator's 503, any
    # other the 403 first
    assert admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE).status == 201
    path = "/apis/metrics.k8s.io/v1beta1/namespaces/team/pods"
    resp = user.get(path)
    assert resp.status == 403
    assert resp.json["message"] == (
        f'pods.metrics.k8s.io is forbidden: User "{SA}" cannot list resource "pods" in API group "metrics.k8s.io" '
        'in the namespace "team"'
    )
    role(admin, "metrics", [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["list"]}])
    bind(admin, "metrics", "ClusterRole", "metrics", [{"kind": "Group", "name": "system:serviceaccounts"}])
    resp = user.get(path)
    assert (resp.status, resp.raw) == (503, b"service unavailable\n")


def test_subject_access_review_for_a_user_and_groups(rbac_on: Emulator, admin: Raw) -> None:
    role(admin, "cm-patch", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}], "team")
    bind(admin, "sre-cm", "Role", "cm-patch", [{"kind": "Group", "name": "sre"}], namespace="team")

    def review(groups: list[str]) -> dict[str, Any]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "dave",
                "groups": groups,
                "resourceAttributes": {"verb": "patch", "resource": "configmaps", "namespace": "team"},
            },
        }
        resp = admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
        assert resp.status == 201, resp.raw
        status: dict[str, Any] = resp.json["status"]
        return status

    assert review(["sre"])["allowed"] is True
    assert review([])["allowed"] is False


@pytest.mark.kubectl
def test_kubectl_auth_can_i_list(rbac_on: Emulator, admin: Raw, tmp_path: Path) -> None:
    kc = rbac_on.write_kubeconfig(tmp_path / "kc")
    role(admin, "impersonator", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}])
    bind(
        admin,
        "impersonator",
        "ClusterRole",
        "impersonator",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    rules = [
        {"apiGroups": ["kiali.io"], "resources": ["kialis"], "verbs": ["get", "patch"], "resourceNames": ["kiali"]}
    ]
    role(admin, "kiali", rules, "team")
    bind(admin, "alice-kiali", "Role", "kiali", [{"kind": "User", "name": "alice"}], namespace="team")
    out = kubectl(kc, "auth", "can-i", "--list", "-n", "team", "--as", "alice")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["kialis.kiali.io", "[]", "[kiali]", "[get", "patch]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/apis/*]", "[]", "[get]"] in rows
    out = kubectl(kc, "auth", "can-i", "--list", "-n", "other", "--as", "alice")
    assert "kialis.kiali.io" not in out.stdout


def test_impersonated_uid_and_extra(rbac_on: Emulator, admin: Raw) -> None:
    emu = rbac_on
    review = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    headers = [("Impersonate-User", "alice"), ("Impersonate-Uid", "u-1"), ("Impersonate-Extra-Team%2Fname", "payments")]
    role(admin, "users", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}])
    bind(
        admin, "users", "ClusterRole", "users", [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}]
    )
    code, _, raw = _impersonating(emu, emu.user_token, "POST", review, headers, body=body)
    assert code == 403
    assert json.loads(raw)["message"] == (
        f'userextras.authentication.k8s.io "payments" is forbidden: User "{SA}" cannot impersonate resource '
        '"userextras/team/name" in API group "authentication.k8s.io" at the cluster scope'
    )
    role(
        admin,
        "extras",
        [
            {
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["userextras/team/name", "uids"],
                "verbs": ["impersonate"],
            }
        ],
    )
    bind(
        admin,
        "extras",
        "ClusterRole",
        "extras",
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    code, _, raw = _impersonating(emu, emu.user_token, "POST", review, headers, body=body)
    assert code == 201, raw
    assert json.loads(raw)["status"]["userInfo"] == {
        "username": "alice",
        "uid": "u-1",
        "groups": ["system:authenticated"],
        "extra": {"team/name": ["payments"]},
    }
