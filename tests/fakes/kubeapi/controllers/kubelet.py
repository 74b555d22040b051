"""The kubelets of all nodes, and the pod garbage collector (PodGC) of kube-controller-manager.

Kubelet (one per Ready node):
- a bound pod that is not deleting and not yet started is started: phase Running, pod IP, host IP,
  container statuses, conditions PodScheduled/Initialized/ContainersReady/Ready. A pod annotated
  ``emulator.nsstuck.dev/crash-loop: "true"`` keeps its containers in CrashLoopBackOff (not ready),
  which is how a scenario says "this workload is broken";
- a pod with a ``deletionTimestamp`` is removed with ``gracePeriodSeconds: 0`` once that time has
  passed on ``emu.clock`` (the containers got their whole grace period). Its finalizers, if any,
  still hold it afterwards, as on a real cluster. A pod annotated
  ``emulator.nsstuck.dev/stuck-terminating: "true"`` is never confirmed (the kubelet cannot tear
  it down, e.g. a hung volume unmount): it stays Terminating on a Ready node. The value
  ``"volumes"`` stops its containers at the end of the grace period (state ``terminated``, as the
  kubelet reports them) and then hangs tearing down its volumes, silently;
- a deleting pod annotated ``emulator.nsstuck.dev/teardown-error: FailedKillPod`` (or ``FailedUnMount``)
  is never confirmed either, and at every pass past its grace period the kubelet records that error as
  a Warning Event about the pod (``FailedUnMount``: its containers have stopped, the volume will not
  unmount). At the start of every graceful pod deletion it records ``Killing`` ("Stopping container
  <name>"). Events go through the API like the kubelet's recorder: a repeated one is patched (count,
  lastTimestamp), a new one is created, and in a terminating namespace the API server refuses the
  create (NamespaceLifecycle), so that Event is lost, as on a real cluster.

A node whose Ready condition is not True has no working kubelet: its pods keep their
``deletionTimestamp`` forever (until the node comes back, the Node is deleted, or someone
force-deletes them).

PodGC: pods bound to a node that does not exist are force-deleted once the node has been missing
for the quarantine time (40 s, as ``gcOrphaned``); ``orphans=False`` turns that off (a
kube-controller-manager running with ``--controllers=-podgc``, or a test that wants to look at the
state before PodGC acts).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import condition, get_path, meta, now_of, parse_time, rfc3339

CRASH_LOOP_ANNOTATION = "emulator.nsstuck.dev/crash-loop"
STUCK_TERMINATING_ANNOTATION = "emulator.nsstuck.dev/stuck-terminating"
TEARDOWN_ERROR_ANNOTATION = "emulator.nsstuck.dev/teardown-error"
# pkg/kubelet/events/event.go reasons, with messages in the kubelet's wording
# (pkg/kubelet/kuberuntime/kuberuntime_manager.go KillPod; pkg/volume/util/operationexecutor UnmountVolume)
TEARDOWN_ERRORS = {
    "FailedKillPod": 'error killing pod: failed to "KillContainer" for "{container}" with KillContainerError: '
    '"rpc error: code = DeadlineExceeded desc = context deadline exceeded"',
    "FailedUnMount": 'UnmountVolume.TearDown failed for volume "{volume}" (UniqueName: "kubernetes.io/csi/{volume}") '
    'pod "{uid}" (UID: "{uid}") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc '
    "= unmount failed: exit status 32: umount: target is busy",
}
ORPHAN_QUARANTINE_SECONDS = 40.0


def pod_ip(namespace: str, name: str) -> str:
    """A stable pod IP in 10.244.0.0/16 derived from the pod's namespace and name."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return f"10.244.{digest[0]}.{max(2, digest[1] % 254)}"


def node_ready(node: JSON) -> bool:
    cond = condition(get_path(node, "status", "conditions"), "Ready")
    return bool(cond and cond.get("status") == "True")


def node_internal_ip(node: JSON) -> str:
    for addr in get_path(node, "status", "addresses") or []:
        if isinstance(addr, dict) and addr.get("type") == "InternalIP":
            return str(addr.get("address") or "")
    return ""


def pod_path(pod: JSON) -> str:
    return f"/api/v1/namespaces/{meta(pod).get('namespace')}/pods/{meta(pod).get('name')}"


def running_status(pod: JSON, node: JSON, now: datetime) -> JSON:
    """The status a kubelet reports for a pod it has started."""
    stamp = rfc3339(now)
    crash = (meta(pod).get("annotations") or {}).get(CRASH_LOOP_ANNOTATION) == "true"
    ready = "False" if crash else "True"
    containers = [c for c in get_path(pod, "spec", "containers") or [] if isinstance(c, dict)]
    statuses: list[JSON] = []
    for c in containers:
        status: JSON = {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": not crash,
            "restartCount": 5 if crash else 0,
            "started": not crash,
        }
        if crash:
            status["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 5m0s restarting failed container={c.get('name', '')} "
                    f"pod={meta(pod).get('name')}_{meta(pod).get('namespace')}({meta(pod).get('uid')})",
                }
            }
            status["lastState"] = {
                "terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp, "finishedAt": stamp}
            }
        else:
            status["state"] = {"running": {"startedAt": stamp}}
        statuses.append(status)
    ip = pod_ip(str(meta(pod).get("namespace")), str(meta(pod).get("name")))
    return {
        **(pod.get("status") or {}),
        "phase": "Running",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": stamp},
            {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
            {
                "type": "Ready",
                "status": ready,
                "lastTransitionTime": stamp,
                **({"reason": "ContainersNotReady"} if crash else {}),
            },
            {
                "type": "ContainersReady",
                "status": ready,
                "lastTransitionTime": stamp,
                **({"reason": "ContainersNotReady"} if crash else {}),
            },
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
        ],
        "hostIP": node_internal_ip(node),
        "hostIPs": [{"ip": node_internal_ip(node)}] if node_internal_ip(node) else [],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": stamp,
        "containerStatuses": statuses,
        "qosClass": get_path(pod, "status", "qosClass") or "BestEffort",
    }


def _force_delete(client: KubeHTTP, pod: JSON) -> bool:
    try:
        client.delete(
            pod_path(pod),
            {"gracePeriodSeconds": 0, "preconditions": {"uid": meta(pod).get("uid")}},
        )
    except ApiError as err:
        if err.not_found or err.conflict:
            return False
        raise
    return True


class Kubelet:
    """All kubelets at once: acts only for pods bound to Ready nodes."""

    name = "kubelet"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        now = now_of(emu)
        nodes = {str(meta(n).get("name")): n for n in client.list_items("/api/v1/nodes")}
        changed = False
        for pod in client.list_items("/api/v1/pods"):
            node = nodes.get(str(get_path(pod, "spec", "nodeName") or ""))
            if node is None or not node_ready(node):
                continue
            deleting = parse_time(meta(pod).get("deletionTimestamp"))
            if deleting is not None:
                changed |= self._deleting(client, pod, deleting, now)
                continue
            if get_path(pod, "status", "phase") in (None, "", "Pending"):
                body = {**pod, "status": running_status(pod, node, now)}
                try:
                    client.put(f"{pod_path(pod)}/status", body)
                except ApiError as err:
                    if err.not_found or err.conflict:
                        continue
                    raise
                changed = True
        return changed

    def __init__(self) -> None:
        self._killing: set[str] = set()  # uids of pods whose Killing was recorded
        self._reported: dict[tuple[str, str], datetime] = {}  # (uid, reason) -> last recorded

    def _deleting(self, client: KubeHTTP, pod: JSON, deadline: datetime, now: datetime) -> bool:
        annotations = meta(pod).get("annotations") or {}
        stuck = annotations.get(STUCK_TERMINATING_ANNOTATION)
        error = annotations.get(TEARDOWN_ERROR_ANNOTATION)
        uid = str(meta(pod).get("uid"))
        graceful = meta(pod).get("deletionGracePeriodSeconds") != 0
        changed = False
        if graceful and uid not in self._killing:
            self._killing.add(uid)
            for container in get_path(pod, "spec", "containers") or []:
                record_event(
                    client,
                    pod,
                    now,
                    kind="Normal",
                    reason="Killing",
                    message=f"Stopping container {container.get('name')}",
                )
                changed = True
        if deadline > now or not graceful:
            return changed
        if not stuck and error not in TEARDOWN_ERRORS:
            return _force_delete(client, pod) or changed
        if stuck == "volumes" or error == "FailedUnMount":
            changed |= _stop_containers(client, pod, deadline)
        if error in TEARDOWN_ERRORS and self._reported.get((uid, error)) != now:
            self._reported[(uid, error)] = now
            message = TEARDOWN_ERRORS[error].format(
                container=(get_path(pod, "spec", "containers") or [{}])[0].get("name", ""),
                volume=_first_volume(pod),
                uid=uid,
            )
            record_event(client, pod, now, kind="Warning", reason=error, message=message)
            changed = True
        return changed


def _first_volume(pod: JSON) -> str:
    for volume in get_path(pod, "spec", "volumes") or []:
        if isinstance(volume, dict) and volume.get("persistentVolumeClaim"):
            return str(volume.get("name"))
    return "data"


def _stop_containers(client: KubeHTTP, pod: JSON, when: datetime) -> bool:
    """What the kubelet reports once it has killed a pod's containers (exit 137 after SIGKILL)."""
    statuses = get_path(pod, "status", "containerStatuses") or []
    if statuses and all("terminated" in (s.get("state") or {}) for s in statuses):
        return False
    stamp = rfc3339(when)
    stopped = []
    for status in statuses:
        started = get_path(status, "state", "running", "startedAt") or stamp
        terminated = {"exitCode": 137, "reason": "Error", "startedAt": started, "finishedAt": stamp}
        stopped.append({**status, "ready": False, "started": False, "state": {"terminated": terminated}})
    body = {**pod, "status": {**(pod.get("status") or {}), "containerStatuses": stopped}}
    try:
        client.put(f"{pod_path(pod)}/status", body)
    except ApiError as err:
        if err.not_found or err.conflict:
            return False
        raise
    return True


def record_event(client: KubeHTTP, pod: JSON, now: datetime, *, kind: str, reason: str, message: str) -> None:
    """The kubelet's event recorder (client-go tools/record): a core v1 Event about the pod; the same
    event again is a patch of its count and lastTimestamp (EventCorrelator), a new one a create."""
    namespace = str(meta(pod).get("namespace"))
    key = hashlib.sha256(f"{meta(pod).get('uid')}/{reason}/{message}".encode()).hexdigest()[:16]
    name = f"{meta(pod).get('name')}.{key}"
    path = f"/api/v1/namespaces/{namespace}/events"
    stamp = rfc3339(now)
    first = (get_path(pod, "spec", "containers") or [{}])[0].get("name", "")
    existing = client.get_or_none(f"{path}/{name}")
    try:
        if existing is not None:
            client.patch(f"{path}/{name}", {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": stamp})
            return
        client.post(
            path,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta(pod).get("name"),
                    "namespace": namespace,
                    "uid": meta(pod).get("uid"),
                    "fieldPath": f"spec.containers{{{first}}}",
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": "kubelet", "host": get_path(pod, "spec", "nodeName") or ""},
                "reportingComponent": "kubelet",
                "reportingInstance": get_path(pod, "spec", "nodeName") or "",
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            },
        )
    except ApiError as err:
        if err.status in (403, 404, 409):  # a terminating namespace refuses new content: the event is lost
            return
        raise


class PodGarbageCollector:
    """gcOrphaned: force-delete pods bound to nodes that do not exist, after a quarantine."""

    name = "pod-garbage-collector"
    enabled = True

    def __init__(self, *, orphans: bool = True, quarantine: float = ORPHAN_QUARANTINE_SECONDS) -> None:
        self.orphans = orphans
        self.quarantine = quarantine
        self._missing_since: dict[str, datetime] = {}

    def reconcile(self, emu: Any) -> bool:
        if not self.orphans:
            return False
        client = client_for(emu)
        now = now_of(emu)
        nodes = {str(meta(n).get("name")) for n in client.list_items("/api/v1/nodes")}
        changed = False
        seen: set[str] = set()
        for pod in client.list_items("/api/v1/pods"):
            node_name = str(get_path(pod, "spec", "nodeName") or "")
            if not node_name or node_name in nodes:
                continue
            seen.add(node_name)
            since = self._missing_since.setdefault(node_name, now)
            if now - since >= timedelta(seconds=self.quarantine):
                changed |= _force_delete(client, pod)
        for name in set(self._missing_since) - seen:
            del self._missing_since[name]
        return changed
