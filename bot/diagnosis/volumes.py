"""pvc_in_use: a PersistentVolumeClaim keeps kubernetes.io/pvc-protection while a pod uses it."""

from __future__ import annotations

from bot.diagnosis import remedies
from bot.diagnosis.context import Context, still_deleting
from bot.diagnosis.reading import age, pod_is_finished, pvc_claims
from bot.domain.findings import Cause, Finding, Risk
from bot.domain.refs import ObjectRef, deletion_time, name_of

PROTECTION = "kubernetes.io/pvc-protection"


def findings(ctx: Context) -> list[Finding]:
    out = []
    pods = [o for o in ctx.snapshot.objects("pods") if not pod_is_finished(o)]
    for held in ctx.deleting:
        if held.rtype.key != "persistentvolumeclaims" or PROTECTION not in held.finalizers:
            continue
        claim = held.ref.name
        users = [p for p in pods if claim in pvc_claims(p)]
        evidence = [f"PVC {claim} has been deleting for {age(deletion_time(held.obj), ctx.now)} and keeps {PROTECTION}"]
        if not users:
            evidence.append("no pod in the namespace uses it any more; the PVC protection controller removes it")
            out.append(
                still_deleting(
                    summary=f"PVC {claim} waits for the PVC protection controller",
                    objects=(held.ref,),
                    evidence=tuple(evidence),
                    remedies=(remedies.wait("kube-controller-manager removes the finalizer shortly"),),
                )
            )
            continue
        for pod in users:
            state = "deleting" if deletion_time(pod) else "running"
            evidence.append(f"pod {name_of(pod)} ({state}) mounts it")
        pod_refs = tuple(ObjectRef.of(p, resource="pods") for p in users)
        out.append(
            Finding(
                cause=Cause.PVC_IN_USE,
                blocking=True,
                summary=f"PVC {claim} cannot go while pod(s) {', '.join(name_of(p) for p in users)} use it",
                objects=(held.ref, *pod_refs),
                evidence=tuple(evidence),
                remedies=remedies.rank(
                    [
                        remedies.wait(
                            f"The PVC goes as soon as {', '.join(name_of(p) for p in users)} is gone: deal with the "
                            "pod first (see its finding)"
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
