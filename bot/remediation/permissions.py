"""The Kubernetes permissions remediation needs: per remedy, exactly the verbs it uses, on exactly
the resources it touches, as each remedy kind declares them (`bot.remediation.kinds`). A test checks
every write the executor makes against them, and another that the Helm chart's remediation
ClusterRole (helm/nsstuck/templates/rbac-remediation.yaml, written by hand with a comment per rule)
grants exactly these. The reads of diagnosis are `bot.kube.permissions`.

Reading (get) is needed on every target, to re-check it right before the change and to back it up.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.domain.access import READ_VERBS, Request, Rule, allowed_by, parse_request, unique
from bot.domain.findings import Action, Remedy
from bot.remediation.kinds.registry import KINDS
from bot.settings import ClusterConfig

__all__ = [
    "IMPERSONATION",
    "PERMISSIONS",
    "Rule",
    "allowed",
    "extra_finalizer_rules",
    "not_granted",
    "remediation_rules",
    "request_of",
    "rules_for",
]

# act_as_approver: nsstuck writes nothing with its own identity; it sends every read and write of a
# change as the approver (Impersonate-User, Impersonate-Group, bot.kube.connecting.Impersonation). The
# chart's role for this mode grants these, limited by resourceNames to the users and groups listed in
# its values (remediation.actAsApprover), never to any name
IMPERSONATION: tuple[Rule, ...] = (
    Rule(("",), ("users",), ("impersonate",)),
    Rule(("",), ("groups",), ("impersonate",)),
)

# in the registry's order, which is the order of the chart's rules
PERMISSIONS: dict[Action, tuple[Rule, ...]] = {action: kind.rules for action, kind in KINDS.items()}


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


def extra_finalizer_rules(resources: Iterable[str]) -> tuple[Rule, ...]:
    """`get` and `patch` on the resources a cluster adds to the catalogue's (`finalizer_resources`:
    RESOURCE or RESOURCE.GROUP), one rule per API group, as the chart renders them."""
    by_group: dict[str, list[str]] = {}
    for name in resources:
        resource, _, group = name.partition(".")
        if resource not in by_group.setdefault(group, []):
            by_group[group].append(resource)
    return tuple(Rule((group,), tuple(sorted(names)), ("get", "patch")) for group, names in sorted(by_group.items()))


def not_granted(cluster: ClusterConfig, remedy: Remedy) -> str | None:
    """Why nsstuck's own role on the cluster does not let it carry out this remedy on its targets, in
    words ("nsstuck may not patch widgets.example.com on prod-eu: ..."), or None. With
    `act_as_approver` the approver's own RBAC decides, and the cluster answers for it."""
    kind = KINDS.get(remedy.action)
    if kind is None or not kind.target_verbs or cluster.act_as_approver:
        return None
    rules = (*kind.rules, *extra_finalizer_rules(cluster.finalizer_resources))
    for target in remedy.targets:
        resource = target.plural
        # the write first: that is the verb people recognise ("may not patch widgets.example.com")
        for verb in sorted(kind.target_verbs, key=lambda v: v in READ_VERBS):
            request = Request(verb=verb, group=target.group, resource=resource, namespace=target.namespace or "")
            if not allowed_by(rules, request):
                where = (
                    "add it to remediation.finalizerResources in the chart"
                    if cluster.in_cluster
                    else "add it to the cluster's finalizer_resources in the config, and grant it there"
                )
                return f"nsstuck may not {verb} {target.kubectl_type} on {cluster.name}: {where}"
    return None
