"""What `nsstuck clusters check` asks a cluster: its version, who nsstuck is there
(SelfSubjectReview), whether it serves aggregated discovery, which namespaced types it serves
(legacy discovery, the preferred version of each group), and whether one permission is granted
(SelfSubjectAccessReview). Each call fails with `CallError`, as every other call of `bot.kube`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.kube.transport import CallError, Transport

# what kubectl asks for: aggregated discovery first, the legacy APIGroupList otherwise
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
_SELF_REVIEWS = ("authentication.k8s.io/v1", "authentication.k8s.io/v1beta1")
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class ServedType:
    """One resource type as discovery lists it (preferred version of its group, no subresources)."""

    group: str
    resource: str
    namespaced: bool
    verbs: tuple[str, ...]


def server_version(transport: Transport) -> str:
    """The server's gitVersion (`/version`); the first call, so a failure here means unreachable."""
    doc = transport.get("/version")
    return str((doc or {}).get("gitVersion") or "unknown")


def who_am_i(transport: Transport) -> str | None:
    """The user name the server sees, or None when it serves no SelfSubjectReview (before 1.27)."""
    for group_version in _SELF_REVIEWS:
        body = {"apiVersion": group_version, "kind": "SelfSubjectReview", "metadata": {}}
        try:
            doc = transport.call("POST", f"/apis/{group_version}/selfsubjectreviews", body=body)
        except CallError as e:
            if e.status in (404, 405):
                continue
            raise
        user = ((doc or {}).get("status") or {}).get("userInfo") or {}
        return str(user.get("username") or "") or None
    return None


def serves_aggregated_discovery(transport: Transport) -> bool:
    """Whether `/apis` answers with an APIGroupDiscoveryList when asked for one (Kubernetes 1.26+)."""
    doc = transport.get("/apis", accept=AGGREGATED_ACCEPT)
    return isinstance(doc, dict) and doc.get("kind") == "APIGroupDiscoveryList"


def served_types(transport: Transport) -> tuple[list[ServedType], list[str]]:
    """The types of the preferred version of every group, and the group versions whose discovery
    failed (in words)."""
    failed: list[str] = []
    paths: list[tuple[str, str]] = [
        ("", f"/api/{version}") for version in (transport.get("/api") or {}).get("versions") or ()
    ]
    for group in (transport.get("/apis") or {}).get("groups") or ():
        name = str(group.get("name", ""))
        version = (group.get("preferredVersion") or {}).get("version")
        if not version and group.get("versions"):
            version = group["versions"][0].get("version")
        if version:
            paths.append((name, f"/apis/{name}/{version}"))
    out: list[ServedType] = []
    for group, path in paths:
        try:
            doc = transport.get(path)
        except CallError as e:
            failed.append(f"{path.removeprefix('/apis/').removeprefix('/api/')}: {e.message}")
            continue
        for resource in (doc or {}).get("resources") or ():
            name = str(resource.get("name", ""))
            if not name or "/" in name:
                continue
            verbs = tuple(str(v) for v in resource.get("verbs") or ())
            out.append(ServedType(group, name, bool(resource.get("namespaced")), verbs))
    return out, failed


def access_review(
    transport: Transport, verb: str, *, group: str = "", resource: str = "", name: str = "", url: str = ""
) -> tuple[bool, str]:
    """Whether nsstuck may do `verb` on `resource` of `group` (named `name` if given; cluster-wide,
    which covers every namespace), or on the non-resource `url`; with the authorizer's reason."""
    spec: dict[str, Any]
    if url:
        spec = {"nonResourceAttributes": {"verb": verb, "path": url}}
    else:
        attributes: dict[str, str] = {"verb": verb, "group": group, "resource": resource}
        if name:
            attributes["name"] = name
        spec = {"resourceAttributes": attributes}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    doc = transport.call("POST", ACCESS_REVIEWS, body=body)
    status = (doc or {}).get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError") or "")


SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def subject_may_get_namespace(transport: Transport, user: str, groups: tuple[str, ...], namespace: str) -> bool:
    """Whether `user` with exactly `groups` may `get` the namespace `namespace`, asked by nsstuck's own
    identity with a SubjectAccessReview (`create subjectaccessreviews.authorization.k8s.io`). The
    attributes name the namespace as its own namespace too, so that RoleBindings in it count, as they do
    when the person runs `kubectl get namespace NAME` (the API server's request-info resolver puts a
    namespace object in its own namespace)."""
    attributes = {"verb": "get", "group": "", "resource": "namespaces", "name": namespace, "namespace": namespace}
    spec: dict[str, Any] = {"resourceAttributes": attributes, "user": user}
    if groups:
        spec["groups"] = list(groups)
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    doc = transport.call("POST", SUBJECT_ACCESS_REVIEWS, body=body)
    status = (doc or {}).get("status") if isinstance(doc, dict) else None
    return isinstance(status, dict) and status.get("allowed") is True and status.get("denied") is not True


def namespace_names(transport: Transport) -> list[str]:
    """The names of the cluster's namespaces (one list, metadata only)."""
    doc = transport.call("GET", "/api/v1/namespaces", query={"limit": "5000"})
    items = doc.get("items") if isinstance(doc, dict) else None
    names: list[str] = []
    for item in items if isinstance(items, list) else ():
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    return names
