"""The Kubernetes permissions remediation needs: per remedy, exactly the verbs it uses, on exactly
the resources it touches. A test checks every write the executor makes against it, and another that
the Helm chart's remediation ClusterRole (helm/nsstuck/templates/rbac-remediation.yaml, written by
hand with a comment per rule) grants exactly this. The reads of diagnosis are `bot.kube.permissions`.

Reading (get) is needed on every target, to re-check it right before the change and to back it up.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.domain.access import Rule, allowed_by, parse_request, unique
from bot.domain.findings import Action

__all__ = ["PERMISSIONS", "Rule", "allowed", "remediation_rules", "request_of", "rules_for"]

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


def request_of(method: str, path: str) -> tuple[str, str, str]:
    """(api group, resource[/subresource], verb) of one API request on an object path."""
    request = parse_request(method, path)
    return request.group, request.resource, request.verb


def allowed(action: Action, method: str, path: str) -> bool:
    return allowed_by(PERMISSIONS.get(action, ()), parse_request(method, path))


def rules_for(actions: Iterable[Action]) -> list[Rule]:
    """The rules for a set of remedies (for an RBAC Role), without repeats, in a stable order."""
    return list(unique(rule for action in actions for rule in PERMISSIONS.get(action, ())))


def remediation_rules() -> tuple[Rule, ...]:
    """Every rule of every remedy: what the Helm chart's remediation ClusterRole grants."""
    return tuple(rules_for(PERMISSIONS))
