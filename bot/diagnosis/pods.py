"""pod_on_lost_node: deleting pods whose node cannot confirm it (NotReady or gone).

The API only sets a pod's deletionTimestamp; the kubelet on its node does the final delete. Pods
still inside their grace period are content being deleted normally.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from bot.diagnosis import remedies
from bot.diagnosis.context import Context, Held, still_deleting
from bot.diagnosis.reading import age, node_ready_state, pod_grace_deadline, pod_is_finished
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import ObjectRef


def _deleting_pods(ctx: Context) -> list[Held]:
    return [h for h in ctx.deleting if h.rtype.key == "pods"]


# a kubelet on a Ready node normally confirms a deletion within seconds of the grace period's end
KUBELET_SLACK = timedelta(minutes=2)


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
        # the controller's "unexpected items still remain ... Resource=pods" says the same without waiting
        late = ctx.now - deadline > KUBELET_SLACK or "Resource=pods" in (ctx.facts.content_failure or "")
        overdue_on_ready = ready and late and not held.finalizers
        if (node_ready and overdue_on_ready) or (not node_ready and not ready):
            out.append(held)
    return out


def lost_pods(ctx: Context) -> list[Held]:
    return _overdue(ctx, node_ready=False)


def findings(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    in_grace = [
        h
        for h in _deleting_pods(ctx)
        if (deadline := pod_grace_deadline(h.obj)) is not None and deadline > ctx.now and not h.finalizers
    ]
    if in_grace:
        latest = max(d for h in in_grace if (d := pod_grace_deadline(h.obj)) is not None)
        out.append(
            still_deleting(
                summary=f"{len(in_grace)} pod(s) are inside their termination grace period "
                f"(the last ends in {age(ctx.now, latest)})",
                objects=tuple(h.ref for h in in_grace),
                evidence=tuple(
                    f"pod {h.ref.name} is deleting; its grace period ends at {pod_grace_deadline(h.obj)}"
                    for h in in_grace[:5]
                ),
                remedies=(remedies.wait("Pods stop within their grace period; nothing to do yet"),),
            )
        )
    by_node: dict[str, list[Held]] = defaultdict(list)
    for held in lost_pods(ctx):
        by_node[str(held.obj["spec"]["nodeName"])].append(held)
    for node, pods in sorted(by_node.items()):
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
        owned = [
            h
            for h in pods
            if any(o.get("kind") == "StatefulSet" for o in (h.obj.get("metadata") or {}).get("ownerReferences") or ())
        ]
        node_ref = ObjectRef(api_version="v1", kind="Node", name=node, resource="nodes")
        if node_obj is None:
            evidence.append("pod garbage collection normally force-deletes pods bound to a node that no longer exists")
            risk = Risk.LOW
            consequence = "nothing: the node is gone, so the containers are gone too"
            first = remedies.investigate(
                f"Node {node} no longer exists; check that kube-controller-manager's pod GC is running",
            )
        else:
            risk = Risk.MEDIUM
            consequence = "if the node is only cut off, its containers may still run" + (
                " (StatefulSet pods: a replacement may run twice)" if owned else ""
            )
            first = remedies.restore(
                Action.RESTORE_BACKEND,
                f"Bring node {node} back, or if it is gone for good delete its Node object or taint it "
                "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute; its pods are then removed",
                [f"kubectl describe node {node}"],
            )
        out.append(
            Finding(
                cause=Cause.POD_ON_LOST_NODE,
                blocking=True,
                summary=f"{len(pods)} pod(s) on node {node}, which {words.split(' (')[0]}, cannot finish deleting",
                objects=(*(h.ref for h in pods), node_ref),
                evidence=tuple(evidence),
                remedies=remedies.rank(
                    [
                        *(remedies.force_delete_pod(h.ref, risk=risk, consequence=consequence) for h in pods),
                        first,
                    ]
                ),
            )
        )
    out.extend(_stuck_on_ready_nodes(ctx))
    return out


def _stuck_on_ready_nodes(ctx: Context) -> list[Finding]:
    """Pods long past their grace period on a Ready node: the kubelet cannot finish them."""
    stuck = _overdue(ctx, node_ready=True)
    if not stuck:
        return []
    evidence = []
    line = ctx.facts.line("NamespaceDeletionContentFailure")
    if line:
        evidence.append(line)
    for held in stuck[:5]:
        node = held.obj["spec"]["nodeName"]
        evidence.append(
            f"pod {held.ref.name} has been deleting for {age(pod_grace_deadline(held.obj), ctx.now)} past its grace "
            f"period although node {node} is Ready: its kubelet cannot stop it (a hung container, a volume that "
            "will not unmount)"
        )
    consequence = "the kubelet may still be tearing the containers down"
    return [
        Finding(
            cause=Cause.DELETION_ERROR,
            blocking=True,
            summary=f"{len(stuck)} pod(s) stay Terminating on Ready nodes long after their grace period",
            objects=tuple(h.ref for h in stuck),
            evidence=tuple(evidence),
            remedies=remedies.rank(
                [
                    *(remedies.force_delete_pod(h.ref, risk=Risk.MEDIUM, consequence=consequence) for h in stuck),
                    remedies.investigate(
                        "Find out why the kubelet cannot stop them",
                        [f"kubectl describe pod {stuck[0].ref.name} -n {stuck[0].ref.namespace}"],
                    ),
                ]
            ),
        )
    ]
