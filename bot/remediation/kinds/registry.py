"""The remedy kinds by their `Action`: the one list of kinds, and `kind_of` to find one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from bot.domain.findings import Action
from bot.remediation.kinds import (
    delete_apiservice,
    delete_webhook_configuration,
    force_delete_pod,
    force_finalize_namespace,
    remove_finalizer,
    remove_namespace_finalizer,
)
from bot.remediation.kinds.base import RemedyKind

__all__ = ["KINDS", "RemedyKind", "kind_of", "register"]


def register(kinds: Iterable[RemedyKind]) -> Mapping[Action, RemedyKind]:
    """The kinds keyed by their action, in the order given; two kinds for one action, or a kind for
    an action that changes nothing, is a mistake caught at import."""
    by_action: dict[Action, RemedyKind] = {}
    for kind in kinds:
        if not kind.action.changes_cluster:
            raise ValueError(f"{kind.action.value} changes nothing in the cluster: it has no remedy kind")
        if kind.action in by_action:
            raise ValueError(f"two remedy kinds for {kind.action.value}")
        by_action[kind.action] = kind
    return MappingProxyType(by_action)


# In this order the kinds' rules make the remediation ClusterRole (`permissions.remediation_rules`).
KINDS: Mapping[Action, RemedyKind] = register(
    (
        remove_finalizer.KIND,
        remove_namespace_finalizer.KIND,
        force_finalize_namespace.KIND,
        delete_apiservice.KIND,
        delete_webhook_configuration.KIND,
        force_delete_pod.KIND,
    )
)


def kind_of(action: Action) -> RemedyKind:
    """The kind of a cluster-changing action (ValueError for an action that changes nothing)."""
    kind = KINDS.get(action)
    if kind is None:
        raise ValueError(f"{action.value} changes nothing in the cluster: it has no remedy kind")
    return kind
