"""Who an approved change acts as on a cluster with `act_as_approver`: the Kubernetes identity of the
approver whose vote completed the quorum.

Kubernetes has no user directory: an impersonated identity has only the groups nsstuck sends. So the
mapping is the config's (`impersonation.users`), or the approver's Slack e-mail behind a configured
prefix with fixed groups (`impersonation.email`); never a `system:` user or group (refused when the
config is loaded).
"""

from __future__ import annotations

from typing import Protocol

from bot.errors import NsstuckError
from bot.kube.connecting import Impersonation
from bot.settings import ClusterConfig


class PeopleDirectory(Protocol):
    """Where a Slack user's e-mail is found (the Slack door: users.info, `users:read.email`)."""

    def email_of(self, user: str) -> str | None: ...


class NoIdentityError(NsstuckError):
    """The approver has no Kubernetes identity on the cluster: the change is refused before it runs."""


def approver_identity(cluster: ClusterConfig, approver: str, people: PeopleDirectory | None) -> Impersonation | None:
    """The identity to act as on `cluster` for `approver` (a Slack user ID); None when the cluster does
    not act as approvers. Raises NoIdentityError when it does and the approver has no mapping."""
    if not cluster.act_as_approver:
        return None
    mapping = cluster.impersonation
    explicit = mapping.users.get(approver) if mapping is not None else None
    if explicit is not None:
        return Impersonation(explicit.user, tuple(explicit.groups))
    why = f"add {approver} to impersonation.users"
    if mapping is not None and mapping.email is not None:
        email = people.email_of(approver) if people is not None else None
        if email and not f"{mapping.email.prefix}{email}".startswith("system:"):
            return Impersonation(f"{mapping.email.prefix}{email}", tuple(mapping.email.groups))
        why = f"Slack shows no e-mail for them (the app needs users:read.email); add {approver} to impersonation.users"
    raise NoIdentityError(f"nsstuck has no Kubernetes identity for Slack user {approver} on {cluster.name}: {why}")
