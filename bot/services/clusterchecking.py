"""`nsstuck clusters check` and `/nsstuck clusters`: per cluster, whether nsstuck reaches it, the
server's version, who nsstuck is there, whether it serves aggregated discovery, and whether every
permission of the code's own tables is granted, asked with SelfSubjectAccessReview.

The permissions come from the tables the code is checked against: the read role
(`bot.kube.permissions.READS`), the remediation role where remediation is on (each remedy kind's
rules and the cluster's `finalizer_resources`), impersonation where `act_as_approver` is on, and
`create subjectaccessreviews.authorization.k8s.io` where `diagnose_as: requester` is
(then nsstuck writes nothing as itself, so its remediation role is not needed). A row on every type
(`*` groups or resources: list on every namespaced type) is asked per namespaced type that discovery
returns and that supports the verb (never `get` on Secrets and ConfigMaps, which nsstuck reads as
metadata only), so a role narrowed to what the cluster serves is not reported as missing anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bot.domain.access import Rule
from bot.domain.refs import ClusterName
from bot.domain.values import is_value_resource
from bot.errors import NsstuckError
from bot.kube import reviewing
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.observing import CallObserver
from bot.kube.permissions import READS, REQUESTER_REVIEWS
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import CallError, CallKind, Transport
from bot.remediation.permissions import IMPERSONATION, extra_finalizer_rules, remediation_rules
from bot.remediation.policy import remediation_off
from bot.settings import AppConfig, ClusterConfig

SCHEMA = "nsstuck.clusters/v1"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Need:
    """One permission nsstuck needs: a verb on a resource of a group (optionally one name), or on a
    non-resource URL; `role` says which table it comes from."""

    role: str  # read | remediation | impersonation | requester
    verb: str
    group: str = ""
    resource: str = ""
    name: str = ""
    url: str = ""

    @property
    def label(self) -> str:
        """`verb resource.group` (`verb resource` in the core group), `verb /url`, and ` NAME` when named."""
        if self.url:
            return f"{self.verb} {self.url}"
        qualified = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {qualified}{' ' + self.name if self.name else ''}"


@dataclass(frozen=True)
class Checked:
    need: Need
    allowed: bool
    reason: str = ""


@dataclass
class ClusterCheck:
    """What one cluster answered."""

    cluster: str
    reachable: bool
    reason: str = ""
    version: str | None = None
    identity: str | None = None
    aggregated_discovery: bool | None = None
    roles: tuple[str, ...] = ()
    permissions: list[Checked] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[Checked]:
        return [c for c in self.permissions if not c.allowed]

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "reachable": self.reachable,
            "reason": self.reason or None,
            "server_version": self.version,
            "identity": self.identity if self.reachable else None,
            "aggregated_discovery": self.aggregated_discovery,
            "roles": list(self.roles),
            "checked": len(self.permissions),
            "missing": [{"permission": c.need.label, "role": c.need.role, "reason": c.reason} for c in self.missing],
            "notes": list(self.notes),
        }


@dataclass
class ClustersCheck:
    clusters: list[ClusterCheck]

    @property
    def exit_code(self) -> int:
        """0 all good, 1 a permission missing, 3 a cluster unreachable (3 wins over 1)."""
        if any(not c.reachable for c in self.clusters):
            return 3
        return 1 if any(c.missing for c in self.clusters) else 0

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "ok": self.exit_code == 0, "clusters": [c.to_json() for c in self.clusters]}


def needed_rules(cluster: ClusterConfig) -> dict[str, tuple[Rule, ...]]:
    """The rules nsstuck needs on `cluster`, by role."""
    roles: dict[str, tuple[Rule, ...]] = {"read": tuple(rule for rules in READS.values() for rule in rules)}
    if remediation_off(cluster) is None:
        if cluster.act_as_approver:
            roles["impersonation"] = IMPERSONATION
        else:
            roles["remediation"] = (*remediation_rules(), *extra_finalizer_rules(cluster.finalizer_resources))
    if cluster.as_requester:  # whether a person may get a namespace is asked of the cluster (SubjectAccessReview)
        roles["requester"] = REQUESTER_REVIEWS
    return roles


def _impersonated_names(cluster: ClusterConfig) -> dict[str, list[str]]:
    """The users and groups of the cluster's impersonation mapping that can be named in advance."""
    users: list[str] = []
    groups: list[str] = []
    mapping = cluster.impersonation
    if mapping is not None:
        for identity in mapping.users.values():
            users.append(identity.user)
            groups.extend(identity.groups)
        if mapping.email is not None:
            groups.extend(mapping.email.groups)
    return {"users": list(dict.fromkeys(users)), "groups": list(dict.fromkeys(groups))}


def expand(
    role: str, rules: Iterable[Rule], served: Sequence[reviewing.ServedType], cluster: ClusterConfig
) -> list[Need]:
    """Each rule as the single permissions SelfSubjectAccessReview asks about, without repeats."""
    names = _impersonated_names(cluster) if role == "impersonation" else {}
    out: dict[Need, None] = {}
    for rule in rules:
        for verb in rule.verbs:
            if rule.non_resource_urls:
                for url in rule.non_resource_urls:
                    out[Need(role, verb, url=url)] = None
                continue
            if "*" in rule.api_groups or "*" in rule.resources:
                for t in served:
                    wildcard_group = "*" in rule.api_groups or t.group in rule.api_groups
                    wildcard_resource = "*" in rule.resources or t.resource in rule.resources
                    if not (t.namespaced and wildcard_group and wildcard_resource and verb in t.verbs):
                        continue
                    if verb == "get" and is_value_resource(t.group, t.resource):
                        continue  # nsstuck reads these as metadata only (lists), never whole
                    out[Need(role, verb, t.group, t.resource)] = None
                continue
            for group in rule.api_groups:
                for resource in rule.resources:
                    listed = names.get(resource)
                    for name in listed if listed else [""]:
                        out[Need(role, verb, group, resource, name)] = None
    return list(out)


def check_cluster(
    cluster: ClusterConfig,
    target: ClusterTarget,
    *,
    timeout: float = 10.0,
    credential_timeout: float = 15.0,
    observer: CallObserver | None = None,
) -> ClusterCheck:
    """Ask the cluster; never raises for what the cluster or its kubeconfig does wrong."""
    result = ClusterCheck(cluster=cluster.name, reachable=False)
    try:
        connection = connect(target, pool_size=8, credential_timeout=credential_timeout, observer=observer)
    except NsstuckError as e:
        result.reason = str(e)
        return result
    try:
        transport = Transport(connection, call_timeout=timeout)
        try:
            result.version = reviewing.server_version(transport)
        except CallError as e:
            result.reason = f"{connection.host}: {_unreachable(e)}"
            return result
        result.reachable = True
        try:
            identity = reviewing.who_am_i(transport)
            # as every word from the cluster: never a credential of the kubeconfig (a basic-auth user name)
            result.identity = None if identity is None else connection.scrub(identity)
        except CallError as e:
            result.notes.append(f"SelfSubjectReview failed: {e.message}")
        try:
            result.aggregated_discovery = reviewing.serves_aggregated_discovery(transport)
        except CallError as e:
            result.notes.append(f"aggregated discovery could not be asked for: {e.message}")
        try:
            served, failed = reviewing.served_types(transport)
        except CallError as e:
            served, failed = [], [f"discovery: {e.message}"]
        for what in failed:
            result.notes.append(f"discovery failed for {what}: its types were not checked")
        roles = needed_rules(cluster)
        result.roles = tuple(roles)
        if cluster.act_as_approver and cluster.impersonation is not None and cluster.impersonation.email is not None:
            result.notes.append("users derived from Slack e-mails cannot be named in advance: not checked")
        needs = [need for role, rules in roles.items() for need in expand(role, rules, served, cluster)]
        result.permissions = [
            Checked(c.need, c.allowed, connection.scrub(c.reason)) for c in _review_all(transport, needs)
        ]
    finally:
        connection.close()
    return result


def _review_all(transport: Transport, needs: list[Need]) -> list[Checked]:
    def review(need: Need) -> Checked:
        try:
            allowed, reason = reviewing.access_review(
                transport, need.verb, group=need.group, resource=need.resource, name=need.name, url=need.url
            )
        except CallError as e:
            return Checked(need, False, f"SelfSubjectAccessReview failed: {e.message}")
        return Checked(need, allowed, reason)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(review, needs))


def _unreachable(error: CallError) -> str:
    if error.kind is CallKind.STATUS and error.status == 401:
        return f"the server refused the credentials (401 {error.message})"
    if error.kind is CallKind.STATUS:
        return f"/version answered {error.status}: {error.message}"
    return error.message


class ClusterChecks:
    """Checks of registered clusters run off the caller's thread (`/nsstuck clusters`: Slack wants
    its answer within 3 s, a cluster may take longer), a couple at a time."""

    def __init__(self, config: AppConfig, registry: ClusterRegistry, *, timeout: float = 10.0) -> None:
        self.config = config
        self.registry = registry
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cluster-check")

    def check(self, names: Sequence[str]) -> ClustersCheck:
        return ClustersCheck(
            [
                check_cluster(
                    self.config.require_cluster(name),
                    self.registry.target(ClusterName(name)),
                    timeout=self.timeout,
                    credential_timeout=self.registry.credential_timeout,
                    observer=self.registry.observer,
                )
                for name in names
            ]
        )

    def submit(self, names: Sequence[str], done: Callable[[ClustersCheck], None]) -> None:
        """Check `names` in the background, then call `done` with the result (on the pool's thread)."""

        def run() -> None:
            try:
                report = self.check(names)
            except Exception:
                log.exception("checking clusters %s", ", ".join(names))
                return
            done(report)

        self._pool.submit(run)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# Text


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def summary_lines(check: ClusterCheck) -> list[str]:
    """One cluster, for people: a headline and one line per missing permission."""
    if not check.reachable:
        return [f"{check.cluster}: unreachable: {check.reason}"]
    granted = len(check.permissions) - len(check.missing)
    state = "ok" if not check.missing else f"{len(check.missing)} permission(s) missing"
    lines = [
        f"{check.cluster}: {state}",
        f"  server {check.version}, as {check.identity or 'unknown'}, "
        f"aggregated discovery {_yes_no(check.aggregated_discovery)}",
        f"  permissions: {granted} of {len(check.permissions)} granted ({', '.join(check.roles)} role)",
    ]
    lines += [f"  missing ({c.need.role}): {c.need.label}" for c in check.missing]
    lines += [f"  note: {note}" for note in check.notes]
    return lines


def render_table(report: ClustersCheck) -> str:
    """A table (one row per cluster), then what is missing or wrong per cluster."""
    header = ("CLUSTER", "REACHABLE", "VERSION", "IDENTITY", "AGGREGATED", "PERMISSIONS")
    rows = [header]
    for c in report.clusters:
        if c.reachable:
            perms = f"{len(c.permissions) - len(c.missing)}/{len(c.permissions)}"
            rows.append(
                (c.cluster, "yes", c.version or "", c.identity or "unknown", _yes_no(c.aggregated_discovery), perms)
            )
        else:
            rows.append((c.cluster, "no", "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    for c in report.clusters:
        if not c.reachable:
            lines.append(f"{c.cluster}: unreachable: {c.reason}")
        for checked in c.missing:
            lines.append(f"{c.cluster}: missing ({checked.need.role}): {checked.need.label}")
        lines += [f"{c.cluster}: note: {note}" for note in c.notes]
    return "\n".join(lines) + "\n"
