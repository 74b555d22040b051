"""apiservice_unavailable: an aggregated API cannot serve discovery, so no namespace can finish.

The chain of evidence follows the aggregator: APIService -> Service -> endpoints -> pods ->
workload; when all of that is healthy and the APIService is still unavailable, the API server
cannot reach the backend (network, as in seeds 001 and 004). A version aggregated discovery lists as
Stale is failing, with the same chain; one whose APIService is Available and whose per-version
document answers is for aggregated.py (the aggregator defect of kubernetes/kubernetes#119662).
"""

from __future__ import annotations

from bot.diagnosis import aggregated, remedies
from bot.diagnosis.context import Context
from bot.diagnosis.reading import backend, pod_is_ready
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import KubeObject, ObjectRef, condition, name_of


def _group_version(apiservice: KubeObject) -> str:
    spec = apiservice.get("spec") or {}
    group, version = spec.get("group") or "", spec.get("version") or ""
    return f"{group}/{version}" if group else version


def _is_local(apiservice: KubeObject) -> bool:
    return not (apiservice.get("spec") or {}).get("service")


def _unavailable(ctx: Context) -> list[tuple[KubeObject, str]]:
    """APIServices that are not Available, or whose group version failed our own discovery."""
    failing_gvs = {gv.group_version: gv for gv in ctx.snapshot.failing_group_versions()}
    served = {name_of(a) for a, _ in aggregated.stale_but_served(ctx)}
    out = []
    for apiservice in ctx.snapshot.apiservices:
        gv = _group_version(apiservice)
        if name_of(apiservice) in served:
            continue  # aggregated.py: Stale while Available and answering
        available = condition(apiservice, "Available")
        not_available = available is not None and available.get("status") != "True"
        if _is_local(apiservice):
            # the API server serves it itself: not an aggregated API that is down. Its failure (a version
            # the API server answering did not register, during an upgrade) is discovery.py's
            continue
        if not_available or gv in failing_gvs:
            out.append((apiservice, gv))
    return out


def findings(ctx: Context) -> list[Finding]:
    out = aggregated.findings(ctx)
    failing = {gv.group_version: gv for gv in ctx.snapshot.failing_group_versions()}
    for apiservice, gv in _unavailable(ctx):
        name = name_of(apiservice)
        ref = ObjectRef.of(apiservice, resource="apiservices")
        evidence: list[str] = []
        if ctx.facts.discovery_message and gv in ctx.facts.discovery_failures:
            evidence.append(ctx.facts.line("NamespaceDeletionDiscoveryFailure") or "")
        if gv in failing:
            status = failing[gv]
            body = f" (body {status.body.strip()!r})" if status.body else ""
            if status.stale:
                evidence.append(
                    f"aggregated discovery (apidiscovery.k8s.io/{status.aggregated}) lists {gv} with freshness "
                    "Stale: the namespace controller fails discovery on it"
                )
            if status.status_code is not None and status.legacy_answered is not True:
                evidence.append(f"GET /apis/{gv} answered {status.status_code}{body}: {status.error}")
            elif status.legacy_answered:
                evidence.append(f"GET /apis/{gv} (the per-version document) answered 200")
        available = condition(apiservice, "Available")
        if available is not None:
            evidence.append(
                f"APIService {name}: Available={available.get('status')} ({available.get('reason')}): "
                f"{available.get('message')}"
            )
        else:
            evidence.append(f"APIService {name} has no Available condition yet")
        reason = str((available or {}).get("reason") or "")
        service = (apiservice.get("spec") or {}).get("service") or {}
        remedy_list = []
        summary: str
        if service:  # every APIService here has one: Local ones are discovery.py's
            svc_ns, svc_name = str(service.get("namespace", "")), str(service.get("name", ""))
            chain = backend(ctx.snapshot, svc_ns, svc_name)
            evidence.extend(chain.evidence)
            consequence = f"the {gv} API disappears from the cluster"
            uses = _uses(gv)
            if uses:
                consequence += f" ({uses})"
            if not chain.exists or (not chain.pods and not chain.workloads):
                # the backend was uninstalled: the registration is stale, deleting it is the fix
                summary = (
                    f"APIService {name} points at {chain.ref}, which "
                    f"{'does not exist' if not chain.exists else 'has no pods and no workload'}: "
                    f"its backend was uninstalled, so discovery of {gv} fails and no namespace can finish"
                )
                remedy_list.append(remedies.delete_apiservice(ref, risk=Risk.LOW, consequence=consequence))
                remedy_list.append(
                    remedies.restore(
                        Action.RESTORE_BACKEND,
                        f"Or, if {gv} is still wanted, reinstall the component that serves it ({svc_name} in {svc_ns})",
                    )
                )
            elif chain.ready_addresses == 0 or not any(pod_is_ready(p) for p in chain.pods):
                broken = [p for p in chain.pods if not pod_is_ready(p)]
                detail = f"{len(broken)} of {len(chain.pods)} backing pods are not ready" if chain.pods else "no pods"
                summary = (
                    f"APIService {name} is unavailable ({reason or 'not Available'}): {chain.ref} has no ready "
                    f"endpoints ({detail}), so discovery of {gv} fails and no namespace can finish"
                )
                commands = [f"kubectl -n {svc_ns} get pods -o wide"]
                for workload in chain.workloads:
                    commands.append(
                        f"kubectl -n {svc_ns} describe {workload.get('kind', '').lower()} {name_of(workload)}"
                    )
                for pod in broken[:2]:
                    commands.append(f"kubectl -n {svc_ns} logs {name_of(pod)} --all-containers --previous")
                remedy_list.append(
                    remedies.restore(
                        Action.RESTORE_BACKEND,
                        f"Restore the backend of {gv}: get {svc_name} in {svc_ns} ready again; the APIService "
                        "becomes Available and the namespace finishes by itself",
                        commands,
                    )
                )
                remedy_list.append(remedies.delete_apiservice(ref, risk=Risk.MEDIUM, consequence=consequence))
            else:
                summary = (
                    f"APIService {name} is unavailable ({reason or 'not Available'}) although {chain.ref} has "
                    f"{chain.ready_addresses} ready endpoint(s): the API server cannot reach its backend "
                    "(network path from the control plane to the pod network)"
                )
                evidence.append(
                    "the backend looks healthy from inside the cluster, so the failure is on the path from the "
                    "API server to the pods (routes, security groups, network policies, firewall)"
                )
                remedy_list.append(
                    remedies.restore(
                        Action.RESTORE_BACKEND,
                        f"Restore connectivity from the API server to {svc_name} in {svc_ns}: check the routes to the "
                        "node running its pods, cloud route controller, security groups and network policies",
                        [
                            f"kubectl get apiservice {name} -o yaml",
                            f"kubectl -n {svc_ns} get endpointslices -o wide",
                        ],
                    )
                )
                remedy_list.append(remedies.delete_apiservice(ref, risk=Risk.HIGH, consequence=consequence))
        out.append(
            Finding(
                cause=Cause.APISERVICE_UNAVAILABLE,
                blocking=True,
                summary=summary,
                objects=(ref,),
                evidence=tuple(e for e in evidence if e),
                remedies=remedies.rank(remedy_list),
            )
        )
    return out


def explained_group_versions(ctx: Context) -> set[str]:
    """Group versions whose failure an unavailable APIService, or the aggregator's Stale listing of an
    available one, explains."""
    return {gv for _, gv in _unavailable(ctx)} | {s.group_version for _, s in aggregated.stale_but_served(ctx)}


def _uses(gv: str) -> str:
    group = gv.split("/", maxsplit=1)[0]
    if group == "metrics.k8s.io":
        return "kubectl top and HorizontalPodAutoscalers on CPU/memory stop working until it is reinstalled"
    if group in ("custom.metrics.k8s.io", "external.metrics.k8s.io"):
        return "HorizontalPodAutoscalers on custom or external metrics stop working"
    return ""
