"""The Kubernetes permissions remediation needs: per remedy, exactly the verbs it uses, on exactly
the resources it touches. The Helm chart's RBAC and `nsstuck clusters check` read this table; a test
checks every write the executor makes against it.

Reading (get) is needed on every target, to re-check it right before the change and to back it up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.domain.findings import Action


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def allows(self, group: str, resource: str, verb: str) -> bool:
        return (
            ("*" in self.api_groups or group in self.api_groups)
            and ("*" in self.resources or resource in self.resources)
            and verb in self.verbs
        )


PERMISSIONS: dict[Action, tuple[Rule, ...]] = {
    # an orphaned finalizer can sit on any kind of object (custom resources above all), so this is the
    # one rule that cannot name its resources in advance; switch remediation off where that is too much
    Action.REMOVE_FINALIZER: (Rule(("*",), ("*",), ("get", "patch")),),
    Action.REMOVE_NAMESPACE_FINALIZER: (
        Rule(("",), ("namespaces",), ("get", "patch")),
        Rule(("",), ("namespaces/finalize",), ("update",)),
    ),
    Action.FORCE_FINALIZE_NAMESPACE: (
        Rule(("",), ("namespaces",), ("get",)),
        Rule(("",), ("namespaces/finalize",), ("update",)),
    ),
    Action.DELETE_APISERVICE: (Rule(("apiregistration.k8s.io",), ("apiservices",), ("get", "delete")),),
    Action.DELETE_WEBHOOK_CONFIGURATION: (
        Rule(
            ("admissionregistration.k8s.io",),
            ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
            ("get", "delete"),
        ),
    ),
    Action.FORCE_DELETE_POD: (Rule(("",), ("pods",), ("get", "delete")),),
}

_VERBS = {"GET": "get", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create"}
_NAMESPACE_SUBRESOURCES = {"finalize", "status"}


def request_of(method: str, path: str) -> tuple[str, str, str]:
    """(api group, resource[/subresource], verb) of one API request on an object path."""
    segments = [s for s in path.split("?", 1)[0].split("/") if s]
    if segments[:1] == ["api"]:
        group, rest = "", segments[2:]
    else:
        group, rest = segments[1], segments[3:]
    namespaced = len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES
    if namespaced:
        rest = rest[2:]
    resource = rest[0] if rest else ""
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    return group, resource, _VERBS.get(method.upper(), method.lower())


def allowed(action: Action, method: str, path: str) -> bool:
    group, resource, verb = request_of(method, path)
    return any(rule.allows(group, resource, verb) for rule in PERMISSIONS.get(action, ()))


def rules_for(actions: Iterable[Action]) -> list[Rule]:
    """The rules for a set of remedies (for an RBAC Role), without repeats, in a stable order."""
    out: list[Rule] = []
    for action in actions:
        for rule in PERMISSIONS.get(action, ()):
            if rule not in out:
                out.append(rule)
    return out
