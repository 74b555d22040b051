"""Reading as the asking person on a cluster with `diagnose_as: requester` (issue 39, docs/tenants.md).

- Who they are there: the config's `requesters:` entry for their Slack user ID, else for their Slack
  e-mail (user and groups); else their Slack e-mail as the user, with no groups. Never the approvers'
  groups. No entry and no e-mail: unmapped, refused.
- Whether they may `get` a namespace: a SubjectAccessReview asked by nsstuck's own identity
  (`create subjectaccessreviews.authorization.k8s.io`), so that the cluster's own RBAC answers,
  RoleBindings in the namespace included. Nothing is asked as them, and nothing is read with their rights:
  the diagnosis itself reads with nsstuck's role.
- What they are shown: the report with every other namespace they may not `get` unnamed
  (`bot.diagnosis.shown`); the answers are kept for the one answer (one report, one history, one Home).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from bot.diagnosis.shown import mentioned, shown_to
from bot.domain.findings import Diagnosis
from bot.domain.refs import ClusterName
from bot.kube import reviewing
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import CallError, Transport
from bot.settings import AppConfig

log = logging.getLogger(__name__)


class PeopleDirectory(Protocol):
    """Where a Slack user's e-mail is found (the Slack door: users.info, `users:read.email`)."""

    def email_of(self, user: str) -> str | None: ...


@dataclass(frozen=True)
class Requester:
    """A person's Kubernetes identity on a cluster, and where it came from (`requesters` or `e-mail`)."""

    user: str
    groups: tuple[str, ...]
    source: str


class Unmapped(Exception):
    """nsstuck knows no Kubernetes identity for this Slack user."""


class Tenancy:
    def __init__(
        self,
        config: AppConfig,
        clusters: ClusterRegistry,
        people: PeopleDirectory | None,
        *,
        timeout: float = 5.0,
    ) -> None:
        self.config = config
        self.clusters = clusters
        self.people = people
        self.timeout = timeout

    def applies(self, cluster: str) -> bool:
        """Whether `cluster` answers its people as themselves (`diagnose_as: requester`)."""
        found = self.config.cluster(cluster)
        return found is not None and found.as_requester

    def identity(self, slack_user: str) -> Requester:
        """The person's Kubernetes identity; Unmapped when there is none."""
        mapped = self.config.requester(slack=slack_user)
        if mapped is not None:
            return Requester(mapped.user, tuple(mapped.groups), "requesters")
        email = self.people.email_of(slack_user) if self.people is not None else None
        if not email:
            raise Unmapped(slack_user)
        by_email = self.config.requester(email=email)
        if by_email is not None:
            return Requester(by_email.user, tuple(by_email.groups), "requesters")
        if email.startswith("system:"):
            raise Unmapped(slack_user)
        return Requester(email, (), "e-mail")

    def checker(self, cluster: str, who: Requester) -> Callable[[str], bool]:
        """`may_get(namespace)` for this person on this cluster, each answer kept for the checker's life
        (one report, one listing). A review that fails counts as a refusal."""
        answers: dict[str, bool] = {}

        def may_get(namespace: str) -> bool:
            if namespace not in answers:
                answers[namespace] = self._review(cluster, who, namespace)
            return answers[namespace]

        return may_get

    def _review(self, cluster: str, who: Requester, namespace: str) -> bool:
        try:
            with self.clusters.lease(ClusterName(cluster)) as connection:
                transport = Transport(connection, call_timeout=self.timeout)
                return reviewing.subject_may_get_namespace(transport, who.user, who.groups, namespace)
        except CallError as e:
            log.warning("the SubjectAccessReview of namespace %s on %s failed: %s", namespace, cluster, e.message)
            return False

    def refusal(self, cluster: str, namespace: str, slack_user: str) -> str | None:
        """Why this person may not have `namespace` of `cluster` diagnosed (None: they may)."""
        if not self.applies(cluster):
            return None
        try:
            who = self.identity(slack_user)
        except Unmapped:
            return (
                f"nsstuck answers people on `{cluster}` as themselves, and has no Kubernetes identity for you "
                "(not in `requesters:`, and Slack shows no e-mail): ask the platform team to add you. "
                "Nothing was diagnosed."
            )
        if not self.checker(cluster, who)(namespace):
            return (
                f"Your Kubernetes identity on `{cluster}` (`{who.user}`) may not get namespace `{namespace}`, "
                "so nsstuck does not diagnose it for you. Nothing was diagnosed or recorded."
            )
        return None

    def visible(self, slack_user: str) -> Callable[[str, str], bool]:
        """`(cluster, namespace) -> bool`: whether this person may see that namespace's incidents;
        always on clusters that do not answer people as themselves, never for an unmapped person on
        those that do. The answers are kept for the callable's life."""
        checkers: dict[str, Callable[[str], bool]] = {}
        try:
            who: Requester | None = self.identity(slack_user)
        except Unmapped:
            who = None

        def visible(cluster: str, namespace: str) -> bool:
            if not self.applies(cluster):
                return True
            if who is None:
                return False
            if cluster not in checkers:
                checkers[cluster] = self.checker(cluster, who)
            return checkers[cluster](namespace)

        return visible

    def shown(self, diagnosis: Diagnosis, slack_user: str) -> Diagnosis:
        """The report as this person is shown it: unchanged on a cluster that does not answer people as
        themselves; else with every other namespace they may not `get` unnamed."""
        cluster = str(diagnosis.cluster)
        if not self.applies(cluster):
            return diagnosis
        try:
            with self.clusters.lease(ClusterName(cluster)) as connection:
                names: Iterable[str] = reviewing.namespace_names(Transport(connection, call_timeout=self.timeout))
        except CallError as e:
            log.warning("listing the namespaces of %s failed (%s): only the report's objects are judged", cluster, e)
            names = ()
        objects = {
            ref.namespace for f in diagnosis.findings for ref in f.objects if ref.namespace
        }  # the objects' own namespaces are judged even when the list failed
        candidates = mentioned(diagnosis, {*names, *objects})
        try:
            may_get = self.checker(cluster, self.identity(slack_user))
        except Unmapped:
            return shown_to(diagnosis, candidates)
        return shown_to(diagnosis, {n for n in candidates if not may_get(n)})
