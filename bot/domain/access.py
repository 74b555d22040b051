"""Kubernetes RBAC, as data: the rules nsstuck needs and the API requests they allow.

The tables themselves live beside the code that makes the requests (reads in
`bot.kube.permissions`; writes declared by each remedy kind in `bot.remediation.kinds`, gathered in
`bot.remediation.permissions`); the Helm chart's ClusterRoles are
written from them and a test holds the two equal. Matching follows the API server's authorizer:
a request is turned into (verb, API group, resource[/subresource]) the way its request-info
resolver does, or into a non-resource URL (discovery), and a rule allows it if every part matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# what a request's method means on one object; on a collection GET is `list` and DELETE `deletecollection`
_OBJECT_VERBS = {"GET": "get", "HEAD": "get", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create"}
_COLLECTION_VERBS = {"GET": "list", "HEAD": "list", "POST": "create", "DELETE": "deletecollection"}
# `/api/v1/namespaces/NAME/X` is the namespace's subresource X for these, the list of type X in NAME otherwise
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class Request:
    """An API request in the authorizer's terms."""

    verb: str
    group: str = ""
    resource: str = ""  # `pods`, or `namespaces/finalize` for a subresource
    namespace: str = ""
    non_resource_url: str = ""  # `/api`, `/apis/apps/v1`, ...: discovery and other non-resource paths

    @property
    def is_resource(self) -> bool:
        return not self.non_resource_url

    def __str__(self) -> str:
        if self.non_resource_url:
            return f"{self.verb} {self.non_resource_url}"
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{where}"


def parse_request(method: str, path: str, query: str = "") -> Request:
    """(verb, group, resource) of one request to the API server, as its authorizer sees it.

    `/api` and `/apis` discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/GROUP[/VERSION]`) and
    anything that is not an API path are non-resource URLs. `watch=true` (or `watch=1`) in the query
    of a GET makes it a watch.
    """
    clean, _, inline_query = path.partition("?")
    query = query or inline_query
    segments = [s for s in clean.split("/") if s]
    method = method.upper()
    if segments[:1] == ["api"] and len(segments) >= 3:
        group, rest = "", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 4:
        group, rest = segments[1], segments[3:]
    else:
        return Request(verb=_OBJECT_VERBS.get(method, method.lower()), non_resource_url="/" + "/".join(segments))
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    elif len(rest) >= 2 and rest[0] == "namespaces":
        namespace = rest[1]  # the namespace object itself (or its subresource) is in its own namespace
    resource = rest[0]
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    if len(rest) == 1:
        verb = _COLLECTION_VERBS.get(method, method.lower())
    else:
        verb = _OBJECT_VERBS.get(method, method.lower())
    if verb in ("get", "list") and any(p in ("watch=true", "watch=1") for p in query.split("&")):
        verb = "watch"
    return Request(verb=verb, group=group, resource=resource, namespace=namespace)


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule: on resources (`api_groups` and `resources`) or on non-resource URLs."""

    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def allows(self, group: str, resource: str, verb: str) -> bool:
        """Whether this rule allows `verb` on `resource` (`name/subresource` for a subresource) of `group`."""
        if self.non_resource_urls:
            return False
        return (
            ("*" in self.api_groups or group in self.api_groups)
            and _resource_matches(self.resources, resource)
            and ("*" in self.verbs or verb in self.verbs)
        )

    def allows_request(self, request: Request) -> bool:
        if request.is_resource:
            return self.allows(request.group, request.resource, request.verb)
        return ("*" in self.verbs or request.verb in self.verbs) and any(
            url == request.non_resource_url or (url.endswith("*") and request.non_resource_url.startswith(url[:-1]))
            for url in self.non_resource_urls
        )

    def grants(self) -> set[tuple[str, str, str]]:
        """Every (verb, group, resource) this rule names, or (verb, "url", path) for non-resource URLs:
        a form in which two rule lists that say the same thing in other groupings compare equal."""
        if self.non_resource_urls:
            return {(verb, "url", url) for verb in self.verbs for url in self.non_resource_urls}
        return {(verb, group, res) for verb in self.verbs for group in self.api_groups for res in self.resources}

    def to_policy_rule(self) -> dict[str, Any]:
        """As in a Role or ClusterRole manifest."""
        if self.non_resource_urls:
            return {"nonResourceURLs": list(self.non_resource_urls), "verbs": list(self.verbs)}
        return {"apiGroups": list(self.api_groups), "resources": list(self.resources), "verbs": list(self.verbs)}

    @classmethod
    def from_policy_rule(cls, rule: dict[str, Any]) -> Rule:
        return cls(
            api_groups=tuple(rule.get("apiGroups") or ()),
            resources=tuple(rule.get("resources") or ()),
            verbs=tuple(rule.get("verbs") or ()),
            non_resource_urls=tuple(rule.get("nonResourceURLs") or ()),
        )


def _resource_matches(allowed: tuple[str, ...], resource: str) -> bool:
    if "*" in allowed or resource in allowed:
        return True
    _, slash, subresource = resource.partition("/")
    return bool(slash) and f"*/{subresource}" in allowed


def allowed_by(rules: Iterable[Rule], request: Request) -> bool:
    return any(rule.allows_request(request) for rule in rules)


def grants(rules: Iterable[Rule]) -> set[tuple[str, str, str]]:
    """The union of the rules' grants (see `Rule.grants`)."""
    out: set[tuple[str, str, str]] = set()
    for rule in rules:
        out |= rule.grants()
    return out


def unique(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """The rules without repeats, in their first order."""
    return tuple(dict.fromkeys(rules))
