"""The prediction for an Active namespace: would deleting it now get stuck, and why.

The same rules and evidence as the diagnosis, applied to what the namespace controller will need
(kubernetes pkg/controller/namespace/deletion/namespaced_resources_deleter.go; reference §2, §5):

- discovery of every group version: the apiservices, aggregated and discovery rules as they are (their
  evidence is nsstuck's own discovery, not the namespace's conditions, which an Active one has none of);
- a DELETE of every object in the namespace as admission will see it (the webhooks rule matches that
  already), and the two writes on the namespace itself: the person's DELETE and the controller's last
  step, the PUT of /finalize (reads are never admitted);
- every finalizer of the namespace's objects and of the namespace, and its controller (`controllers.judge`):
  dead predicts a block; unknown is said as such, a finding that does not block and a gap of the
  prediction (whether it would hold cannot be told); alive does not block, unless the catalogue says its
  cleanup creates objects in the namespace, which a terminating namespace refuses (a predicted
  `finalizer_deadlock`, for an unknown one too: running or not, it cannot remove it). A controller that
  only a workload of the namespace itself runs is deleted with it (`_judge`);
- pods: one on a node that exists and is NotReady keeps its deletionTimestamp for ever (no kubelet
  confirms it); one on a node that no longer exists, or NotReady with the out-of-service taint, is
  removed by the pod garbage collector (said, not claimed as a block); finished pods go at once;
- PVCs that keep `kubernetes.io/pvc-protection`: held while a pod that would be held uses them;
- kube-controller-manager: a Lease that has lapsed means no namespace controller would delete anything.
  Otherwise the namespace controller is taken to run, and so are its own finalizers' controllers (the
  garbage collector, pvc-protection, the Job controller): they are the same process.

What is not predictable is not claimed: a controller that will misbehave later, a kubelet that will fail
to tear a pod down, a webhook that will deny. Remedies are what a person does before the delete: those
that change nothing (restore a backend or a controller, look at something), and the fix a rule ranks first
when it changes the cluster, as a `prepare` step that no button files (nothing is deleted yet, and the
executor acts only on a terminating namespace).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from bot.diagnosis import apiservices, catalogue, controllers, discovery, finalizers, gitops, remedies, webhooks
from bot.diagnosis.admission import DELETE, UPDATE, Write, webhook_matches
from bot.diagnosis.catalogue_model import Owner, RunsIn
from bot.diagnosis.context import Context, Held, Judgement, still_deleting
from bot.diagnosis.controller_state import ordered_deletion
from bot.diagnosis.guarding import config_resource, dead_webhooks, guard, url_webhooks
from bot.diagnosis.leases import LeaseState, controller_manager
from bot.diagnosis.reading import node_ready_state, pod_is_finished, workload_summary
from bot.diagnosis.volumes import PROTECTION, uses
from bot.domain.findings import Action, Cause, ControllerState, Finding, Gap, Prediction, Remedy, Risk
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of, meta, name_of
from bot.domain.snapshot import ResourceType, labels_of

MAX_EXAMPLES = 3
NAMESPACES = ResourceType(group="", version="v1", resource="namespaces", kind="Namespace", namespaced=False)
# the taint of a node shut down for good: the pod garbage collector then force-deletes its terminating
# pods (pkg/controller/podgc/gc_controller.go, gcTerminating; NodeOutOfServiceVolumeDetach, GA in 1.28)
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
# in a Namespace's spec.finalizers only `kubernetes` is processed (by the namespace controller)
NOTHING_IN_SPEC = frozenset({"orphan", "foregroundDeletion"})


def predict(ctx: Context, order: Sequence[Cause]) -> Prediction:
    """What deleting the Active namespace of `ctx` now would meet; findings ordered as `order` ranks causes."""
    found: list[Finding] = []
    for family in (apiservices, discovery, webhooks):
        found.extend(family.findings(ctx))
    found.extend(_namespace_writes(ctx))
    found.extend(_controller_manager(ctx))
    pod_findings, lost = _pods(ctx)
    found.extend(pod_findings)
    gaps = list(ctx.snapshot.gaps)
    for finding, gap in _finalizers(ctx):
        found.append(finding)
        if gap is not None:
            gaps.append(gap)
    held = lost | {o.uid for f in found if f.blocking for o in f.objects if o.kind == "Pod" and o.uid}
    found.extend(_claims(ctx, held))
    for finding, gap in _url_webhooks(ctx):
        found.append(finding)
        gaps.append(gap)
    found.extend(gitops.findings(ctx, predicting=True))
    found.sort(key=lambda f: (not f.blocking, order.index(f.cause)))
    kept = [_before_the_delete(f) for f in guard(ctx, found)]
    return Prediction(findings=tuple(gitops.first(kept)), gaps=tuple(gaps))


def _before_the_delete(finding: Finding) -> Finding:
    """The remedies a person applies before the delete: those that change nothing, and the ones that change
    the cluster only where the rule ranks them first (its fix of the cause), as `prepare` steps; the rest
    (workarounds for a namespace already stuck, last resorts) are left out."""
    kept: list[Remedy] = []
    leading = True
    for remedy in finding.remedies:
        if not remedy.action.changes_cluster:
            leading = False
            kept.append(remedy)
        elif leading:
            kept.append(
                replace(
                    remedy,
                    action=Action.PREPARE,
                    prepares=remedy.action,
                    description=f"Before the delete: {remedy.description}",
                )
            )
    return replace(finding, remedies=tuple(kept))


# --- the namespace's own requests --------------------------------------------------------------------


def _namespace_requests(ctx: Context) -> list[tuple[str, Write]]:
    name = ctx.snapshot.namespace
    labels = labels_of(ctx.namespace_obj)
    return [
        (
            "the DELETE of the namespace itself (kubectl delete namespace)",
            Write(operation=DELETE, group="", version="v1", resource="namespaces", namespace=name, labels=labels),
        ),
        (
            "the namespace controller's last step, the PUT of /finalize",
            Write(
                operation=UPDATE,
                group="",
                version="v1",
                resource="namespaces",
                subresource="finalize",
                namespace=name,
                labels=labels,
            ),
        ),
    ]


def _namespace_writes(ctx: Context) -> list[Finding]:
    """A fail-closed webhook with a dead backend that intercepts the namespace's own DELETE or /finalize."""
    out = []
    requests = _namespace_requests(ctx)
    for hook in dead_webhooks(ctx):
        hits = [(what, match) for what, write in requests if (match := webhook_matches(hook.webhook, write))]
        if not hits:
            continue
        target = f"{hook.chain.name} in {hook.chain.namespace}"
        evidence = [
            f"{hook.config.get('kind')} {name_of(hook.config)}, webhook {hook.name}: failurePolicy Fail, intercepts "
            f"{what}" + "".join(f" ({note})" for note in match.notes)
            for what, match in hits
        ]
        evidence.extend(hook.chain.evidence)
        whose = " and ".join(what for what, _ in hits)
        out.append(
            Finding(
                cause=Cause.WEBHOOK_BLOCKS_DELETE,
                blocking=True,
                summary=f"webhook {hook.name} ({hook.config.get('kind')} {name_of(hook.config)}) fails closed and its "
                f"backend {target} cannot answer, so it would reject {whose}",
                objects=(hook.config_ref, ctx.namespace_ref),
                evidence=tuple(evidence),
                remedies=remedies.rank(_webhook_repairs(hook.config_ref, hook.name, target, hook.uninstalled)),
            )
        )
    return out


def _webhook_repairs(config: ObjectRef, webhook: str, target: str, uninstalled: bool) -> list[Remedy]:
    restore = remedies.restore(Action.RESTORE_BACKEND, f"Restore the backend {target} of webhook {webhook}")
    delete = remedies.delete_webhook_configuration(
        config, consequence=f"every check {config.name} enforces stops until it is reinstalled"
    )
    return [delete, restore] if uninstalled else [restore, delete]


def _url_webhooks(ctx: Context) -> list[tuple[Finding, Gap]]:
    """Fail-closed webhooks called at a URL that intercept a delete: whether they answer, nsstuck cannot tell."""
    out = []
    requests = _namespace_requests(ctx)
    for config, webhook in url_webhooks(ctx):
        name = str(webhook.get("name", ""))
        url = str((webhook.get("clientConfig") or {}).get("url") or "a URL")
        types, objects = webhooks.intercepted(ctx, webhook)
        own = [what for what, write in requests if webhook_matches(webhook, write) is not None]
        if not objects and not own:
            continue
        what = [*own, *(f"the DELETE of {t}" for t in types)]
        config_ref = ObjectRef.of(config, resource=config_resource(config))
        out.append(
            (
                Finding(
                    cause=Cause.WEBHOOK_BLOCKS_DELETE,
                    blocking=False,
                    summary=f"webhook {name} fails closed and calls {url}, which nsstuck cannot check: if it does not "
                    "answer, deleting the namespace fails",
                    objects=(config_ref, *objects[:10]),
                    evidence=(
                        f"{config.get('kind')} {name_of(config)}, webhook {name}: failurePolicy Fail, intercepts "
                        + ", ".join(what),
                    ),
                    remedies=(
                        remedies.investigate(
                            f"Check that {url} answers before the delete (or that {name} is meant to refuse it)"
                        ),
                    ),
                ),
                Gap(what=f"whether webhook {name} ({url}) answers", reason="unknown", detail="a URL webhook"),
            )
        )
    return out


# --- the namespace controller --------------------------------------------------------------------------


def _controller_manager(ctx: Context) -> list[Finding]:
    lease = controller_manager(ctx.snapshot, ctx.now)
    if lease.state is not LeaseState.STALE:
        return []
    return [
        Finding(
            cause=Cause.UNKNOWN,
            blocking=True,
            summary="the namespace controller is not running: kube-controller-manager's Lease has not been renewed, "
            "so nothing would delete the namespace's content",
            objects=(ctx.namespace_ref,),
            evidence=(lease.evidence, "the namespace controller runs in kube-controller-manager"),
            remedies=(
                remedies.restore(
                    Action.RESTORE_CONTROLLER,
                    "Bring kube-controller-manager back before the delete",
                    ["kubectl -n kube-system get lease kube-controller-manager -o yaml"],
                ),
            ),
        )
    ]


# --- pods and claims -------------------------------------------------------------------------------------


def _out_of_service(node: KubeObject) -> bool:
    return any(t.get("key") == OUT_OF_SERVICE for t in (node.get("spec") or {}).get("taints") or ())


def _pods(ctx: Context) -> tuple[list[Finding], set[str]]:
    """Findings on the pods the deletion would leave behind, and the UIDs of the pods it would."""
    lost: dict[str, list[Held]] = defaultdict(list)
    collected: dict[str, list[Held]] = defaultdict(list)
    for held in ctx.remaining:
        if held.rtype.key != "pods":
            continue
        node = str((held.obj.get("spec") or {}).get("nodeName") or "")
        # unscheduled or finished: the API server removes it at once (grace period 0, reference §3.4)
        if not node or pod_is_finished(held.obj) or node not in ctx.snapshot.nodes:
            continue  # a node that could not be read is a gap of the snapshot
        node_obj = ctx.snapshot.nodes[node]
        if node_obj is None or (not node_ready_state(node_obj)[0] and _out_of_service(node_obj)):
            collected[node].append(held)
        elif not node_ready_state(node_obj)[0]:
            lost[node].append(held)
    out = [_lost_node(ctx, node, pods) for node, pods in sorted(lost.items())]
    for node, pods in sorted(collected.items()):
        gone = ctx.snapshot.nodes[node] is None
        why = "no longer exists" if gone else f"is NotReady and tainted {OUT_OF_SERVICE}"
        out.append(
            still_deleting(
                summary=f"{len(pods)} pod(s) on node {node}, which {why}: the pod garbage collector removes them",
                objects=tuple(h.ref for h in pods),
                evidence=(
                    f"node {node} {why}",
                    "kube-controller-manager's pod garbage collector force-deletes pods bound to a node that does "
                    "not exist, and terminating pods on a NotReady node tainted out-of-service",
                ),
                remedies=(remedies.wait("Nothing to do: they go with the namespace"),),
            )
        )
    uids = {str(meta(h.obj).get("uid")) for pods in lost.values() for h in pods if meta(h.obj).get("uid")}
    return out, uids


def _lost_node(ctx: Context, node: str, pods: list[Held]) -> Finding:
    _, words = node_ready_state(ctx.snapshot.nodes[node])
    evidence = [f"pod {h.ref.name} is bound to node {node}" for h in pods[:5]]
    if len(pods) > 5:
        evidence.append(f"... and {len(pods) - 5} more pods on node {node}")
    evidence.append(
        f"node {node} {words}: a deleted pod keeps its deletionTimestamp until the kubelet on its node confirms "
        "the deletion, and this one does not"
    )
    version = ordered_deletion(ctx)
    holds_all = ""
    if version is not None:
        others = sum(1 for h in ctx.remaining if h.rtype.key != "pods")
        evidence.append(
            f"the API server is {version.text}: with OrderedNamespaceDeletion the namespace controller deletes pods "
            f"first and nothing else until they are gone ({others} other object(s) would wait)"
        )
        holds_all = "; they would hold the whole namespace (OrderedNamespaceDeletion)"
    return Finding(
        cause=Cause.POD_ON_LOST_NODE,
        blocking=True,
        summary=f"{len(pods)} pod(s) on node {node}, which {words.split(' (')[0]}, would never finish deleting"
        + holds_all,
        objects=(*(h.ref for h in pods), ObjectRef(api_version="v1", kind="Node", name=node, resource="nodes")),
        evidence=tuple(evidence),
        remedies=(
            remedies.restore(
                Action.RESTORE_BACKEND,
                f"Before the delete, bring node {node} back, or if it is gone for good delete its Node object or "
                f"taint it {OUT_OF_SERVICE}=nodeshutdown:NoExecute: the pod garbage collector then removes its pods",
                [f"kubectl describe node {node}"],
            ),
        ),
    )


def _claims(ctx: Context, held: set[str]) -> list[Finding]:
    """PVCs kept by pvc-protection while a pod the deletion would leave behind uses them."""
    out = []
    pods = list(ctx.snapshot.objects("pods"))
    for claim in ctx.remaining:
        if claim.rtype.key != "persistentvolumeclaims" or PROTECTION not in claim.finalizers:
            continue
        users = [p for p in pods if uses(p, claim.ref.name) and str(meta(p).get("uid")) in held]
        if not users:
            continue
        names = ", ".join(name_of(p) for p in users)
        out.append(
            Finding(
                cause=Cause.PVC_IN_USE,
                blocking=True,
                summary=f"PVC {claim.ref.name} would keep {PROTECTION} while pod(s) {names}, which would be held, "
                "use it",
                objects=(claim.ref, *(ObjectRef.of(p, resource="pods") for p in users)),
                evidence=(
                    f"PVC {claim.ref.name} keeps {PROTECTION}: the pvc-protection controller removes it once no "
                    "scheduled pod of the namespace uses the claim",
                    *(f"pod {name_of(p)} mounts it, and would not go (see its finding)" for p in users),
                ),
                remedies=(
                    remedies.investigate(
                        f"Deal with pod(s) {names} first (see their finding): the PVC goes once they are gone"
                    ),
                ),
            )
        )
    return out


# --- finalizers ---------------------------------------------------------------------------------------


def _finalizers(ctx: Context) -> Iterable[tuple[Finding, Gap | None]]:
    groups: dict[str, list[Held]] = defaultdict(list)
    for one in ctx.remaining:
        for finalizer in one.finalizers:
            groups[finalizer].append(one)
    for finalizer, held in sorted(groups.items()):
        owner = catalogue.owner_for(finalizer, held[0].rtype.group)
        if owner.handled_by_rule is not None or (not _nothing(owner) and _controller_manager_removes(finalizer)):
            continue  # the garbage collector, pvc-protection (see _claims), the Job controller...
        yield from _judged(ctx, finalizer, owner, held, namespace=False)
    namespace = Held(NAMESPACES, ctx.namespace_obj)
    spec = [str(f) for f in (ctx.namespace_obj.get("spec") or {}).get("finalizers") or ()]
    for finalizer in finalizers_of(ctx.namespace_obj):
        owner = catalogue.owner_for(finalizer)
        if owner.handled_by_rule == "gc":
            continue  # the garbage collector processes orphan and foregroundDeletion in metadata.finalizers
        yield from _judged(ctx, finalizer, owner, [namespace], namespace=True)
    for finalizer in spec:
        if finalizer == "kubernetes":
            continue
        if finalizer in NOTHING_IN_SPEC:
            yield _nothing_in_spec(ctx, finalizer), None
            continue
        yield from _judged(ctx, finalizer, catalogue.owner_for(finalizer), [namespace], namespace=True, in_spec=True)


def _controller_manager_removes(finalizer: str) -> bool:
    entry = catalogue.entry(finalizer)
    return (
        entry is not None
        and entry.runtime.runs_in is RunsIn.CONTROL_PLANE
        and entry.runtime.where == "kube-controller-manager"
    )


def _nothing(owner: Owner) -> bool:
    return owner.name.startswith("nothing")


def _judge(
    ctx: Context, finalizer: str, owner: Owner, held: list[Held], *, namespace: bool
) -> tuple[Judgement, KubeObject | None]:
    """`controllers.judge` as it will stand once the namespace is deleted, and the workload of this namespace
    that runs the controller, if only such a workload shows it alive.

    The delete removes every workload of the namespace: a controller that runs only there cannot be counted
    on. The namespace's own finalizers are removed last, after all of its content is gone, so for them it
    is dead; a finalizer of its content is removed before its pods stop only where the namespace controller
    deletes the content at once (before OrderedNamespaceDeletion), which is a race: unknown. From 1.33
    (OrderedNamespaceDeletion on by default) the pods go first: dead.
    """
    here = ctx.snapshot.namespace
    inside = [w for w in ctx.snapshot.workloads if meta(w).get("namespace") == here]
    if not inside:
        return controllers.judge(ctx, finalizer, owner, held), None
    outside = Context(replace(ctx.snapshot, workloads=tuple(w for w in ctx.snapshot.workloads if w not in inside)))
    judged = controllers.judge(outside, finalizer, owner, held)
    if judged.state is ControllerState.ALIVE:
        return judged, None
    full = controllers.judge(ctx, finalizer, owner, held)
    workload = full.workload
    if full.state is not ControllerState.ALIVE or workload is None or meta(workload).get("namespace") != here:
        return judged, None
    name = name_of(workload)
    evidence = [
        *full.evidence,
        f"{workload_summary(workload)} in {here} looks like {owner.name}, and the delete removes it with everything "
        f"in namespace {here}",
    ]
    version = ordered_deletion(ctx)
    if namespace:
        evidence.append("a namespace's own finalizers are removed last, once all of its content is gone")
    elif version is not None:
        evidence.append(
            f"the API server is {version.text}: with OrderedNamespaceDeletion the namespace controller deletes the "
            f"pods first, {name}'s among them, and only then {', '.join(h.ref.display for h in held[:MAX_EXAMPLES])}"
        )
    else:
        evidence.append(
            "the namespace controller deletes the namespace's content at once: whether "
            f"{name} removes {finalizer} before its own pods stop is a race"
        )
        why = f"its controller ({name}) runs in this namespace, which the delete removes"
        return Judgement(
            ControllerState.UNKNOWN,
            evidence,
            why=why,
            find_out=f"First move {name} out of namespace {here}, or delete what keeps {finalizer} first",
            found_by=full.found_by,
        ), workload
    return Judgement(
        ControllerState.DEAD,
        evidence,
        why=f"its controller ({name}) runs in this namespace and would be deleted before it removes {finalizer}",
        found_by=full.found_by,
    ), workload


def _judged(
    ctx: Context, finalizer: str, owner: Owner, held: list[Held], *, namespace: bool, in_spec: bool = False
) -> Iterable[tuple[Finding, Gap | None]]:
    judgement, here = _judge(ctx, finalizer, owner, held, namespace=namespace)
    entry = catalogue.entry(finalizer)
    where = " (in spec.finalizers)" if in_spec else ""
    what = f"namespace {ctx.snapshot.namespace}" if namespace else finalizers.counted(held)
    verb = "keeps" if namespace or len(held) == 1 else "keep"
    them = "it" if namespace or len(held) == 1 else "them"
    examples = ", ".join(h.ref.display for h in held[:MAX_EXAMPLES]) + (" and more" if len(held) > MAX_EXAMPLES else "")
    evidence = [f"{examples} {verb} finalizer {finalizer}{where}"]
    said = finalizers.owner_line(finalizer, owner)
    if said:
        evidence.append(said)
    cause = Cause.NAMESPACE_FINALIZER if namespace else Cause.ORPHANED_FINALIZER
    creates = entry is not None and entry.creates_in_namespace is True
    if creates and not namespace and judgement.state is not ControllerState.DEAD:
        yield _deadlock(ctx, finalizer, owner, held, judgement, [*evidence, *judgement.evidence], what=what), None
        return
    if judgement.state is ControllerState.ALIVE:
        return  # it removes the finalizer once its cleanup is done: nothing to predict
    if judgement.state is ControllerState.DEAD:
        dead = _dead(ctx, finalizer, owner, held, judgement, evidence, namespace=namespace, in_spec=in_spec, what=what)
        if here is not None and not namespace:
            dead = replace(dead, remedies=(_delete_first(ctx, finalizer, held, name_of(here)),))
        elif here is not None:
            elsewhere = remedies.investigate(
                f"Or run {name_of(here)} outside namespace {ctx.snapshot.namespace} before the delete: it removes "
                f"{finalizer} only while it runs"
            )
            dead = replace(dead, remedies=(dead.remedies[0], elsewhere))  # removing it, or moving the controller
        yield dead, None
        return
    checks = judgement.checks or [f"kubectl get deployments,statefulsets,daemonsets -A | grep -i {_word(owner)}"]
    first = remedies.restore(
        Action.RESTORE_CONTROLLER,
        f"{judgement.find_out or f'First find out whether {owner.name} runs'}, before the delete: it must run to "
        f"remove {finalizer}",
        checks,
    )
    if here is not None and not namespace:
        first = _delete_first(ctx, finalizer, held, name_of(here))
    finding = Finding(
        cause=cause,
        blocking=False,
        summary=f"{what} {verb} finalizer {finalizer}{where}; {judgement.why}: if it does not run, deleting the "
        f"namespace would get stuck on {them}",
        objects=tuple(h.ref for h in held),
        evidence=(*evidence, *judgement.evidence),
        remedies=(first,),
        controller=judgement.controller,
    )
    detail = "" if judgement.why.startswith("whether") else judgement.why
    gap = Gap(what=f"whether {owner.name} runs (it removes {finalizer})", reason="unknown", detail=detail)
    yield finding, gap


def _delete_first(ctx: Context, finalizer: str, held: list[Held], controller: str) -> Remedy:
    """While the namespace is Active its controller runs: let it remove its finalizer before the delete."""
    deletes = [
        f"kubectl delete {h.ref.kubectl_type} {h.ref.name}" + (f" -n {h.ref.namespace}" if h.ref.namespace else "")
        for h in held[:MAX_EXAMPLES]
    ]
    return remedies.investigate(
        f"Before deleting namespace {ctx.snapshot.namespace}, delete {'this object' if len(held) == 1 else 'these'} "
        f"first and wait until {controller}, which still runs there, has removed {finalizer} (or run {controller} "
        "in another namespace)",
        deletes,
    )


def _word(owner: Owner) -> str:
    return owner.markers[0] if owner.markers else "controller"


def _dead(  # noqa: PLR0917 (one finalizer's reading, passed on as it is)
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    judgement: Judgement,
    evidence: list[str],
    *,
    namespace: bool,
    in_spec: bool,
    what: str,
) -> Finding:
    """Its controller is dead (or nothing removes it): deleting would get stuck on it."""
    verb = "keeps" if namespace or len(held) == 1 else "keep"
    if not namespace:
        # the diagnosis's own finding for a finalizer nothing removes, with its remedies
        found = finalizers.orphaned(
            ctx, finalizer, owner, held, judgement, evidence, what, verb, before_the_delete=True
        )
        return replace(
            found,
            summary=f"{found.summary}: deleting the namespace would get stuck on {'it' if len(held) == 1 else 'them'}",
        )
    consequence = f"whatever {owner.name} cleans up for a deleted namespace is not cleaned up"
    remedy_list = [
        remedies.remove_namespace_finalizer(
            ctx.namespace_ref,
            finalizer,
            in_spec=in_spec,
            consequence="" if owner.name.startswith("nothing") else consequence,
            risk=Risk.LOW if owner.name.startswith("nothing") else Risk.MEDIUM,
        )
    ]
    if judgement.workload is not None:
        remedy_list.insert(
            0,
            remedies.restore(
                Action.RESTORE_CONTROLLER,
                f"Bring {name_of(judgement.workload)} back before the delete: it removes {finalizer}",
            ),
        )
    elif not owner.name.startswith("nothing"):
        remedy_list.append(
            remedies.restore(
                Action.RESTORE_CONTROLLER, f"Or, if {owner.name} should still be installed, bring it back first"
            )
        )
    where = "spec.finalizers" if in_spec else "metadata.finalizers"
    return Finding(
        cause=Cause.NAMESPACE_FINALIZER,
        blocking=True,
        summary=f"the namespace {verb} {finalizer} in {where}; {judgement.why}: once deleted it would stay Terminating",
        objects=(ctx.namespace_ref,),
        evidence=(*evidence, *judgement.evidence),
        remedies=remedies.rank(remedy_list),
        controller=judgement.controller,
    )


def _nothing_in_spec(ctx: Context, finalizer: str) -> Finding:
    return Finding(
        cause=Cause.NAMESPACE_FINALIZER,
        blocking=True,
        summary=f"the namespace keeps {finalizer} in spec.finalizers, where nothing removes it: once deleted it "
        "would stay Terminating",
        objects=(ctx.namespace_ref,),
        evidence=(
            f"namespace {ctx.snapshot.namespace} has {finalizer} in spec.finalizers",
            "only `kubernetes` in spec.finalizers is processed (by the namespace controller); "
            f"{finalizer} means something only in metadata.finalizers, where the garbage collector processes it",
        ),
        remedies=(
            remedies.remove_namespace_finalizer(
                ctx.namespace_ref, finalizer, in_spec=True, consequence="", risk=Risk.LOW
            ),
        ),
    )


def _deadlock(  # noqa: PLR0917 (one finalizer's reading, passed on as it is)
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    judgement: Judgement,
    evidence: list[str],
    *,
    what: str,
) -> Finding:
    """The catalogue says its cleanup creates objects in the namespace: refused once it is terminating."""
    entry = catalogue.entry(finalizer)
    assert entry is not None  # only called for a catalogued finalizer
    name = name_of(judgement.workload) if judgement.workload is not None else owner.name
    verb = "keeps" if len(held) == 1 else "keep"
    ns = ctx.snapshot.namespace
    deletes = [
        f"kubectl delete {h.ref.kubectl_type} {h.ref.name}" + (f" -n {h.ref.namespace}" if h.ref.namespace else "")
        for h in held[:MAX_EXAMPLES]
    ]
    return Finding(
        cause=Cause.FINALIZER_DEADLOCK,
        blocking=True,
        summary=f"{what} {verb} finalizer {finalizer}; its controller ({name}) must create objects in namespace "
        f"{ns} to remove it, which the API server refuses once the namespace is being deleted: a deadlock",
        objects=tuple(h.ref for h in held),
        evidence=(
            *evidence,
            f"the finalizer catalogue ({entry.source}): {entry.cleanup}",
            "a terminating namespace refuses every new object (NamespaceLifecycle admission: unable to create new "
            f"content in namespace {ns} because it is being terminated)",
        ),
        remedies=(
            remedies.investigate(
                f"Before deleting the namespace, delete {'this object' if len(held) == 1 else 'these objects'} first "
                f"and wait until {name} has removed {finalizer}: while the namespace is Active its cleanup can create "
                "what it needs",
                deletes,
            ),
            remedies.investigate(
                f"Or do by hand what its cleanup does, then remove {finalizer}: {entry.manual_cleanup}"
            ),
        ),
        controller=judgement.controller,
    )
