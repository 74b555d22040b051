"""orphaned_finalizer: objects in the namespace keep finalizers that no running controller removes.

For every finalizer that holds an object: who is supposed to remove it (catalogue, then the domain
heuristics), whether that controller runs in the cluster, and the reasoning, written as evidence.
A finalizer whose controller is alive is not orphaned: that is content still being deleted.
"""

from __future__ import annotations

from collections import defaultdict

from bot.diagnosis import catalogue, remedies
from bot.diagnosis.context import Context, Held, still_deleting
from bot.diagnosis.reading import age, workload_running, workload_summary
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import KubeObject, deletion_time, meta, name_of

MAX_EXAMPLES = 3


def _by_finalizer(ctx: Context) -> dict[str, list[Held]]:
    groups: dict[str, list[Held]] = defaultdict(list)
    for held in ctx.deleting:
        for finalizer in held.finalizers:
            groups[finalizer].append(held)
    return dict(sorted(groups.items()))


def _dependents(ctx: Context, uid: str) -> list[Held]:
    return [h for h in ctx.remaining if any(o.get("uid") == uid for o in meta(h.obj).get("ownerReferences") or ())]


def findings(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    workloads_gap = [g for g in ctx.snapshot.gaps if "deployments" in g.what or "workloads" in g.what]
    for finalizer, held in _by_finalizer(ctx).items():
        group = held[0].rtype.group
        owner = catalogue.owner_for(finalizer, group)
        if owner.handled_by_rule == "pvc_in_use":
            continue
        what = _counted(held)
        verb, waits = ("keeps", "waits") if len(held) == 1 else ("keep", "wait")
        examples = [h.ref.display for h in held[:MAX_EXAMPLES]]
        evidence = []
        condition_line = ctx.facts.line("NamespaceFinalizersRemaining")
        if condition_line and finalizer in ctx.facts.finalizers_remaining:
            evidence.append(condition_line)
        oldest = min((t for h in held if (t := deletion_time(h.obj)) is not None), default=None)
        evidence.append(
            f"{', '.join(examples)}{' and more' if len(held) > MAX_EXAMPLES else ''} "
            f"keep{'s' if len(held) == 1 else ''} finalizer {finalizer}, deleting for {age(oldest, ctx.now)}"
        )
        if owner.name.startswith("nothing"):
            evidence.append(f"no controller removes a finalizer named {finalizer!r} from a {held[0].obj.get('kind')}")
        elif catalogue.lookup(finalizer):
            evidence.append(f"{finalizer} is a well-known finalizer, removed by {owner.name}")
        else:
            evidence.append(
                f"{finalizer} is not a well-known finalizer; judging by its domain it belongs to {owner.name}"
            )

        if owner.handled_by_rule == "gc":
            dependents = [d for h in held for d in _dependents(ctx, str(meta(h.obj).get("uid")))]
            left = len(dependents)
            evidence.append(f"{len(dependents)} dependent object(s) still reference these owners")
            out.append(
                still_deleting(
                    f"{what} {waits} for the garbage collector ({finalizer}); {left} dependents left",
                    objects=[h.ref for h in held],
                    evidence=evidence,
                    remedies=(remedies.wait("The garbage collector removes it once the dependents are gone"),),
                )
            )
            continue
        if owner.builtin:
            evidence.append("that controller is part of the control plane and assumed to be running")
            out.append(
                still_deleting(
                    f"{what} {waits} for {owner.name} to remove {finalizer}",
                    objects=[h.ref for h in held],
                    evidence=evidence,
                    remedies=(remedies.wait(f"{owner.name} removes {finalizer} when its work is done"),),
                )
            )
            continue

        candidates = catalogue.matching_workloads(owner.markers, ctx.snapshot.workloads)
        running = [w for w in candidates if workload_running(w)]
        if owner.markers:
            evidence.append(
                f"looked for {', '.join(repr(m) for m in owner.markers)} in the names, labels and images of "
                f"{len(ctx.snapshot.workloads)} Deployments, StatefulSets and DaemonSets"
            )
        if workloads_gap:
            evidence.append("the cluster's workloads could not all be listed, so this attribution is uncertain")
        if running:
            kind, namespace, name = _identity(running[0])
            evidence.extend(f"running: {workload_summary(w)} in {meta(w).get('namespace')}" for w in running[:3])
            out.append(
                still_deleting(
                    f"{what} {verb} {finalizer}; its controller ({name}) is running and should remove it",
                    objects=[h.ref for h in held],
                    evidence=evidence,
                    remedies=remedies.rank(
                        [
                            remedies.wait(f"{name} is running; give it time to finish its cleanup"),
                            remedies.investigate(
                                f"If it does not progress, read the logs of {name}",
                                [f"kubectl -n {namespace} logs {kind}/{name}"],
                            ),
                        ]
                    ),
                )
            )
            continue

        if candidates:
            kind, namespace, name = _identity(candidates[0])
            evidence.extend(f"not running: {workload_summary(w)} in {meta(w).get('namespace')}" for w in candidates[:3])
            state = f"its controller ({name}) exists but is not running"
            restore = remedies.restore(
                Action.RESTORE_CONTROLLER,
                f"Bring {name} back (scale it up or fix its pods): it removes {finalizer} after running its cleanup",
                [f"kubectl -n {namespace} describe {kind} {name}"],
            )
        else:
            if owner.markers:
                evidence.append(f"no workload in the cluster looks like {owner.name}: it was uninstalled")
            state = "no running controller handles it"
            restore = remedies.restore(
                Action.RESTORE_CONTROLLER,
                f"Or, if {owner.name} should still be installed, reinstall it; it removes {finalizer} itself",
            )
        nothing_owns = owner.name.startswith("nothing")
        risk = Risk.LOW if nothing_owns else Risk.MEDIUM
        consequence = (
            "nothing: no controller would ever act on this finalizer"
            if nothing_owns
            else f"the cleanup {owner.name} would have done (external resources it manages) does not happen"
        )
        object_remedies = [
            remedies.remove_finalizer(h.ref, finalizer, risk=risk, consequence=consequence) for h in held
        ]
        out.append(
            Finding(
                cause=Cause.ORPHANED_FINALIZER,
                blocking=True,
                summary=f"{what} {verb} finalizer {finalizer}; {state}",
                objects=tuple(h.ref for h in held),
                evidence=tuple(evidence),
                remedies=remedies.rank(
                    object_remedies
                    if nothing_owns
                    else ([restore, *object_remedies] if candidates else [*object_remedies, restore])
                ),
            )
        )
    return out


def _counted(held: list[Held]) -> str:
    """`1 Kiali object`, `3 ConfigMap and Secret objects`."""
    kinds = sorted({str(h.obj.get("kind") or h.rtype.key) for h in held})
    return f"{len(held)} {' and '.join(kinds)} object{'s' if len(held) > 1 else ''}"


def _identity(workload: KubeObject) -> tuple[str, str, str]:
    """(kind for kubectl, namespace, name) of a workload."""
    return str(workload.get("kind", "deployment")).lower(), str(meta(workload).get("namespace")), name_of(workload)
