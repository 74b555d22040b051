"""Who may change a cluster, and how many must agree. Pure: the Slack user groups are resolved by
whoever calls (a function from group id to member ids is passed in)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bot.domain.findings import Action, Diagnosis, Remedy
from bot.domain.people import Standing
from bot.remediation.kinds.registry import KINDS, kind_of
from bot.settings import ClusterConfig

GroupMembers = Callable[[str], Iterable[str]]


def is_group(approver: str) -> bool:
    """Slack user group ids start with S; users with U or W."""
    return approver.startswith("S")


def remediation_off(cluster: ClusterConfig) -> str | None:
    """Why remediation cannot be requested on this cluster, or None when it can."""
    if not cluster.remediation:
        return f"Remediation is switched off for cluster `{cluster.name}`."
    if not cluster.approvers:
        return f"Cluster `{cluster.name}` has no approvers configured, so nothing can be approved there."
    return None


def required_approvals(cluster: ClusterConfig, action: Action) -> int:
    """The cluster's number, raised to what the remedy's kind needs at least."""
    kind = KINDS.get(action)
    if kind is None:
        return cluster.required_approvals
    return max(cluster.required_approvals, kind.min_approvals)


def cannot_request(diagnosis: Diagnosis, remedy: Remedy) -> str | None:
    """Why this remedy cannot be filed as a request, or None."""
    if not remedy.action.changes_cluster:
        return "This remedy does not change the cluster; there is nothing to approve."
    kind = kind_of(remedy.action)
    if kind.needs_complete_diagnosis and not diagnosis.complete:
        return f"{kind.doing} needs complete evidence, and this diagnosis is incomplete."
    if not remedy.targets:
        return "This remedy names no object to change."
    if remedy.blocked_reason:
        return f"Not filed, it would fail: {remedy.blocked_reason}."
    return None


def eligible_approvers(approvers: Iterable[str], members: GroupMembers) -> frozenset[str]:
    """Every user id the configured approvers stand for (groups expanded)."""
    users: set[str] = set()
    for approver in approvers:
        if is_group(approver):
            users.update(members(approver))
        else:
            users.add(approver)
    return frozenset(users)


COULD_NOT_CHECK_PERSON = "Could not check who you are with Slack just now; try again in a moment."


def outsider_refusal(cluster: ClusterConfig, standing: Standing, doing: str) -> str | None:
    """Why this person may not `doing` ("request", "approve") a change on this cluster, or None: people
    of other organisations and guests only where `allow_external_users` says so; when Slack could not
    say who they are, nobody (closed, not open)."""
    if cluster.allow_external_users or standing is Standing.MEMBER:
        return None
    if standing is Standing.UNKNOWN:
        return COULD_NOT_CHECK_PERSON
    who = "Guests" if standing is Standing.GUEST else "People outside this workspace"
    return f"{who} cannot {doing} changes on cluster `{cluster.name}`."


def cannot_approve(user: str, *, requester: str, approvers: frozenset[str]) -> str | None:
    """Why `user` may not approve, or None."""
    if user == requester:
        return "You asked for this change, so your approval does not count: someone else has to approve it."
    if user not in approvers:
        return "You are not an approver for this cluster."
    return None


def vote_lapsed(voter: str, *, requester: str, approvers: frozenset[str]) -> str | None:
    """Why an approval given earlier no longer counts now, by what nsstuck knows without asking Slack
    (the approvers as read for this decision), or None."""
    if voter == requester:
        return "they asked for this change"
    if voter not in approvers:
        return "they are no longer an approver for this cluster"
    return None


def cannot_reject(user: str, *, requester: str, approvers: frozenset[str]) -> str | None:
    """Approvers may reject; the requester may withdraw their own request."""
    if user == requester or user in approvers:
        return None
    return "Only an approver for this cluster (or whoever asked) can reject this request."
