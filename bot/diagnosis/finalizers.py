"""orphaned_finalizer and finalizer_deadlock: objects in the namespace keep finalizers, and whether the
controller that removes each one works.

For every finalizer that holds an object: who is supposed to remove it (catalogue, then the domain
heuristics), whether that controller is alive, dead or unknown (`controllers.judge`, from evidence
only), and the reasoning, written as evidence. A finalizer whose controller is alive is content still
being deleted, unless the controller shows that it cannot finish: its cleanup must create objects in
the terminating namespace, which the API server forbids (`finalizer_deadlock`).
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from bot.diagnosis import catalogue, cleanup, controllers, progress, remedies
from bot.diagnosis.catalogue_model import Owner
from bot.diagnosis.context import Context, Held, Judgement, still_deleting
from bot.diagnosis.controllers import quote
from bot.diagnosis.reading import age
from bot.domain.findings import Action, Cause, Controller, ControllerState, Finding, Remedy, Risk
from bot.domain.refs import KubeObject, deletion_time, meta, name_of

MAX_EXAMPLES = 3
# kube-controller-manager's controllers that create pods and report refusals about their own objects
WORKLOAD_CONTROLLERS = frozenset(
    {
        "replicaset-controller",
        "statefulset-controller",
        "daemonset-controller",
        "job-controller",
        "cronjob-controller",
        "deployment-controller",
    }
)


def _dependents(ctx: Context, uid: str) -> list[Held]:
    return [h for h in ctx.remaining if any(o.get("uid") == uid for o in meta(h.obj).get("ownerReferences") or ())]


def _owner(finalizer: str, held: list[Held]) -> Owner:
    return catalogue.owner_for(finalizer, held[0].rtype.group)


def _answerable(owner: Owner) -> bool:
    """A controller that could be the one refused: not the control plane's, not nobody."""
    return not owner.builtin and not owner.handled_by_rule and not owner.name.startswith("nothing")


def _deadlocks(ctx: Context, groups: dict[str, list[Held]]) -> dict[str, list[str]]:
    """For each finalizer whose controller shows it cannot finish, the refusals that show it.

    The terminating namespace's refusal (`unable to create new content in namespace X because it is being
    terminated`) counts when the held objects' status or conditions quote it, or an Event in the namespace
    does that is about a held object, was reported by the controller, is about an object of the same
    kind, or when only one controller's finalizers hold the namespace. The same controller's other
    finalizers wait on the same refusal.
    """
    events = controllers.forbidden_events(ctx)
    owners = {f: _owner(f, held) for f, held in groups.items()}
    answerable = [f for f, owner in owners.items() if _answerable(owner)]
    out: dict[str, list[str]] = {}
    for finalizer in answerable:
        held, owner = groups[finalizer], owners[finalizer]
        lines = list(controllers.forbidden_in_status(ctx, held))
        kinds = {str(h.obj.get("kind") or "") for h in held}
        for event in events:
            reporter = event.reporter.lower()
            about_held = any(event.about(h.obj) for h in held)
            # a workload controller of kube-controller-manager refused its pods: not this finalizer's
            if not about_held and reporter in WORKLOAD_CONTROLLERS:
                continue
            if (
                about_held
                or any(m.lower() in reporter for m in owner.markers)
                or event.kind in kinds
                or len(answerable) == 1
            ):
                lines.append(
                    f"Event {event.reason or '(no reason)'} about {event.kind}/{event.name} from "
                    f"{event.reporter or 'an unnamed reporter'}, last seen {age(event.last_seen, ctx.now)} ago: "
                    f"{quote(event.message)}"
                )
        if lines:
            out[finalizer] = lines
    for finalizer in answerable:
        if finalizer in out:
            continue
        for other, lines in list(out.items()):
            if owners[other].name == owners[finalizer].name:
                out[finalizer] = [f"{owners[other].name} also keeps {other}, and cannot finish: {lines[0]}"]
                break
    return out


def findings(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    groups = ctx.by_finalizer
    deadlocks = _deadlocks(ctx, groups)
    for finalizer, held in groups.items():
        owner = _owner(finalizer, held)
        if owner.handled_by_rule == "pvc_in_use":
            continue
        what = counted(held)
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
        said = owner_line(finalizer, owner)
        if said:
            evidence.append(said)
        judgement = controllers.judged(ctx, finalizer)  # whose logs to read judged it first
        objects = [h.ref for h in held]

        if owner.handled_by_rule == "gc":
            dependents = [d for h in held for d in _dependents(ctx, str(meta(h.obj).get("uid")))]
            left = len(dependents)
            evidence.append(f"{len(dependents)} dependent object(s) still reference these owners")
            out.append(
                still_deleting(
                    f"{what} {waits} for the garbage collector ({finalizer}); {left} dependents left",
                    objects=objects,
                    evidence=evidence,
                    remedies=(remedies.wait("The garbage collector removes it once the dependents are gone"),),
                    controller=judgement.controller,
                )
            )
            continue

        moved = progress.of_finalizer(ctx, finalizer) if judgement.state is not ControllerState.DEAD else None
        if finalizer in deadlocks:
            found = _deadlock(ctx, finalizer, owner, held, judgement, evidence, deadlocks[finalizer])
            out.append(replace(found, progress=moved))
            continue

        if judgement.state is ControllerState.ALIVE and moved is not None and moved.stuck and not owner.builtin:
            out.append(cleanup.stuck(ctx, finalizer, owner, held, judgement, evidence, moved))
            continue
        if judgement.state is ControllerState.ALIVE:
            name = name_of(judgement.workload) if judgement.workload is not None else owner.name
            steps = [remedies.wait(f"{name} is at work; give it time to finish its cleanup")]
            command = cleanup.log_command(ctx, judgement, moved.since) if moved is not None else None
            if command is not None:
                steps.append(remedies.investigate(f"If it does not progress, read the logs of {name}", [command]))
            out.append(
                still_deleting(
                    f"{what} {verb} {finalizer}; {judgement.why} and should remove it",
                    objects=objects,
                    evidence=[*evidence, *judgement.evidence, *([moved.text] if moved is not None else [])],
                    remedies=remedies.rank(steps),
                    controller=judgement.controller,
                    progress=moved,
                )
            )
            continue
        found = orphaned(ctx, finalizer, owner, held, judgement, evidence, what, verb)
        out.append(replace(found, progress=moved) if judgement.state is ControllerState.UNKNOWN else found)
    return out


def orphaned(  # noqa: PLR0917 (the rule's reading of one finalizer, passed on as it is)
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    judgement: Judgement,
    evidence: list[str],
    what: str,
    verb: str,
    *,
    before_the_delete: bool = False,
) -> Finding:
    """Dead or unknown: the finalizer holds the namespace and nothing shown removes it.

    `before_the_delete` (a prediction's finding): the per-object removals are not made where a remedy that
    changes nothing goes before them, since a prediction keeps nothing that changes the cluster after such a
    remedy (`predicting._before_the_delete`); in a namespace of thousands of objects they are most of its
    cost. The finding is otherwise the same."""
    nothing_owns = owner.name.startswith("nothing")
    risk = Risk.LOW if nothing_owns else Risk.MEDIUM
    if nothing_owns:
        consequence = "nothing: no controller would ever act on this finalizer"
    elif judgement.state is ControllerState.UNKNOWN:
        consequence = (
            f"the cleanup {owner.name} would have done (external resources it manages) does not happen; whether "
            "it runs is unknown, so make sure it does not (or will not) before removing the finalizer"
        )
    else:
        consequence = f"the cleanup {owner.name} would have done (external resources it manages) does not happen"

    def removals() -> list[Remedy]:
        return [remedies.remove_finalizer(h.ref, finalizer, risk=risk, consequence=consequence) for h in held]

    def after_restore() -> list[Remedy]:  # behind a restore that goes first, a prediction keeps none of them
        return [] if before_the_delete else removals()

    ordered: list[Remedy]
    if nothing_owns:
        ordered = removals()
    elif judgement.workload is not None:
        kind, namespace, name = _identity(judgement.workload)
        restore = remedies.restore(
            Action.RESTORE_CONTROLLER,
            f"Bring {name} back (scale it up or fix its pods): it removes {finalizer} after running its cleanup",
            [f"kubectl -n {namespace} describe {kind} {name}"],
        )
        ordered = [restore, *after_restore()]
    elif judgement.state is ControllerState.UNKNOWN:
        checks = judgement.checks or [
            f"kubectl get deployments,statefulsets,daemonsets -A | grep -i {shlex.quote(_word(owner))}"
        ]
        restore = remedies.restore(
            Action.RESTORE_CONTROLLER,
            f"{judgement.find_out}, and make it run: it removes {finalizer} after its cleanup",
            checks,
        )
        ordered = [restore, *after_restore()]
    else:
        restore = remedies.restore(
            Action.RESTORE_CONTROLLER,
            f"Or, if {owner.name} should still be installed, reinstall it; it removes {finalizer} itself",
        )
        ordered = [*removals(), restore]
    return Finding(
        cause=Cause.ORPHANED_FINALIZER,
        blocking=True,
        summary=f"{what} {verb} finalizer {finalizer}; {judgement.why}",
        objects=tuple(h.ref for h in held),
        evidence=(*evidence, *judgement.evidence),
        remedies=remedies.rank(ordered),
        controller=judgement.controller,
    )


def _deadlock(  # noqa: PLR0917 (the rule's reading of one finalizer, passed on as it is)
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    judgement: Judgement,
    evidence: list[str],
    refusals: list[str],
) -> Finding:
    """The controller is alive, and its cleanup needs new content in the terminating namespace."""
    entry = catalogue.entry(finalizer)
    what = counted(held)
    verb = "keeps" if len(held) == 1 else "keep"
    name = name_of(judgement.workload) if judgement.workload is not None else owner.name
    commands = []
    if judgement.workload is not None:
        kind, namespace, workload = _identity(judgement.workload)
        commands.append(f"kubectl -n {namespace} logs {kind}/{workload}")
    if entry is not None and entry.manual_cleanup:
        manual = f"Do by hand what {owner.name}'s cleanup would have done: {entry.manual_cleanup}"
    else:
        manual = (
            f"Do by hand what {owner.name}'s cleanup would have done (its refusal above names what it tried to "
            f"create in {ctx.snapshot.namespace}), then remove {finalizer}"
        )
    consequence = (
        f"the cleanup {owner.name} could not finish does not happen: do it by hand first "
        "(a namespace being deleted never accepts the objects it needs)"
    )
    controller_evidence = [
        "it tried to create objects in the terminating namespace, so it is at work: " + refusals[0],
        *(e for e in judgement.evidence if judgement.state is ControllerState.ALIVE),
    ]
    return Finding(
        cause=Cause.FINALIZER_DEADLOCK,
        blocking=True,
        summary=(
            f"{what} {verb} finalizer {finalizer}; its controller ({name}) is alive but cannot finish: its cleanup "
            f"must create objects in namespace {ctx.snapshot.namespace}, which is being deleted"
        ),
        objects=tuple(h.ref for h in held),
        evidence=(
            *evidence,
            *refusals,
            "the API server refuses every new object in a terminating namespace (NamespaceLifecycle admission), "
            "so this cleanup can never finish on its own",
        ),
        remedies=remedies.rank(
            [
                remedies.investigate(manual, commands),
                *(remedies.remove_finalizer(h.ref, finalizer, risk=Risk.MEDIUM, consequence=consequence) for h in held),
            ]
        ),
        controller=Controller(ControllerState.ALIVE, tuple(controller_evidence), judgement.found_by),
    )


def owner_line(finalizer: str, owner: Owner) -> str | None:
    """Who removes the finalizer, and whether the catalogue says so or its domain suggests it (None when
    nothing does: the controller's judgement says so)."""
    if owner.name.startswith("nothing"):
        return None
    if catalogue.lookup(finalizer):
        return f"{finalizer} is a well-known finalizer, removed by {owner.name}"
    return f"{finalizer} is not a well-known finalizer; judging by its domain it belongs to {owner.name}"


def _word(owner: Owner) -> str:
    return owner.markers[0] if owner.markers else "controller"


def counted(held: list[Held]) -> str:
    """`1 Kiali object`, `3 ConfigMap and Secret objects`."""
    kinds = sorted({str(h.obj.get("kind") or h.rtype.key) for h in held})
    return f"{len(held)} {' and '.join(kinds)} object{'s' if len(held) > 1 else ''}"


def _identity(workload: KubeObject) -> tuple[str, str, str]:
    """(kind for kubectl, namespace, name) of a workload."""
    return str(workload.get("kind", "deployment")).lower(), str(meta(workload).get("namespace")), name_of(workload)
