"""aggregated_discovery_defect: a group version Stale in aggregated discovery while its backend is healthy.

kube-controller-manager (client-go 1.27+) reads aggregated discovery, and a version the aggregator
lists with `freshness: Stale` fails its discovery exactly as a 503 on the legacy per-version document
does. The aggregator of 1.27.0-1.27.5 and 1.28.0-1.28.1 marked Stale any backend whose /apis ignores
the Accept header (it fell back to the backend's legacy /apis/<g>/<v> only on a 406):
kubernetes/kubernetes#119662, fixed by #119870, in 1.27.6 (#120360) and 1.28.2 (#120359).

A Stale version whose APIService is Available and whose per-version document answers our second
opinion is that defect on a server of those versions; on a server with the fix it is not, and the
finding says only what the evidence shows. A Stale version whose APIService is down, or whose
per-version document fails too, is not for this module: apiservices.py follows the evidence chain.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.diagnosis import remedies
from bot.diagnosis.context import Context
from bot.diagnosis.controller_state import server_version as parse_server_version
from bot.diagnosis.reading import backend
from bot.diagnosis.release_defects import STALE_AGGREGATED_DISCOVERY
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import KubeObject, ObjectRef, condition, name_of
from bot.domain.snapshot import GroupVersionStatus

# the table of known release defects holds its version range, its fix and its evidence
DEFECT = STALE_AGGREGATED_DISCOVERY.issue


@dataclass(frozen=True)
class ServerVersion:
    text: str  # as /version gives it ("v1.28.1", "v1.27"), or "" when it was not read
    minor: int | None
    patch: int | None  # None: not known (a minor alone, or no /version)

    @property
    def affected(self) -> bool | None:
        """True: a release with the defect; False: one without it; None: cannot tell."""
        return STALE_AGGREGATED_DISCOVERY.affected(self.minor, self.patch)


def server_version(ctx: Context) -> ServerVersion:
    """The release as this rule says it: /version's gitVersion as served, its minor and patch parsed
    as every rule parses them (`controller_state.server_version`)."""
    doc = ctx.snapshot.server_version or {}
    parsed = parse_server_version(doc)
    return ServerVersion(
        str(doc.get("gitVersion") or ""),
        parsed.minor if parsed is not None else None,
        parsed.patch if parsed is not None else None,
    )


def group_version_of(apiservice: KubeObject) -> str:
    spec = apiservice.get("spec") or {}
    group, version = spec.get("group") or "", spec.get("version") or ""
    return f"{group}/{version}" if group else version


def stale_but_served(ctx: Context) -> list[tuple[KubeObject, GroupVersionStatus]]:
    """Non-Local APIServices that are Available, whose version aggregated discovery lists as Stale and
    whose per-version document answered when we asked it."""
    statuses = {gv.group_version: gv for gv in ctx.snapshot.group_versions}
    out = []
    for apiservice in ctx.snapshot.apiservices:
        if not (apiservice.get("spec") or {}).get("service"):
            continue
        status = statuses.get(group_version_of(apiservice))
        available = condition(apiservice, "Available")
        if (
            status is not None
            and status.stale
            and status.legacy_answered
            and available is not None
            and available.get("status") == "True"
        ):
            out.append((apiservice, status))
    return out


def findings(ctx: Context) -> list[Finding]:
    version = server_version(ctx)
    return [_finding(ctx, apiservice, status, version) for apiservice, status in stale_but_served(ctx)]


def _finding(ctx: Context, apiservice: KubeObject, status: GroupVersionStatus, version: ServerVersion) -> Finding:
    gv = status.group_version
    name = name_of(apiservice)
    ref = ObjectRef.of(apiservice, resource="apiservices")
    available = condition(apiservice, "Available") or {}
    service = (apiservice.get("spec") or {}).get("service") or {}
    svc_ns, svc_name = str(service.get("namespace", "")), str(service.get("name", ""))
    evidence: list[str] = []
    if ctx.facts.discovery_message and gv in ctx.facts.discovery_failures:
        evidence.append(ctx.facts.line("NamespaceDeletionDiscoveryFailure") or "")
    evidence.append(
        f"aggregated discovery (apidiscovery.k8s.io/{status.aggregated}) lists {gv} with freshness Stale: "
        "the namespace controller fails discovery on it"
    )
    evidence.append(f"GET /apis/{gv} (the per-version document, asked as a second opinion) answered 200")
    evidence.append(
        f"APIService {name}: Available={available.get('status')} ({available.get('reason')}): "
        f"{available.get('message')}"
    )
    chain = backend(ctx.snapshot, svc_ns, svc_name)
    evidence.extend(chain.evidence)
    shown = version.text or "not known (/version was not read)"
    evidence.append(f"the API server's version (/version): {shown}")
    fixes = STALE_AGGREGATED_DISCOVERY.upgrade
    if version.affected is False:
        # a release with the fix: the second opinion says the backend serves; this is not #119662
        evidence.append(
            f"{version.text} carries the fix of {DEFECT}, so this is not that defect: the aggregator's copy of "
            f"the backend's discovery is out of date or its last refresh failed (it refreshes every minute)"
        )
        return Finding(
            cause=Cause.DISCOVERY_FAILURE,
            blocking=True,
            summary=(
                f"aggregated discovery lists {gv} as Stale although APIService {name} is Available and "
                f"/apis/{gv} answers; {version.text} has the aggregator fix, so the namespace waits until the "
                "aggregator fetches that backend's discovery again"
            ),
            objects=(ref,),
            evidence=tuple(e for e in evidence if e),
            remedies=remedies.rank(
                [
                    remedies.investigate(
                        "Diagnose again in a minute; if the version is still Stale, read the kube-apiserver log "
                        f"for 'DiscoveryManager: Failed to download discovery for {svc_ns}/{svc_name}'",
                        [
                            f"kubectl get --raw /apis/{gv}",
                            "kubectl get --raw /apis -H 'Accept: application/json;g=apidiscovery.k8s.io;v=v2;"
                            "as=APIGroupDiscoveryList'",
                        ],
                    )
                ]
            ),
        )
    if version.affected:
        evidence.append(
            f"{version.text} is a release with {DEFECT}: its aggregator marks Stale a backend whose /apis ignores "
            f"the Accept header; fixed in {fixes}"
        )
    else:
        evidence.append(
            f"the patch release is not known: {DEFECT} affects {STALE_AGGREGATED_DISCOVERY.ranges} (fixed in {fixes})"
        )
    consequence = f"the {gv} API disappears from the cluster although its backend is healthy"
    return Finding(
        cause=Cause.AGGREGATED_DISCOVERY_DEFECT,
        blocking=True,
        summary=(
            f"aggregated discovery lists {gv} as Stale although APIService {name} is Available and /apis/{gv} "
            f"answers: the aggregator defect of {DEFECT} on {version.text or 'a server of unknown version'} "
            f"(the backend {svc_name} in {svc_ns} ignores the Accept header of /apis); no namespace can finish"
        ),
        objects=(ref,),
        evidence=tuple(e for e in evidence if e),
        remedies=remedies.rank(
            [
                remedies.restore(
                    Action.RESTORE_BACKEND,
                    f"Upgrade the control plane to {_target(version)}: its aggregator then falls back to "
                    f"/apis/{gv} and the namespace finishes by itself. Or upgrade the extension API server "
                    f"behind {svc_name} in {svc_ns} to a release whose /apis honours the Accept header "
                    "(serves aggregated discovery, or answers 406)",
                    ["kubectl version", f"kubectl -n {svc_ns} get deploy,pods -o wide"],
                ),
                remedies.delete_apiservice(ref, risk=Risk.HIGH, consequence=consequence),
            ]
        ),
    )


def _target(version: ServerVersion) -> str:
    """The releases that carry the fix, for the control plane's minor when it is known."""
    if version.minor == 27:
        return "1.27.6 or later (kubernetes/kubernetes#120360), or 1.28.2 and later"
    if version.minor == 28:
        return "1.28.2 or later (kubernetes/kubernetes#120359)"
    return "1.27.6, 1.28.2 or any 1.29 and later"
