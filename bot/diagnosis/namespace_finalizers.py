"""namespace_finalizer: the Namespace itself keeps a finalizer that nothing will remove.

Either in `metadata.finalizers` (KubeSphere, Rancher, the garbage collector) or a non-`kubernetes`
entry in `spec.finalizers`. The namespace controller only ever removes `kubernetes`, and only from
`spec.finalizers`; `orphan` and `foregroundDeletion` mean something only in `metadata.finalizers`, where
the garbage collector processes them (reference §1, §5): in `spec.finalizers` nothing acts on them, so
they hold the namespace for ever, and removing just that token (a PUT of /finalize) undoes nothing.
"""

from __future__ import annotations

from bot.diagnosis import catalogue, remedies
from bot.diagnosis.context import Context, still_deleting
from bot.diagnosis.reading import workload_running, workload_summary
from bot.domain.findings import Action, Cause, Finding, Risk
from bot.domain.refs import finalizers_of, meta


def findings(ctx: Context) -> list[Finding]:
    out = []
    spec_finalizers = [str(f) for f in (ctx.namespace_obj.get("spec") or {}).get("finalizers") or ()]
    entries = [(f, False) for f in finalizers_of(ctx.namespace_obj)]
    entries += [(f, True) for f in spec_finalizers if f != "kubernetes"]
    for finalizer, in_spec in entries:
        where = "spec.finalizers" if in_spec else "metadata.finalizers"
        owner = catalogue.owner_for(finalizer)
        evidence = [f"namespace {ctx.snapshot.namespace} has {finalizer} in {where}"]
        if not ctx.facts.present or all(c.get("status") == "False" for c in ctx.facts.conditions):
            evidence.append("the namespace controller reports nothing left to delete")
        owners = meta(ctx.namespace_obj).get("ownerReferences") or ()
        for ref in owners:
            evidence.append(f"the namespace is owned by {ref.get('kind')} {ref.get('name')} ({ref.get('apiVersion')})")
        if owner.handled_by_rule == "gc" and in_spec:
            evidence.append(
                "only `kubernetes` in spec.finalizers is processed (by the namespace controller); "
                f"{finalizer} means something only in metadata.finalizers, where the garbage collector "
                "processes it: nothing removes it from spec.finalizers"
            )
            out.append(
                Finding(
                    cause=Cause.NAMESPACE_FINALIZER,
                    blocking=True,
                    summary=f"the namespace keeps {finalizer} in spec.finalizers, where nothing removes it",
                    objects=(ctx.namespace_ref,),
                    evidence=tuple(evidence),
                    remedies=remedies.rank(
                        [
                            remedies.remove_namespace_finalizer(
                                ctx.namespace_ref, finalizer, in_spec=True, consequence="", risk=Risk.LOW
                            )
                        ]
                    ),
                )
            )
            continue
        if owner.handled_by_rule == "gc":
            evidence.append(f"{finalizer} is removed by the garbage collector once the dependents are handled")
            out.append(
                still_deleting(
                    summary=f"the namespace waits for the garbage collector ({finalizer})",
                    objects=(ctx.namespace_ref,),
                    evidence=tuple(evidence),
                    remedies=(remedies.wait("The garbage collector removes it"),),
                )
            )
            continue
        candidates = catalogue.matching_workloads(owner.markers, ctx.snapshot.workloads)
        running = [w for w in candidates if workload_running(w)]
        evidence.append(f"{finalizer} is removed by {owner.name}")
        if running:
            evidence.extend(f"running: {workload_summary(w)} in {meta(w).get('namespace')}" for w in running[:3])
            out.append(
                still_deleting(
                    summary=f"the namespace keeps {finalizer}; {owner.name} is running and should remove it",
                    objects=(ctx.namespace_ref,),
                    evidence=tuple(evidence),
                    remedies=(remedies.wait(f"{owner.name} removes {finalizer}"),),
                )
            )
            continue
        if owner.markers:
            evidence.append(
                f"no running workload in the cluster looks like {owner.name} "
                f"(looked for {', '.join(repr(m) for m in owner.markers)})"
            )
        consequence = f"whatever {owner.name} cleans up for a deleted namespace is not cleaned up"
        out.append(
            Finding(
                cause=Cause.NAMESPACE_FINALIZER,
                blocking=True,
                summary=f"the namespace keeps {finalizer} in {where}; no running controller will remove it",
                objects=(ctx.namespace_ref,),
                evidence=tuple(evidence),
                remedies=remedies.rank(
                    [
                        remedies.remove_namespace_finalizer(
                            ctx.namespace_ref, finalizer, in_spec=in_spec, consequence=consequence
                        ),
                        remedies.restore(
                            Action.RESTORE_CONTROLLER,
                            f"Or, if {owner.name} should still be installed, bring it back: it removes {finalizer}",
                        ),
                    ]
                ),
            )
        )
    return out
