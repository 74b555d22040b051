"""The RBAC authorizer and the impersonation filter (opt-in: ``emu.enable_rbac()``).

As the API server's ``plugin/pkg/auth/authorizer/rbac`` evaluates the stored Roles, ClusterRoles,
RoleBindings and ClusterRoleBindings, and as ``endpoints/filters/impersonation.go`` checks the
``Impersonate-*`` headers; denials are worded by ``responsewriters.ForbiddenStatusError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from .errors import ApiError, bad_request, forbidden, go_quote

if TYPE_CHECKING:
    from .apiserver import Cluster

ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
SA_PREFIX = "system:serviceaccount:"
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = (RBAC_GROUP, "roles")
CLUSTER_ROLES = (RBAC_GROUP, "clusterroles")
ROLE_BINDINGS = (RBAC_GROUP, "rolebindings")
CLUSTER_ROLE_BINDINGS = (RBAC_GROUP, "clusterrolebindings")


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra}
        return out


def authenticated_user(name: str, groups: tuple[str, ...] | list[str] = ()) -> UserInfo:
    """An identity as the authenticators give it: a service account's token adds its two groups, and
    every authenticated identity has ``system:authenticated``."""
    out = list(groups)
    if name.startswith(SA_PREFIX):
        parts = name.split(":")
        if len(parts) == 4:
            out += ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"]
    out.append(ALL_AUTHENTICATED)
    return UserInfo(name, tuple(dict.fromkeys(out)))


@dataclass
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


@dataclass
class Decision:
    allowed: bool
    reason: str = ""
    errors: list[str] = field(default_factory=list)


# -- rule matching (rbac/v1 helpers) -----------------------------------------------------------------
def _verb_matches(rule: dict[str, Any], verb: str) -> bool:
    verbs: list[str] = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _group_matches(rule: dict[str, Any], group: str) -> bool:
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def _resource_matches(rule: dict[str, Any], combined: str, subresource: str) -> bool:
    for res in rule.get("resources") or []:
        if res in ("*", combined):
            return True
        if subresource and res == f"*/{subresource}":
            return True
    return False


def _name_matches(rule: dict[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or []
    return not names or name in names


def _url_matches(rule: dict[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def _sanitize(text: str) -> str:
    """``responsewriters``' sanitizer: HTML special characters escaped in error messages."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def rule_allows(attrs: Attributes, rule: dict[str, Any]) -> bool:
    if attrs.resource_request:
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        return (
            _verb_matches(rule, attrs.verb)
            and _group_matches(rule, attrs.group)
            and _resource_matches(rule, combined, attrs.subresource)
            and _name_matches(rule, attrs.name)
        )
    return _verb_matches(rule, attrs.verb) and _url_matches(rule, attrs.path)


def _applies(subject: dict[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = str(subject.get("name", ""))
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return bool(ns) and user.name == f"{SA_PREFIX}{ns}:{name}"
    return False


def _describe_subject(subject: dict[str, Any], binding_namespace: str) -> str:
    name = subject.get("name", "")
    if subject.get("kind") == "ServiceAccount":
        name = f"{name}/{subject.get('namespace') or binding_namespace}"
    return f"{subject.get('kind')} {go_quote(name)}"


def _role_rules(cluster: Cluster, ref: dict[str, Any], namespace: str) -> tuple[list[dict[str, Any]], str]:
    """The rules of a binding's roleRef, or an error worded as the RBAC listers word a missing role."""
    kind, name = ref.get("kind"), ref.get("name", "")
    if kind == "ClusterRole":
        entry = cluster.store.get(CLUSTER_ROLES, "", name)
        resource = "clusterrole"
    elif kind == "Role":
        entry = cluster.store.get(ROLES, namespace, name)
        resource = "role"
    else:
        return [], f"unsupported role reference kind: {go_quote(str(kind))}"
    if entry is None:
        return [], f"{resource}.{RBAC_GROUP} {go_quote(name)} not found"
    return list(entry.obj.get("rules") or []), ""


def authorize(cluster: Cluster, attrs: Attributes) -> Decision:
    """``RBACAuthorizer.Authorize``: the cluster role bindings, then the role bindings of the namespace."""
    errors: list[str] = []
    with cluster.store.lock:
        bindings = [(e.obj, "") for e in cluster.store.items(CLUSTER_ROLE_BINDINGS)]
        if attrs.namespace:
            bindings += [(e.obj, attrs.namespace) for e in cluster.store.items(ROLE_BINDINGS, attrs.namespace)]
        for binding, namespace in bindings:
            meta = binding.get("metadata") or {}
            ref = binding.get("roleRef") or {}
            for subject in binding.get("subjects") or []:
                if not _applies(subject, attrs.user, namespace):
                    continue
                rules, err = _role_rules(cluster, ref, namespace)
                if err:
                    errors.append(err)
                for rule in rules:
                    if rule_allows(attrs, rule):
                        label = f"{meta.get('name', '')}/{namespace}" if namespace else meta.get("name", "")
                        kind = "RoleBinding" if namespace else "ClusterRoleBinding"
                        return Decision(
                            True,
                            f"RBAC: allowed by {kind} {go_quote(label)} of {ref.get('kind')} "
                            f"{go_quote(ref.get('name', ''))} to {_describe_subject(subject, namespace)}",
                        )
                break  # one matching subject is enough to visit the role's rules
    reason = ""
    if errors:
        reason = "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return Decision(False, reason, errors)


def rules_review(cluster: Cluster, user: UserInfo, namespace: str) -> dict[str, Any]:
    """``SelfSubjectRulesReview``'s status: the rules of every binding that applies to ``user`` (the
    cluster role bindings, then the role bindings of ``namespace``), as the RBAC rule resolver lists them."""
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    errors: list[str] = []
    with cluster.store.lock:
        bindings = [(e.obj, "") for e in cluster.store.items(CLUSTER_ROLE_BINDINGS)]
        if namespace:
            bindings += [(e.obj, namespace) for e in cluster.store.items(ROLE_BINDINGS, namespace)]
        for binding, binding_namespace in bindings:
            if not any(_applies(subject, user, binding_namespace) for subject in binding.get("subjects") or []):
                continue
            rules, err = _role_rules(cluster, binding.get("roleRef") or {}, binding_namespace)
            if err:
                errors.append(err)
            for rule in rules:
                if rule.get("nonResourceURLs"):
                    non_resource_rules.append(
                        {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])}
                    )
                    continue
                out: dict[str, Any] = {
                    "verbs": list(rule.get("verbs") or []),
                    "apiGroups": list(rule.get("apiGroups") or []),
                    "resources": list(rule.get("resources") or []),
                }
                if rule.get("resourceNames"):
                    out["resourceNames"] = list(rule["resourceNames"])
                resource_rules.append(out)
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": bool(errors),
    }
    if errors:
        status["evaluationError"] = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return status


def forbidden_message(attrs: Attributes) -> str:
    """``responsewriters.forbiddenMessage``."""
    user = go_quote(attrs.user.name)
    if not attrs.resource_request:
        return f"User {user} cannot {attrs.verb} path {go_quote(attrs.path)}"
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f"in the namespace {go_quote(attrs.namespace)}" if attrs.namespace else "at the cluster scope"
    return f"User {user} cannot {attrs.verb} resource {go_quote(resource)} in API group {go_quote(attrs.group)} {where}"


def forbidden_error(attrs: Attributes, reason: str = "") -> ApiError:
    """``responsewriters.ForbiddenStatusError``: the Forbidden Status the API server answers."""
    message = _sanitize(forbidden_message(attrs))
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request:
        return forbidden("", "", "", message)
    return forbidden(attrs.resource, attrs.group, attrs.name, message)


# -- impersonation ---------------------------------------------------------------------------------
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
IMPERSONATE_UID = "Impersonate-Uid"
IMPERSONATE_EXTRA = "Impersonate-Extra-"


def _go_reference(kind: str, namespace: str = "", name: str = "", api_version: str = "", field_path: str = "") -> str:
    """Go's ``%v`` of a ``v1.ObjectReference`` (Kind Namespace Name UID APIVersion ResourceVersion FieldPath)."""
    return "{" + " ".join([kind, namespace, name, "", api_version, "", field_path]) + "}"


def impersonate(
    cluster: Cluster, requestor: UserInfo, headers: Any, request_uri: str, *, check: bool, knobs: bool = True
) -> UserInfo | None:
    """The identity a request acts as (None without impersonation headers), after checking that the
    requestor may ``impersonate`` each requested user, group, uid and extra: by RBAC with ``check``,
    and by ``knobs.forbid`` (verb ``impersonate``) with ``knobs``."""
    user = (headers.get(IMPERSONATE_USER) or "").strip()
    groups = [str(g) for g in headers.get_all(IMPERSONATE_GROUP) or []]
    uid = (headers.get(IMPERSONATE_UID) or "").strip()
    extra: dict[str, list[str]] = {}
    for key, value in headers.items():
        if key.lower().startswith(IMPERSONATE_EXTRA.lower()):
            # the key lower-cased, then %-decoded (unescapeExtraKey; a malformed escape is kept as sent)
            raw_key = key[len(IMPERSONATE_EXTRA) :].lower()
            try:
                extra_key = unquote(raw_key, errors="strict")
            except UnicodeDecodeError:
                extra_key = raw_key
            extra.setdefault(extra_key, []).append(value)
    if not (user or groups or uid or extra):
        return None
    requests: list[tuple[Attributes, str]] = []
    refs: list[str] = []
    name = user
    result_groups: list[str] = []
    if user:
        parts = user.split(":")
        if user.startswith(SA_PREFIX) and len(parts) == 4 and parts[2] and parts[3]:
            attrs = Attributes(requestor, "impersonate", group="", resource="serviceaccounts", namespace=parts[2])
            attrs.name = parts[3]
            refs.append(_go_reference("ServiceAccount", parts[2], parts[3]))
            if not groups:
                result_groups += ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"]
        else:
            attrs = Attributes(requestor, "impersonate", group="", resource="users", name=user)
            refs.append(_go_reference("User", name=user))
        requests.append((attrs, user))
    for g in groups:
        requests.append((Attributes(requestor, "impersonate", group="", resource="groups", name=g), g))
        refs.append(_go_reference("Group", name=g))
        result_groups.append(g)
    for key, values in extra.items():
        for value in values:
            attrs = Attributes(
                requestor, "impersonate", group="authentication.k8s.io", resource="userextras", subresource=key
            )
            attrs.name = value
            requests.append((attrs, value))
            refs.append(_go_reference("UserExtra", name=value, api_version="authentication.k8s.io/v1", field_path=key))
    if uid:
        requests.append(
            (Attributes(requestor, "impersonate", group="authentication.k8s.io", resource="uids", name=uid), uid)
        )
        refs.append(_go_reference("UID", name=uid, api_version="authentication.k8s.io/v1"))
    if not user:
        # buildImpersonationRequests' error, a BadRequest Status (before Kubernetes 1.2x: a plain-text 500)
        raise bad_request(f"requested [{' '.join(refs)}] without impersonating a user")
    for attrs, _ in requests:
        if knobs and cluster.knobs.is_forbidden(attrs.resource, attrs.group, "impersonate", attrs.namespace or None):
            raise forbidden_error(attrs)
        if check:
            decision = authorize(cluster, attrs)
            if not decision.allowed:
                raise forbidden_error(attrs, decision.reason)
    if name != "system:anonymous":
        if not any(g in (ALL_AUTHENTICATED, ALL_UNAUTHENTICATED) for g in result_groups):
            result_groups.append(ALL_AUTHENTICATED)
    elif ALL_UNAUTHENTICATED not in result_groups:
        result_groups.append(ALL_UNAUTHENTICATED)
    return UserInfo(
        name,
        tuple(result_groups),
        uid,
        tuple((k, tuple(v)) for k, v in sorted(extra.items())),
    )


# -- the bootstrap policy -------------------------------------------------------------------------------
def bootstrap_policy() -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """The few default ClusterRoles and bindings every cluster has (``bootstrappolicy``) that a client
    needs to discover the API and ask who it is and what it may do."""

    def role(name: str, rules: list[dict[str, Any]]) -> tuple[tuple[str, str], dict[str, Any]]:
        meta = {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}
        return CLUSTER_ROLES, {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRole",
            "metadata": meta,
            "rules": rules,
        }

    def bind(name: str, groups: list[str]) -> tuple[tuple[str, str], dict[str, Any]]:
        return CLUSTER_ROLE_BINDINGS, {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
        }

    return [
        role(
            "cluster-admin",
            [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
        ),
        bind("cluster-admin", [MASTERS]),
        role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ],
        ),
        bind("system:basic-user", [ALL_AUTHENTICATED]),
        role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        bind("system:discovery", [ALL_AUTHENTICATED]),
        role(
            "system:public-info-viewer",
            [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
        ),
        bind("system:public-info-viewer", [ALL_AUTHENTICATED, ALL_UNAUTHENTICATED]),
    ]
