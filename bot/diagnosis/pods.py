"""Deleting pods: inside their grace period, on a lost node, or past it on a Ready node.

The API only sets a pod's deletionTimestamp; the kubelet on its node stops the containers, tears
down the volumes and the sandbox, and then does the final delete (pkg/kubelet/status/status_manager.go
deletes with grace 0 once `canBeDeleted`: containers stopped, volumes unmounted). Pods still inside
their grace period are content being deleted normally. A pod past it on a Ready node is read for
progress before it is called stuck: its container states, the kubelet's Events about it (reasons from
pkg/kubelet/events/event.go: FailedKillPod, FailedUnMount, FailedDetachVolume, FailedUnmapDevice;
Killing while it stops containers) and the VolumeAttachments of its volumes on its node.

With OrderedNamespaceDeletion (KEP-5080, on by default from 1.33) the namespace controller deletes
pods first and nothing else until they are gone (pkg/controller/namespace/deletion/
namespaced_resources_deleter.go): a pod that cannot go then holds the whole namespace.

Issue 37 §5: a pod on a Ready node that has stood still (no container stopped, no kubelet progress Event,
no volume detach) for longer than the bound past its grace period is `pod_not_terminating`: the kubelet
is alive and will not finish it. The finding names the node, the containers still running or not ready,
the backends its volumes need that are gone or unhealthy (`pod_volumes`), and the kubelet's Events where
they exist (created before the namespace was deleted: a terminating namespace takes no new Events, so
their absence proves nothing). Time alone never makes the node lost: a NotReady or gone node stays
`pod_on_lost_node`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.diagnosis import remedies
from bot.diagnosis.context import Context, Held, still_deleting
from bot.diagnosis.controller_state import ordered_deletion
from bot.diagnosis.pod_volumes import Broken, broken_backends, unread_volume_reads
from bot.diagnosis.reading import (
    age,
    human_duration,
    node_ready_state,
    pod_grace_deadline,
    pod_is_finished,
    pvc_claims,
)
from bot.domain.events import EventView, view
from bot.domain.findings import Action, Cause, Finding, Remedy, Risk
from bot.domain.refs import KubeObject, ObjectRef, deletion_time, meta, name_of, parse_time

# the kubelet's (and the attach/detach controller's) reasons for a pod it cannot tear down
# (pkg/kubelet/events/event.go: FailedToKillPod, FailedUnMountVolume, FailedDetachVolume, FailedUnmapDevice)
KUBELET_ERRORS = ("failedkillpod", "failedunmount", "faileddetach", "failedunmapdevice")
# the kubelet's reasons while it stops a pod (KillingContainer, SuccessfulUnMountVolume)
KUBELET_PROGRESS = ("killing", "successfulunmountvolume", "successfuldetachvolume")
# something that changed this recently is progress
PROGRESS_WINDOW = timedelta(minutes=10)
# past its grace period by this much with no progress seen, a pod is worth a look at its kubelet
NO_PROGRESS = timedelta(minutes=10)
# issue 37 §1's bound (past it with no progress, a pod on a Ready node is `pod_not_terminating`) is the
# diagnosis's `Context.no_progress_after` (NSSTUCK_NO_PROGRESS_MINUTES), unless `findings(ctx, bound=...)`
# is given one
MAX_QUOTED = 3


def _deleting_pods(ctx: Context) -> list[Held]:
    return [h for h in ctx.deleting if h.rtype.key == "pods"]


def _overdue(ctx: Context, *, node_ready: bool) -> list[Held]:
    """Deleting pods past their grace period, on nodes that are (or are not) Ready."""
    out = []
    for held in _deleting_pods(ctx):
        node = str((held.obj.get("spec") or {}).get("nodeName") or "")
        deadline = pod_grace_deadline(held.obj)
        if not node or pod_is_finished(held.obj) or deadline is None or deadline > ctx.now:
            continue
        if node not in ctx.snapshot.nodes:
            continue  # the node could not be read: a gap says so
        ready, _ = node_ready_state(ctx.snapshot.nodes[node])
        if (node_ready and ready and not held.finalizers) or (not node_ready and not ready):
            out.append(held)
    return out


def lost_pods(ctx: Context) -> list[Held]:
    return _overdue(ctx, node_ready=False)


def in_grace(pod: KubeObject, now: datetime) -> bool:
    """A deleting pod whose grace period has not ended yet."""
    deadline = pod_grace_deadline(pod)
    return deletion_time(pod) is not None and deadline is not None and deadline > now


# --- what a pod holds ----------------------------------------------------------------------------


def _claims(ctx: Context, pod: KubeObject) -> list[KubeObject]:
    """The namespace's PVC objects the pod mounts (persistentVolumeClaim and generic ephemeral volumes)."""
    names = set(pvc_claims(pod))
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if isinstance(volume, dict) and isinstance(volume.get("ephemeral"), dict):
            names.add(f"{name_of(pod)}-{volume.get('name')}")
    return [c for c in ctx.snapshot.objects("persistentvolumeclaims") if name_of(c) in names]


def _volume_names(ctx: Context, pod: KubeObject) -> set[str]:
    """The PersistentVolumes behind the pod's claims: spec.volumeName when it was read, and the name a
    dynamic provisioner gives (`pvc-<claim uid>`), since a claim not being deleted is read as metadata."""
    out = set()
    for claim in _claims(ctx, pod):
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            out.add(str(volume))
        uid = meta(claim).get("uid")
        if uid:
            out.add(f"pvc-{uid}")
    return out


def attachments(ctx: Context, pod: KubeObject) -> list[KubeObject]:
    """The VolumeAttachments of the pod's volumes on the pod's node."""
    node = (pod.get("spec") or {}).get("nodeName")
    volumes = _volume_names(ctx, pod)
    return [
        a
        for a in ctx.snapshot.volume_attachments
        if (a.get("spec") or {}).get("nodeName") == node
        and ((a.get("spec") or {}).get("source") or {}).get("persistentVolumeName") in volumes
    ]


def holds_volume(ctx: Context, pod: KubeObject) -> bool:
    spec = pod.get("spec") or {}
    kinds = ("persistentVolumeClaim", "ephemeral", "csi")
    mounted = any(isinstance(v, dict) and any(k in v for k in kinds) for v in spec.get("volumes") or ())
    return mounted or bool(attachments(ctx, pod))


def _statefulset(pod: KubeObject) -> str | None:
    for owner in meta(pod).get("ownerReferences") or ():
        if owner.get("kind") == "StatefulSet":
            return str(owner.get("name") or "")
    return None


def force_delete_risk(ctx: Context, pod: KubeObject, node: str) -> tuple[Risk, str]:
    """How much force-deleting the pod can hurt, and why, while its node may still run its containers."""
    reasons = []
    owner = _statefulset(pod)
    if owner is not None:
        reasons.append(
            f"StatefulSet {owner} recreates {name_of(pod)} at once, so two pods with the same identity may run "
            f"while the old containers still run on {node}"
        )
    if holds_volume(ctx, pod):
        reasons.append(
            f"the pod holds a volume that may still be mounted on {node}: a replacement may attach it elsewhere "
            "while the old containers still write to it"
        )
    if reasons:
        return Risk.HIGH, "; ".join(reasons)
    return Risk.MEDIUM, f"the kubelet on {node} may still be tearing the containers down"


# --- how far the kubelet got ---------------------------------------------------------------------


@dataclass(frozen=True)
class Teardown:
    """What the evidence says about one deleting pod past its grace period on a Ready node."""

    pod: Held
    node: str
    overdue: timedelta
    errors: tuple[str, ...]  # the kubelet's errors, quoted
    progress: tuple[str, ...]  # what changed recently
    waits_for: tuple[str, ...]  # what the pod still waits for (volumes, containers)
    detaching: bool  # a volume of it is detaching (since less than the bound)
    # how long nothing has changed: since the end of its grace period, its last container stop, the
    # kubelet's last progress Event or a volume's detach began, whichever is latest
    still_for: timedelta = timedelta(0)
    containers: tuple[str, ...] = ()  # the containers still running or not ready, in words
    broken: tuple[Broken, ...] = ()  # the backends its volumes need, gone or unhealthy

    @property
    def moving(self) -> bool:
        return bool(self.progress) or self.detaching or self.overdue <= NO_PROGRESS

    def stuck(self, bound: timedelta) -> bool:
        """No progress for longer than the bound: the kubelet is not finishing it."""
        return self.still_for > bound


def _events_about(ctx: Context, pod: KubeObject) -> list[EventView]:
    """The Events about the pod since its deletion was asked for (newest first, as collected)."""
    started = deletion_time(pod)
    grace = meta(pod).get("deletionGracePeriodSeconds")
    if started is not None and isinstance(grace, int):
        started -= timedelta(seconds=grace)
    out = []
    for event in ctx.snapshot.events:
        seen = view(event)
        if not seen.about(pod):
            continue
        if started is not None and seen.last_seen is not None and seen.last_seen < started - timedelta(seconds=5):
            continue
        out.append(seen)
    return out


def _quote(event: EventView, now: datetime) -> str:
    who = f" from {event.reporter}" if event.reporter else ""
    when = f", last {age(event.last_seen, now)} ago" if event.last_seen else ""
    times = f" ({event.count} times{when})" if event.count > 1 else f" ({when[2:]})" if when else ""
    return f"{event.type or 'Event'} {event.reason}{who}{times}: {event.message}"


def _recent(moment: datetime | None, now: datetime) -> bool:
    return moment is not None and now - moment <= PROGRESS_WINDOW


def _latest(moments: list[datetime | None]) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)


def _containers(statuses: list[KubeObject]) -> list[str]:
    """The containers still running or not ready, in words: `app (running)`, `init (waiting: ..., not ready)`."""
    out = []
    for status in statuses:
        state = status.get("state") or {}
        name = str(status.get("name"))
        if "running" in state:
            out.append(f"{name} (running{', not ready' if status.get('ready') is False else ''})")
        elif "waiting" in state:
            reason = (state.get("waiting") or {}).get("reason")
            out.append(f"{name} (waiting{': ' + str(reason) if reason else ''}, not ready)")
    return out


def teardown(ctx: Context, held: Held, bound: timedelta | None = None) -> Teardown:
    bound = bound or ctx.no_progress_after
    pod = held.obj
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    deadline = pod_grace_deadline(pod) or ctx.now
    errors: list[str] = []
    progress: list[str] = []
    waits: list[str] = []
    changes: list[datetime | None] = [deadline]
    for event in _events_about(ctx, pod):
        reason = event.reason.lower()
        if any(reason.startswith(r) for r in KUBELET_ERRORS):
            errors.append(_quote(event, ctx.now))
        elif reason in KUBELET_PROGRESS:
            changes.append(event.last_seen)
            if _recent(event.last_seen, ctx.now):
                progress.append(_quote(event, ctx.now))
    statuses = [
        s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in (pod.get("status") or {}).get(key) or ()
        if isinstance(s, dict)
    ]
    running = [str(s.get("name")) for s in statuses if "running" in (s.get("state") or {})]
    stopped = [s for s in statuses if "terminated" in (s.get("state") or {})]
    if stopped:
        last = max((t for s in stopped if (t := parse_time(s["state"]["terminated"].get("finishedAt")))), default=None)
        changes.append(last)
        ago = f", the last {age(last, ctx.now)} ago" if last else ""
        if running and _recent(last, ctx.now):
            progress.append(f"{len(stopped)} of {len(statuses)} container(s) have stopped{ago}")
        if not running:
            waits.append(f"its volumes and sandbox to be torn down (its containers have stopped{ago})")
            if _recent(last, ctx.now):
                progress.append(f"its last container stopped {age(last, ctx.now)} ago")
    if running:
        waits.append(f"container(s) {', '.join(running)} to stop")
    detaching = False
    held_attachments = attachments(ctx, pod)
    for attachment in held_attachments:
        name = name_of(attachment)
        volume = ((attachment.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        status = attachment.get("status") or {}
        detach_error = status.get("detachError") or {}
        if detach_error:
            errors.append(
                f"VolumeAttachment {name} (volume {volume} on node {node}): detach failed"
                + (f" at {detach_error.get('time')}" if detach_error.get("time") else "")
                + f": {detach_error.get('message') or 'no message'}"
            )
        elif (detach_began := deletion_time(attachment)) is not None:
            changes.append(detach_began)
            detaching = detaching or ctx.now - detach_began <= bound
            waits.append(f"volume {volume} to detach from node {node} (VolumeAttachment {name} is being deleted)")
        elif status.get("attached"):
            waits.append(
                f"volume {volume} to be unmounted and detached (VolumeAttachment {name}: attached to node {node})"
            )
    last_change = _latest(changes) or deadline
    return Teardown(
        pod=held,
        node=node,
        overdue=max(timedelta(0), ctx.now - deadline),
        errors=tuple(errors),
        progress=tuple(progress),
        waits_for=tuple(waits),
        detaching=detaching,
        still_for=max(timedelta(0), ctx.now - last_change),
        containers=tuple(_containers(statuses)),
        broken=tuple(broken_backends(ctx, pod, node, held_attachments, bound)),
    )


# --- findings ------------------------------------------------------------------------------------


def _ordered_note(ctx: Context, pods: list[Held]) -> str | None:
    """With OrderedNamespaceDeletion on, what waits for these pods (said only when the version has it on)."""
    version = ordered_deletion(ctx)
    if version is None:
        return None
    waiting = [h for h in ctx.remaining if h.rtype.key != "pods"]
    holds = "this pod holds" if len(pods) == 1 else "these pods hold"
    return (
        f"the API server is {version.text}: with OrderedNamespaceDeletion (on by default from 1.33) the namespace "
        f"controller deletes pods first and nothing else until they are gone, so {holds} "
        f"the whole namespace ({len(waiting)} other object(s) wait)"
    )


def _holds_all(ctx: Context, count: int) -> str:
    if ordered_deletion(ctx) is None:
        return ""
    return f"; {'it holds' if count == 1 else 'they hold'} the whole namespace (OrderedNamespaceDeletion)"


def findings(ctx: Context, bound: timedelta | None = None) -> list[Finding]:
    bound = bound or ctx.no_progress_after
    out: list[Finding] = []
    grace = [h for h in _deleting_pods(ctx) if in_grace(h.obj, ctx.now) and not h.finalizers]
    if grace:
        latest = max(d for h in grace if (d := pod_grace_deadline(h.obj)) is not None)
        out.append(
            still_deleting(
                summary=f"{len(grace)} pod(s) are inside their termination grace period "
                f"(the last ends in {age(ctx.now, latest)})",
                objects=tuple(h.ref for h in grace),
                evidence=tuple(
                    f"pod {h.ref.name} is deleting; its grace period ends at {pod_grace_deadline(h.obj)}"
                    for h in grace[:5]
                ),
                remedies=(remedies.wait("Pods stop within their grace period; nothing to do yet"),),
            )
        )
    by_node: dict[str, list[Held]] = defaultdict(list)
    for held in lost_pods(ctx):
        by_node[str(held.obj["spec"]["nodeName"])].append(held)
    for node, pods in sorted(by_node.items()):
        out.append(_lost_node(ctx, node, pods))
    out.extend(_on_ready_nodes(ctx, bound))
    return out


def _lost_node(ctx: Context, node: str, pods: list[Held]) -> Finding:
    node_obj = ctx.snapshot.nodes.get(node)
    _, words = node_ready_state(node_obj)
    evidence = []
    line = ctx.facts.line("NamespaceContentRemaining")
    if line and "pods." in line:
        evidence.append(line)
    for held in pods[:5]:
        evidence.append(
            f"pod {held.ref.name} has been deleting for {age(pod_grace_deadline(held.obj), ctx.now)} "
            f"past its grace period on node {node}"
        )
    evidence.append(f"node {node} {words}: no kubelet confirms the deletion")
    ordered = _ordered_note(ctx, pods)
    if ordered:
        evidence.append(ordered)
    node_ref = ObjectRef(api_version="v1", kind="Node", name=node, resource="nodes")
    if node_obj is None:
        evidence.append("pod garbage collection normally force-deletes pods bound to a node that no longer exists")
        forced = [
            remedies.force_delete_pod(
                h.ref, risk=Risk.LOW, consequence="nothing: the node is gone, so the containers are gone too"
            )
            for h in pods
        ]
        first = remedies.investigate(
            f"Node {node} no longer exists; check that kube-controller-manager's pod GC is running",
        )
    else:
        forced = []
        for held in pods:
            risk, why = force_delete_risk(ctx, held.obj, node)
            forced.append(
                remedies.force_delete_pod(held.ref, risk=risk, consequence=f"if node {node} is only cut off: {why}")
            )
        first = remedies.restore(
            Action.RESTORE_BACKEND,
            f"Bring node {node} back, or if it is gone for good delete its Node object or taint it "
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute; its pods are then removed",
            [f"kubectl describe node {node}"],
        )
    return Finding(
        cause=Cause.POD_ON_LOST_NODE,
        blocking=True,
        summary=f"{len(pods)} pod(s) on node {node}, which {words.split(' (')[0]}, cannot finish deleting"
        + _holds_all(ctx, len(pods)),
        objects=(*(h.ref for h in pods), node_ref),
        evidence=tuple(evidence),
        remedies=remedies.rank([*forced, first]),
    )


def _on_ready_nodes(ctx: Context, bound: timedelta) -> list[Finding]:
    """Pods past their grace period on a Ready node: standing still past the bound, failing, progressing, or
    with no progress seen (one finding per node for the stuck, the failing and the silent ones)."""
    out: list[Finding] = []
    every = [teardown(ctx, h, bound) for h in _overdue(ctx, node_ready=True)]
    condition = ctx.facts.line("NamespaceDeletionContentFailure")
    for node, group in _by_node([t for t in every if t.stuck(bound)]):
        out.append(_not_terminating(ctx, node, group, condition, bound))
    seen = [t for t in every if not t.stuck(bound)]
    for node, group in _by_node([t for t in seen if t.errors]):
        out.append(_failing(ctx, node, group, condition))
    moving = [t for t in seen if not t.errors and t.moving]
    if moving:
        pods = [t.pod for t in moving]
        evidence = []
        for t in moving[:5]:
            waits = "; ".join(t.waits_for) or f"the kubelet on node {t.node} to confirm the deletion"
            evidence.append(
                f"pod {t.pod.ref.name} is {age(ctx.now - t.overdue, ctx.now)} past its grace period on Ready node "
                f"{t.node}; it waits for {waits}"
            )
            evidence.extend(f"progress: {p}" for p in t.progress[:MAX_QUOTED])
        ordered = _ordered_note(ctx, pods)
        if ordered:
            evidence.append(ordered)
        first = moving[0]
        waits_for = first.waits_for[0] if first.waits_for else f"the kubelet on node {first.node}"
        out.append(
            still_deleting(
                summary=f"{len(moving)} pod(s) past their grace period are still being torn down by their kubelet "
                f"(pod {first.pod.ref.name} waits for {waits_for})" + _holds_all(ctx, len(moving)),
                objects=tuple(h.ref for h in pods),
                evidence=evidence,
                remedies=(remedies.wait("The kubelet removes the pods once their containers and volumes are down"),),
            )
        )
    for node, group in _by_node([t for t in seen if not t.errors and not t.moving]):
        out.append(_no_progress(ctx, node, group, bound))
    return out


def _by_node(teardowns: list[Teardown]) -> list[tuple[str, list[Teardown]]]:
    groups: dict[str, list[Teardown]] = defaultdict(list)
    for t in teardowns:
        groups[t.node].append(t)
    return sorted(groups.items())


def _describe(t: Teardown) -> list[str]:
    ref = t.pod.ref
    return [
        f"kubectl describe pod {ref.name} -n {ref.namespace}",
        f"kubectl get events -n {ref.namespace} --field-selector involvedObject.name={ref.name}",
        "kubectl get volumeattachments",
    ]


def _force_deletes(ctx: Context, group: list[Teardown]) -> list[Remedy]:
    out = []
    for t in group:
        risk, why = force_delete_risk(ctx, t.pod.obj, t.node)
        out.append(remedies.force_delete_pod(t.pod.ref, risk=risk, consequence=why))
    return out


def _pods(group: list[Teardown]) -> str:
    names = [t.pod.ref.name for t in group]
    return (
        f"pod {names[0]}"
        if len(names) == 1
        else f"{len(names)} pods ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    )


def _failing(ctx: Context, node: str, group: list[Teardown], condition: str | None) -> Finding:
    evidence = [condition] if condition else []
    for t in group[:MAX_QUOTED]:
        evidence.append(
            f"pod {t.pod.ref.name} is {age(ctx.now - t.overdue, ctx.now)} past its grace period on Ready node "
            f"{node}, and its kubelet reports errors tearing it down:"
        )
        evidence.extend(t.errors[:MAX_QUOTED])
        evidence.extend(f"it waits for {w}" for w in t.waits_for[:MAX_QUOTED])
    ordered = _ordered_note(ctx, [t.pod for t in group])
    if ordered:
        evidence.append(ordered)
    return Finding(
        cause=Cause.DELETION_ERROR,
        blocking=True,
        summary=f"the kubelet on node {node} fails to tear down {_pods(group)}" + _holds_all(ctx, len(group)),
        objects=tuple(t.pod.ref for t in group),
        evidence=tuple(evidence),
        remedies=remedies.rank(
            [
                remedies.investigate(
                    f"Fix what the kubelet on node {node} reports (a hung container runtime, a volume that will "
                    "not unmount or detach); it then removes the pods",
                    _describe(group[0]),
                ),
                *_force_deletes(ctx, group),
            ]
        ),
    )


def _no_progress(ctx: Context, node: str, group: list[Teardown], bound: timedelta) -> Finding:
    minutes = int(NO_PROGRESS.total_seconds()) // 60
    evidence = [
        f"{_pods(group)} on Ready node {node}, {age(ctx.now - max(t.overdue for t in group), ctx.now)} past "
        f"{'its' if len(group) == 1 else 'their'} grace period: no container stopped, no kubelet Event and no "
        f"volume detach in the last {minutes} minutes, and no kubelet error is recorded (Events expire after an "
        "hour, and none can be created in a terminating namespace)",
    ]
    for t in group[:MAX_QUOTED]:
        evidence.extend(f"pod {t.pod.ref.name} waits for {w}" for w in t.waits_for[:MAX_QUOTED])
        evidence.extend(e for b in t.broken for e in b.evidence)
    evidence.append(
        f"no progress for {human_duration(max(t.still_for for t in group))}; past "
        f"{human_duration(bound)} without progress it is not being finished (pod_not_terminating)"
    )
    ordered = _ordered_note(ctx, [t.pod for t in group])
    if ordered:
        evidence.append(ordered)
    return still_deleting(
        summary=f"{_pods(group)}: no progress for {human_duration(max(t.still_for for t in group))}; look at the "
        f"kubelet on node {node}" + _holds_all(ctx, len(group)),
        objects=tuple(t.pod.ref for t in group),
        evidence=evidence,
        remedies=remedies.rank(
            [
                remedies.investigate(
                    f"Look at the kubelet on node {node} (its log, the container runtime, the pods' volumes) "
                    "before any force-delete",
                    [*_describe(group[0]), f"journalctl -u kubelet  # on node {node}"],
                ),
                *_force_deletes(ctx, group),
            ]
        ),
    )


def _node_ref(node: str) -> ObjectRef:
    return ObjectRef(api_version="v1", kind="Node", name=node, resource="nodes")


def _not_terminating(
    ctx: Context, node: str, group: list[Teardown], condition: str | None, bound: timedelta
) -> Finding:
    """Pods on Ready node `node` standing still for longer than the bound: the kubelet will not finish them."""
    still = human_duration(max(t.still_for for t in group))
    evidence = [condition] if condition else []
    remaining = ctx.facts.line("NamespaceContentRemaining")
    if remaining and "pods" in remaining:
        evidence.append(remaining)
    broken: list[Broken] = []
    for t in group:
        broken.extend(b for b in t.broken if b.target not in [x.target for x in broken])
    for t in group[:MAX_QUOTED]:
        name = t.pod.ref.name
        evidence.append(
            f"pod {name} is {human_duration(t.overdue)} past its grace period on Ready node {node}, with no "
            f"progress for {human_duration(t.still_for)}: no container stopped, no kubelet progress Event and no "
            "volume detach since"
        )
        if t.containers:
            evidence.append(f"pod {name}: container(s) still running or not ready: {', '.join(t.containers)}")
        evidence.extend(f"pod {name} waits for {w}" for w in t.waits_for[:MAX_QUOTED])
        if t.errors:
            evidence.append(
                f"the kubelet's Events about pod {name} (created before the namespace was deleted: a terminating "
                "namespace takes no new Events):"
            )
            evidence.extend(t.errors[:MAX_QUOTED])
    for b in broken:
        evidence.extend(b.evidence)
    unread = unread_volume_reads(ctx, [t.pod.obj for t in group], node)
    if unread:
        evidence.append(
            f"what its volumes need could not all be read, so no backend is judged there: {'; '.join(unread)}"
        )
    if not any(t.errors for t in group):
        evidence.append(
            "no kubelet Event (FailedKillPod, FailedUnMount) about these pods: a terminating namespace takes no new "
            "Events and old ones expire after an hour, so their absence proves nothing"
        )
    evidence.append(
        f"node {node} is Ready: its kubelet runs, but has not finished the pods for longer than the bound "
        f"({human_duration(bound)} without progress)"
    )
    ordered = _ordered_note(ctx, [t.pod for t in group])
    if ordered:
        evidence.append(ordered)
    steps: list[Remedy] = [
        Remedy(
            action=Action.RESTORE_BACKEND,
            risk=Risk.NONE,
            description=b.restore,
            targets=(b.target,),
            commands=b.commands,
        )
        for b in broken
    ]
    if not broken:
        steps.append(
            remedies.investigate(
                f"Read the kubelet's log on node {node} for these pods (a hung container runtime, a volume that "
                "will not unmount); nothing nsstuck can read says why",
                [
                    *_describe(group[0]),
                    f"journalctl -u kubelet --since '-{int(bound.total_seconds()) // 60}m'  # on node {node}",
                ],
            )
        )
    hangs = any("NFS" in b.short for b in broken)
    steps.append(
        Remedy(
            action=Action.RESTORE_BACKEND,
            risk=Risk.LOW,
            description=f"Restart the kubelet on node {node}: it retries tearing the pods down"
            + (
                "; a mount hung in the kernel (a hard NFS mount whose server is gone) is freed only by draining "
                "and rebooting the node"
                if hangs
                else ""
            ),
            targets=(_node_ref(node),),
            commands=(f"systemctl restart kubelet  # on node {node}", f"kubectl describe node {node}"),
        )
    )
    summary = f"the kubelet on Ready node {node} has not finished {_pods(group)}: no progress for {still}"
    if broken:
        summary += f" ({broken[0].short})"
    return Finding(
        cause=Cause.POD_NOT_TERMINATING,
        blocking=True,
        summary=summary + _holds_all(ctx, len(group)),
        objects=(*(t.pod.ref for t in group), _node_ref(node)),
        evidence=tuple(evidence),
        remedies=remedies.rank([*steps, *_force_deletes(ctx, group)]),
    )
