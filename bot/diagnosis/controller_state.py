"""Stuck or slow: what the API server's version and kube-controller-manager's Lease say about a
namespace the namespace controller has written nothing on.

The namespace controller (kubernetes/kubernetes pkg/controller/namespace/namespace_controller.go)
queues a deleted namespace 5 s after it sees it and resyncs every namespace every 5 minutes
(`NamespaceSyncPeriod`). Its deletion conditions exist from 1.16 (DiscoveryFailure, GVParsing,
ContentFailure; ContentRemaining and FinalizersRemaining from 1.17). So a namespace without
conditions is either on an older server (judge from its content and age against the resync), or
one the controller has not got to yet (its Lease is renewed), or one no controller works on (its
Lease lapsed), or one whose controller cannot be seen (no Lease).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bot.diagnosis import remedies
from bot.diagnosis.context import Context, still_deleting
from bot.diagnosis.leases import LeaseState, controller_manager
from bot.diagnosis.reading import human_duration
from bot.domain.findings import Action, Cause, Finding

# pkg/controller/namespace: NamespaceSyncPeriod (kube-controller-manager's --namespace-sync-period)
RESYNC = timedelta(minutes=5)
CONDITIONS_SINCE = (1, 16)
# OrderedNamespaceDeletion (KEP-5080): beta and on by default in 1.33, GA and locked in 1.34
ORDERED_DELETION_SINCE = (1, 33)

_NUMBER = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class ServerVersion:
    """The API server's /version: major and minor as numbers, the patch when it is known."""

    major: int
    minor: int
    patch: int | None
    text: str  # gitVersion as served (`v1.27.3-gke.100`), or `1.27` when only the minor is known

    def at_least(self, version: tuple[int, int]) -> bool:
        return (self.major, self.minor) >= version


def server_version(document: Any) -> ServerVersion | None:
    """Parse /version: gitVersion first (`v1.15.12`, `v1.27.3-eks-1`, `v1.27`), else major and minor
    (a managed build's minor carries a `+`: `"28+"`). None when neither gives numbers."""
    if not isinstance(document, dict):
        return None
    git = str(document.get("gitVersion") or "")
    parts = git.lstrip("v").split("-", 1)[0].split("+", 1)[0].split(".")
    numbers = [int(m.group(1)) if (m := _NUMBER.match(p)) else None for p in parts]
    if len(numbers) >= 2 and numbers[0] is not None and numbers[1] is not None:
        patch = numbers[2] if len(numbers) >= 3 else None
        return ServerVersion(numbers[0], numbers[1], patch, git)
    major = _NUMBER.match(str(document.get("major") or ""))
    minor = _NUMBER.match(str(document.get("minor") or ""))
    if major and minor:
        return ServerVersion(int(major.group(1)), int(minor.group(1)), None, f"{major.group(1)}.{minor.group(1)}")
    return None


def ordered_deletion(ctx: Context) -> ServerVersion | None:
    """The server's version when OrderedNamespaceDeletion is on by default there (1.33 and later)."""
    version = server_version(ctx.snapshot.server_version)
    return version if version is not None and version.at_least(ORDERED_DELETION_SINCE) else None


def without_conditions(ctx: Context, seconds: int, *, has_findings: bool) -> list[Finding] | None:
    """The judgement on a namespace with no deletion conditions, past the first seconds; None: the
    engine's general "nothing explains it" applies."""
    version = server_version(ctx.snapshot.server_version)
    deleted = human_duration(timedelta(seconds=seconds))
    young = seconds < RESYNC.total_seconds()
    lease = controller_manager(ctx.snapshot, ctx.now)
    namespace = ctx.snapshot.namespace
    commands = [
        "kubectl -n kube-system get lease kube-controller-manager -o yaml",
        "kubectl -n kube-system get pods -l component=kube-controller-manager",
    ]
    if version is not None and not version.at_least(CONDITIONS_SINCE):
        old = f"the API server is {version.text}: before 1.16 the namespace controller writes no deletion conditions"
        if lease.state is LeaseState.STALE:
            return [_not_running(ctx, lease.evidence, old, commands)]
        if not ctx.remaining and young:
            return [
                still_deleting(
                    summary=f"the namespace is empty and was deleted {deleted} ago; the namespace controller "
                    "removes its finalizer at its next pass (it resyncs every 5 minutes)",
                    evidence=(old, "no object is left in the namespace", lease.evidence),
                    remedies=(remedies.wait("Ask again in a few minutes"),),
                )
            ]
        return None  # judged from its content by the other rules, or by the general rule
    if lease.state is LeaseState.STALE:
        return [_not_running(ctx, lease.evidence, "the namespace has no deletion conditions", commands)]
    about_version = (
        f"the API server is {version.text}, which writes deletion conditions"
        if version is not None
        else "the API server's version could not be read"
    )
    if lease.state is LeaseState.FRESH:
        if young:
            return [
                still_deleting(
                    summary=f"kube-controller-manager is running; its namespace controller has not got to this "
                    f"namespace yet (deleted {deleted} ago, it resyncs every 5 minutes)",
                    evidence=(lease.evidence, f"the namespace has no deletion conditions; {about_version}"),
                    remedies=(remedies.wait("Ask again in a few minutes"),),
                )
            ]
        return [
            Finding(
                cause=Cause.UNKNOWN,
                blocking=True,
                summary=f"kube-controller-manager is running, but its namespace controller has written nothing on "
                f"this namespace in {deleted}",
                objects=(ctx.namespace_ref,),
                evidence=(
                    lease.evidence,
                    f"the namespace has no deletion conditions; {about_version}",
                    "the namespace controller resyncs every namespace every 5 minutes: it may be disabled "
                    "(--controllers) or failing before it writes its status",
                ),
                remedies=(
                    remedies.investigate(
                        f"Read the kube-controller-manager log for namespace {namespace} and check its --controllers",
                        commands,
                    ),
                ),
            )
        ]
    # no Lease, or the Leases could not be read: whether the controller runs cannot be seen
    cannot_see = (
        f"{lease.evidence}: whether the namespace controller (kube-controller-manager) runs cannot be seen "
        "(leader election off, or a managed control plane that hides it)"
    )
    if young:
        return [
            still_deleting(
                summary=f"the namespace was deleted {deleted} ago and has no deletion conditions yet; whether the "
                "namespace controller runs cannot be seen",
                evidence=(cannot_see, f"the namespace has no deletion conditions; {about_version}"),
                remedies=(remedies.wait("Ask again in a few minutes"),),
            )
        ]
    if has_findings and not ctx.snapshot.gaps:
        return None
    return [
        Finding(
            cause=Cause.UNKNOWN,
            blocking=True,
            summary=f"the namespace has no deletion conditions after {deleted}, and whether the namespace controller "
            "runs cannot be seen",
            objects=(ctx.namespace_ref,),
            evidence=(cannot_see, f"the namespace has no deletion conditions; {about_version}"),
            remedies=(
                remedies.investigate(
                    "Check that kube-controller-manager runs (or ask the provider of the control plane)", commands
                ),
            ),
        )
    ]


def _not_running(ctx: Context, lease_evidence: str, conditions: str, commands: list[str]) -> Finding:
    return Finding(
        cause=Cause.UNKNOWN,
        blocking=True,
        summary="the namespace controller is not running: kube-controller-manager's Lease has not been renewed",
        objects=(ctx.namespace_ref,),
        evidence=(lease_evidence, conditions, "no namespace controller works on the namespace"),
        remedies=(
            remedies.restore(
                Action.RESTORE_CONTROLLER,
                "Bring kube-controller-manager (its namespace controller) back; it then finishes the deletion",
                commands,
            ),
        ),
    )
