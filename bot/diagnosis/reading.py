"""Reading raw Kubernetes objects: readiness, selectors, backends. Pure helpers for the rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.domain.durations import human_seconds
from bot.domain.refs import KubeObject, ObjectRef, condition, deletion_time, meta, name_of
from bot.domain.snapshot import NamespaceSnapshot, labels_of

WAITING_PROBLEMS = (
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "RunContainerError",
)


def age(since: datetime | None, now: datetime) -> str:
    """`3h 12m`, `2d 4h`, `45s`: how long ago `since` was."""
    if since is None:
        return "unknown time"
    return human_duration(now - since)


def human_duration(delta: timedelta) -> str:
    """`2d`, `3h 12m`, `45s`: a zero second unit is left out in a sentence of evidence."""
    return human_seconds(int(delta.total_seconds()), keep_zero=False)


def matches_selector(labels: Mapping[str, str], selector: Mapping[str, Any] | None) -> bool:
    """A LabelSelector (matchLabels + matchExpressions) or a plain map (Service selectors)."""
    if not selector:
        return True
    if "matchLabels" in selector or "matchExpressions" in selector:
        for key, value in (selector.get("matchLabels") or {}).items():
            if labels.get(key) != value:
                return False
        for expr in selector.get("matchExpressions") or ():
            key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or ())
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True
    return all(labels.get(str(k)) == str(v) for k, v in selector.items())


# --- pods -----------------------------------------------------------------------------------


def pod_is_ready(pod: KubeObject) -> bool:
    cond = condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True")


def pod_is_finished(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_problem(pod: KubeObject) -> str:
    """Why a pod is not serving, in a few words: `CrashLoopBackOff (container metrics-server)`."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    for cs in status.get("containerStatuses") or ():
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason:
            restarts = cs.get("restartCount")
            extra = f", {restarts} restarts" if restarts else ""
            return f"{reason} (container {cs.get('name')}{extra})"
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if terminated.get("reason"):
            return f"{terminated['reason']} (container {cs.get('name')})"
    if phase == "Pending":
        scheduled = condition(pod, "PodScheduled")
        if scheduled and scheduled.get("status") == "False":
            return f"Pending, not scheduled: {scheduled.get('message') or scheduled.get('reason')}"
        return "Pending"
    if deletion_time(pod) is not None:
        return "being deleted"
    if phase == "Running" and not pod_is_ready(pod):
        return "Running but not Ready"
    return phase


def pod_grace_deadline(pod: KubeObject) -> datetime | None:
    """When a deleting pod's grace period ends: its deletionTimestamp (the API moves it by the grace)."""
    return deletion_time(pod)


def pvc_claims(pod: KubeObject) -> list[str]:
    return [
        str(v["persistentVolumeClaim"]["claimName"])
        for v in (pod.get("spec") or {}).get("volumes") or ()
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)
    ]


# --- nodes ----------------------------------------------------------------------------------


def node_ready_state(node: KubeObject | None) -> tuple[bool, str]:
    """(is the kubelet confirming deletions?, words for the evidence)."""
    if node is None:
        return False, "does not exist"
    ready = condition(node, "Ready")
    if ready is None:
        return False, "has no Ready condition"
    if ready.get("status") == "True":
        return True, "is Ready"
    reason = ready.get("reason") or "NotReady"
    status = "Unknown" if ready.get("status") == "Unknown" else "False"
    message = ready.get("message")
    return False, f"is NotReady (Ready={status}, {reason}{': ' + message if message else ''})"


# --- services and their backends ------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    """A Service as the API server would reach it: does it exist, which endpoints, which pods."""

    namespace: str
    name: str
    service: KubeObject | None
    ready_addresses: int = 0
    not_ready_addresses: int = 0
    endpoint_source: str = "none"  # endpointslices | endpoints | none
    pods: tuple[KubeObject, ...] = ()
    workloads: tuple[KubeObject, ...] = ()
    evidence: tuple[str, ...] = field(default=())

    @property
    def ref(self) -> str:
        return f"service/{self.name} in {self.namespace}"

    @property
    def exists(self) -> bool:
        return self.service is not None

    @property
    def healthy(self) -> bool:
        return self.exists and self.ready_addresses > 0


def _find(objects: Iterable[KubeObject], namespace: str, name: str) -> KubeObject | None:
    for obj in objects:
        m = meta(obj)
        if m.get("name") == name and m.get("namespace") == namespace:
            return obj
    return None


def workloads_selecting(snapshot: NamespaceSnapshot, pod_labels: Mapping[str, str], namespace: str) -> list[KubeObject]:
    out = []
    for workload in snapshot.workloads:
        if meta(workload).get("namespace") != namespace:
            continue
        selector = (workload.get("spec") or {}).get("selector")
        template_labels = ((workload.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        if selector and matches_selector(pod_labels or template_labels, selector):
            out.append(workload)
    return out


def workload_summary(workload: KubeObject) -> str:
    kind = workload.get("kind", "Workload")
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    if kind == "DaemonSet":
        ready_pods, wanted = status.get("numberReady", 0), status.get("desiredNumberScheduled", 0)
        return f"DaemonSet {name_of(workload)}: {ready_pods}/{wanted} ready"
    desired = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0) or 0
    return f"{kind} {name_of(workload)}: {ready}/{desired} ready"


def workload_running(workload: KubeObject) -> bool:
    status = workload.get("status") or {}
    if workload.get("kind") == "DaemonSet":
        return bool(status.get("numberReady"))
    return bool(status.get("readyReplicas"))


def backend(snapshot: NamespaceSnapshot, namespace: str, name: str, port: int | None = None) -> Backend:
    """Follow Service -> endpoints -> pods -> workloads, writing the evidence as we go."""
    service = _find(snapshot.services, namespace, name)
    if service is None:
        return Backend(namespace, name, None, evidence=(f"service/{name} in {namespace} does not exist",))
    evidence: list[str] = []
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    ready = not_ready = 0
    source = "none"
    slices = [
        s
        for s in snapshot.endpoint_slices
        if meta(s).get("namespace") == namespace and labels_of(s).get("kubernetes.io/service-name") == name
    ]
    if slices:
        source = "endpointslices"
        for s in slices:
            for ep in s.get("endpoints") or ():
                if (ep.get("conditions") or {}).get("ready", True):
                    ready += len(ep.get("addresses") or ())
                else:
                    not_ready += len(ep.get("addresses") or ())
    else:
        endpoints = _find(snapshot.endpoints, namespace, name)
        if endpoints is not None:
            source = "endpoints"
            for subset in endpoints.get("subsets") or ():
                ready += len(subset.get("addresses") or ())
                not_ready += len(subset.get("notReadyAddresses") or ())
    if source == "none":
        evidence.append(f"service/{name} in {namespace} has no EndpointSlices or Endpoints")
    else:
        evidence.append(
            f"service/{name} in {namespace} has {ready} ready and {not_ready} not-ready endpoint addresses ({source})"
        )
    pods: list[KubeObject] = []
    if selector:
        pods = [
            p
            for p in snapshot.backend_pods
            if meta(p).get("namespace") == namespace and matches_selector(labels_of(p), selector)
        ]
        if pods:
            for pod in pods:
                state = "Ready" if pod_is_ready(pod) else pod_problem(pod)
                evidence.append(f"pod {name_of(pod)} in {namespace} (selected by the service): {state}")
        else:
            shown = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
            evidence.append(f"no pod in {namespace} matches the service selector {shown}")
    else:
        evidence.append(f"service/{name} in {namespace} has no selector (endpoints are managed by hand)")
    workloads = (
        workloads_selecting(snapshot, {str(k): str(v) for k, v in selector.items()}, namespace) if selector else []
    )
    for workload in workloads:
        evidence.append(workload_summary(workload))
    if selector and not workloads:
        evidence.append(f"no Deployment, StatefulSet or DaemonSet in {namespace} runs pods for this service")
    return Backend(
        namespace,
        name,
        service,
        ready_addresses=ready,
        not_ready_addresses=not_ready,
        endpoint_source=source,
        pods=tuple(pods),
        workloads=tuple(workloads),
        evidence=tuple(evidence),
    )


def kube_ref(obj: KubeObject, resource: str) -> ObjectRef:
    return ObjectRef.of(obj, resource=resource)
