"""diagnose(snapshot) -> Diagnosis: run every rule family, order the findings, rank the remedies; for an
Active namespace collected whole, predict what deleting it now would meet (`predicting`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bot.diagnosis import (
    apiservices,
    controller_state,
    deletion_errors,
    discovery,
    finalizers,
    gitops,
    namespace_finalizers,
    pods,
    policies,
    predicting,
    remedies,
    volumes,
    webhooks,
)
from bot.diagnosis.context import NO_PROGRESS_AFTER, Context, still_deleting
from bot.diagnosis.controller_state import RESYNC
from bot.diagnosis.guarding import guard
from bot.diagnosis.leases import LeaseState, controller_manager
from bot.diagnosis.reading import age, human_duration
from bot.domain.findings import Action, Cause, Diagnosis, Finding, NamespaceState
from bot.domain.refs import deletion_time
from bot.domain.snapshot import NamespaceSnapshot

# most blocking first: what stops every namespace, then what stops deletes, then what holds objects
CAUSE_ORDER = [
    Cause.APISERVICE_UNAVAILABLE,
    Cause.AGGREGATED_DISCOVERY_DEFECT,
    Cause.DISCOVERY_FAILURE,
    Cause.WEBHOOK_BLOCKS_DELETE,
    Cause.POD_ON_LOST_NODE,
    Cause.POD_NOT_TERMINATING,
    Cause.PVC_IN_USE,
    Cause.FINALIZER_DEADLOCK,
    Cause.CLEANUP_FAILING,
    Cause.ORPHANED_FINALIZER,
    Cause.DELETION_ERROR,
    Cause.NAMESPACE_FINALIZER,
    Cause.UNKNOWN,
    Cause.GITOPS_OWNER,
    Cause.CONTENT_DELETING,
]

# the namespace controller syncs 5 s after the delete, then retries; give it a moment before judging
SETTLING = timedelta(seconds=30)


def diagnose(
    snapshot: NamespaceSnapshot, *, no_progress_after: timedelta = NO_PROGRESS_AFTER, context: Context | None = None
) -> Diagnosis:
    """`no_progress_after`: how long a live controller's objects may stand still after their deletion
    began before it is no longer "at work" (NSSTUCK_NO_PROGRESS_MINUTES). `context`: the one whose logs to
    read was chosen through (`log_targets`), for the snapshot before those logs: what it worked out (the
    controllers it judged) is not worked out again (`Context.carried_to`)."""
    base = Diagnosis(
        cluster=snapshot.cluster,
        namespace=snapshot.namespace,
        observed_at=snapshot.observed_at,
        state=NamespaceState.NOT_FOUND,
        terminating_for_seconds=None,
        complete=snapshot.complete,
        gaps=snapshot.gaps,
    )
    if snapshot.namespace_object is None:
        return base
    if context is not None and context.no_progress_after == no_progress_after:
        ctx = context.carried_to(snapshot)
    else:
        ctx = Context(snapshot, no_progress_after=no_progress_after)
    uid = ctx.namespace_ref.uid
    deleted_at = deletion_time(snapshot.namespace_object)
    if deleted_at is None:
        # an Active namespace: its top-level findings stay empty (they say what holds a terminating one);
        # collected whole, it gets the prediction of what deleting it now would meet
        prediction = predicting.predict(ctx, CAUSE_ORDER) if snapshot.for_prediction else None
        return replace(base, state=NamespaceState.ACTIVE, namespace_uid=uid, prediction=prediction)
    seconds = max(0, int((snapshot.observed_at - deleted_at).total_seconds()))

    found: list[Finding] = []
    for family in (apiservices, discovery, webhooks, policies, pods, volumes, finalizers, namespace_finalizers):
        found.extend(family.findings(ctx))
    found.extend(deletion_errors.findings(ctx, found))
    # no condition quotes a refusal: a fail-closed webhook on the namespace controller's delete-collection
    # requests is the suspect, unless kube-controller-manager is seen not running at all
    if (
        not any(f.blocking for f in found)
        and not ctx.facts.present
        and seconds >= RESYNC.total_seconds()
        and controller_manager(snapshot, ctx.now).state is not LeaseState.STALE
    ):
        found.extend(webhooks.collection_suspects(ctx, human_duration(timedelta(seconds=seconds))))
    if not any(f.blocking for f in found):
        found.extend(_unexplained(ctx, seconds, has_findings=bool(found)))
    found.extend(gitops.findings(ctx, predicting=False))
    found.sort(key=lambda f: (not f.blocking, CAUSE_ORDER.index(f.cause)))
    found = gitops.first(guard(ctx, _with_last_resort(ctx, found)))
    return replace(
        base,
        state=NamespaceState.TERMINATING,
        terminating_for_seconds=seconds,
        findings=tuple(found),
        namespace_uid=uid,
        deletion_timestamp=deleted_at,
    )


def _unexplained(ctx: Context, seconds: int, *, has_findings: bool) -> list[Finding]:
    """Nothing blocking was found: either it is early, or something nsstuck cannot see."""
    spec_finalizers = (ctx.namespace_obj.get("spec") or {}).get("finalizers") or []
    if seconds < SETTLING.total_seconds():
        return [
            still_deleting(
                summary=f"the namespace was deleted {age(ctx.now - timedelta(seconds=seconds), ctx.now)} ago; "
                "the namespace controller is still at work",
                evidence=("the namespace controller syncs a few seconds after the delete and then retries",),
                remedies=(remedies.wait("Ask again in a minute"),),
            )
        ]
    if not ctx.facts.present:
        judged = controller_state.without_conditions(ctx, seconds, has_findings=has_findings)
        if judged is not None:
            return judged
    if has_findings and not ctx.snapshot.gaps:
        return []
    evidence = []
    if not ctx.facts.present:
        version = controller_state.server_version(ctx.snapshot.server_version)
        evidence.append(
            f"the namespace has no deletion conditions (the API server is {version.text})"
            if version is not None
            else "the namespace has no deletion conditions: the namespace controller (kube-controller-manager) may "
            "not be running, or the cluster is older than 1.16"
        )
    else:
        evidence.extend(
            f"namespace condition {c.get('type')}={c.get('status')} ({c.get('reason')}): {c.get('message')}"
            for c in ctx.facts.conditions
        )
    evidence.append(
        f"spec.finalizers: {spec_finalizers or 'none'}; metadata.finalizers: "
        f"{(ctx.namespace_obj.get('metadata') or {}).get('finalizers') or 'none'}"
    )
    not_deleting = [h for h in ctx.remaining if deletion_time(h.obj) is None]
    if not_deleting:
        evidence.append(
            f"{len(not_deleting)} object(s) in the namespace have not even been marked for deletion, e.g. "
            + ", ".join(h.ref.display for h in not_deleting[:3])
        )
    if ctx.snapshot.gaps:
        evidence.append(f"{len(ctx.snapshot.gaps)} piece(s) of evidence could not be collected (see gaps)")
    commands = [
        "kubectl -n kube-system get pods -l component=kube-controller-manager",
        f"kubectl get namespace {ctx.snapshot.namespace} -o yaml",
    ]
    if ctx.facts.present:
        summary = "the namespace is stuck and nothing nsstuck can see explains it"
        first = remedies.investigate("Read the kube-controller-manager log for this namespace", commands)
    else:
        summary = "the namespace is stuck and no namespace controller has worked on it"
        first = remedies.restore(
            Action.RESTORE_CONTROLLER,
            "Bring kube-controller-manager (its namespace controller) back; it then finishes the deletion",
            commands,
        )
    return [
        Finding(
            cause=Cause.UNKNOWN,
            blocking=True,
            summary=summary,
            objects=(ctx.namespace_ref,),
            evidence=tuple(evidence),
            remedies=(first,),
        )
    ]


def _with_last_resort(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Offer force-finalize last, on the first blocking finding, and only on complete evidence."""
    spec_finalizers = (ctx.namespace_obj.get("spec") or {}).get("finalizers") or []
    blocking = [i for i, f in enumerate(found) if f.blocking]
    if not ctx.snapshot.complete or not blocking or "kubernetes" not in spec_finalizers:
        return found
    index = blocking[0]
    finding = found[index]
    last = remedies.force_finalize(ctx.namespace_ref, ctx.orphan_lines())
    found[index] = replace(finding, remedies=(*finding.remedies, last))
    return found
