"""kubernetes.io/pvc-protection: a PersistentVolumeClaim being deleted keeps it while a pod uses it.

The pvc-protection controller of kube-controller-manager (kubernetes/kubernetes
pkg/controller/volume/pvcprotection/pvc_protection_controller.go, `podUsesPVC`) counts as a user every
scheduled pod (spec.nodeName set) of the claim's namespace that names it in a persistentVolumeClaim
volume, whatever the pod's phase or deletion, and a pod whose generic ephemeral volume made it unless
the pod is shut down (deletionTimestamp with deletionGracePeriodSeconds 0). With no user left it
removes the finalizer within seconds; so a claim nobody uses that keeps it is orphaned only where that
controller is shown not running (kube-controller-manager's Lease lapsed).
"""

from __future__ import annotations

from datetime import timedelta

from bot.diagnosis import pods as pod_rules
from bot.diagnosis import remedies
from bot.diagnosis.context import Context, Held, still_deleting
from bot.diagnosis.controller_state import RESYNC
from bot.diagnosis.leases import LeaseState, controller_manager
from bot.diagnosis.reading import age, human_duration, node_ready_state, pod_grace_deadline, pvc_claims
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import KubeObject, ObjectRef, deletion_time, meta, name_of

PROTECTION = "kubernetes.io/pvc-protection"


def _shut_down(pod: KubeObject) -> bool:
    return deletion_time(pod) is not None and meta(pod).get("deletionGracePeriodSeconds") == 0


def uses(pod: KubeObject, claim: str) -> bool:
    """`podUsesPVC`: whether the pvc-protection controller counts `pod` as a user of `claim`."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    if claim in pvc_claims(pod):
        return True
    return not _shut_down(pod) and any(
        isinstance(v, dict) and isinstance(v.get("ephemeral"), dict) and f"{name_of(pod)}-{v.get('name')}" == claim
        for v in (pod.get("spec") or {}).get("volumes") or ()
    )


def _state(ctx: Context, pod: KubeObject, bound: timedelta) -> tuple[str, bool]:
    """(the pod's state in words, whether the claim's wait on it blocks the namespace)."""
    deleted = deletion_time(pod)
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if deleted is None:
        return f"{phase.lower()}, not being deleted", True
    if pod_rules.in_grace(pod, ctx.now):
        ends = age(ctx.now, pod_grace_deadline(pod) or ctx.now)
        return f"deleting, inside its grace period (it ends in {ends})", False
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if node not in ctx.snapshot.nodes:
        return f"deleting, {age(deleted, ctx.now)} past its grace period", True
    ready, words = node_ready_state(ctx.snapshot.nodes[node])
    if not ready:
        return f"deleting, on node {node}, which {words.split(' (')[0]}", True
    held = next((h for h in ctx.deleting if h.obj is pod), None)
    if held is None or held.finalizers:
        return f"deleting, {age(deleted, ctx.now)} past its grace period, held by finalizers", True
    teardown = pod_rules.teardown(ctx, held, bound)
    if teardown.stuck(bound):
        still = human_duration(teardown.still_for)
        return f"deleting; the kubelet on node {node} has not finished it, no progress for {still}", True
    if teardown.errors:
        return f"deleting; the kubelet on node {node} fails to tear it down", True
    return f"deleting; the kubelet on node {node} is tearing it down", False


def findings(ctx: Context, bound: timedelta | None = None) -> list[Finding]:
    bound = bound or ctx.no_progress_after
    out = []
    pods = list(ctx.snapshot.objects("pods"))
    for held in ctx.deleting:
        if held.rtype.key != "persistentvolumeclaims" or PROTECTION not in held.finalizers:
            continue
        claim = held.ref.name
        users = [p for p in pods if uses(p, claim)]
        evidence = [f"PVC {claim} has been deleting for {age(deletion_time(held.obj), ctx.now)} and keeps {PROTECTION}"]
        if not users:
            out.append(_unused(ctx, held, evidence))
            continue
        states = [(p, *_state(ctx, p, bound)) for p in users]
        evidence.extend(f"pod {name_of(p)} ({words}) mounts it" for p, words, _ in states)
        names = ", ".join(name_of(p) for p in users)
        pod_refs = tuple(ObjectRef.of(p, resource="pods") for p in users)
        if not any(blocks for _, _, blocks in states):
            out.append(
                still_deleting(
                    summary=f"PVC {claim} waits for pod(s) {names}, which are being deleted",
                    objects=(held.ref, *pod_refs),
                    evidence=evidence,
                    remedies=(remedies.wait(f"The PVC goes as soon as {names} is gone"),),
                )
            )
            continue
        out.append(
            Finding(
                cause=Cause.PVC_IN_USE,
                blocking=True,
                summary=f"PVC {claim} cannot go while pod(s) {names} use it",
                objects=(held.ref, *pod_refs),
                evidence=tuple(evidence),
                remedies=remedies.rank(
                    [
                        remedies.wait(
                            f"The PVC goes as soon as {names} is gone: deal with the pod first (see its finding)"
                        ),
                        remedies.remove_finalizer(
                            held.ref,
                            PROTECTION,
                            risk=Risk.HIGH,
                            consequence="the volume may be released while a pod still writes to it",
                        ),
                    ]
                ),
            )
        )
    return out


def _unused(ctx: Context, held: Held, evidence: list[str]) -> Finding:
    claim = held.ref.name
    evidence.append("no scheduled pod in the namespace uses it any more")
    lease = controller_manager(ctx.snapshot, ctx.now)
    evidence.append(lease.evidence)
    if lease.state is not LeaseState.STALE:
        evidence.append(
            "the pvc-protection controller (kube-controller-manager) removes the finalizer of a claim no pod uses"
            + ("" if lease.state is LeaseState.FRESH else "; whether it runs cannot be seen")
        )
        deleted = deletion_time(held.obj)
        late = deleted is not None and ctx.now - deleted > RESYNC
        steps = [
            remedies.wait("The pvc-protection controller removes the finalizer once it sees no pod uses the claim")
        ]
        if late or lease.state is not LeaseState.FRESH:
            steps.append(
                remedies.investigate(
                    "If it stays, check that kube-controller-manager runs the pvc-protection controller (a "
                    "--controllers list without it leaves the finalizer for ever)",
                    ["kubectl -n kube-system get pods -l component=kube-controller-manager -o yaml"],
                )
            )
        return still_deleting(
            summary=f"PVC {claim} waits for the PVC protection controller",
            objects=(held.ref,),
            evidence=evidence,
            remedies=remedies.rank(steps),
        )
    evidence.append("so the pvc-protection controller, which runs in kube-controller-manager, is not running")
    return Finding(
        cause=Cause.ORPHANED_FINALIZER,
        blocking=True,
        summary=f"PVC {claim} keeps {PROTECTION}; no pod uses it and the pvc-protection controller is not running",
        objects=(held.ref,),
        evidence=tuple(evidence),
        remedies=remedies.rank(
            [
                remedies.restore(
                    Action.RESTORE_CONTROLLER,
                    "Bring kube-controller-manager back: its pvc-protection controller removes the finalizer",
                    ["kubectl -n kube-system get lease kube-controller-manager -o yaml"],
                ),
                remedies.remove_finalizer(
                    held.ref,
                    PROTECTION,
                    risk=Risk.LOW,
                    consequence="nothing the controller would not do: no pod uses the claim",
                ),
            ]
        ),
    )
