"""What the remedy kinds share: reading raw objects, and the three guarded API calls they are made of
(a JSON patch of metadata.finalizers, a PUT to a namespace's /finalize, a delete with preconditions).

Every call is built from the object as it was just read, and carries that object's identity as a
precondition (a JSON patch `test` of uid and resourceVersion, the resourceVersion of a PUT, or the
DeleteOptions preconditions), so that the API server refuses it if anything changed in between.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

from bot.domain.changes import Operation, object_path
from bot.domain.findings import Diagnosis, Finding, Remedy
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of, meta
from bot.remediation.kinds.base import Recheck

JSON_PATCH = "application/json-patch+json"


# -- reading raw objects ---------------------------------------------------------------------------


def spec_finalizers(obj: KubeObject) -> list[str]:
    """A Namespace's `spec.finalizers` (the `kubernetes` token and its kind), [] when absent."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    return [str(f) for f in spec.get("finalizers") or ()]


def uid(obj: KubeObject) -> str | None:
    value = meta(obj).get("uid")
    return str(value) if value else None


def resource_version(obj: KubeObject) -> str | None:
    value = meta(obj).get("resourceVersion")
    return str(value) if value else None


def nothing_else_to_recheck(remedy: Remedy, ref: ObjectRef, obj: KubeObject) -> str | None:
    """For a kind whose target is stale only when it is gone, re-created or changed (checked for all)."""
    return None


# -- the cause, re-checked ------------------------------------------------------------------------


def same_object(a: ObjectRef, b: ObjectRef) -> bool:
    """The same object by group, kind, namespace and name (and uid when both know it)."""
    if (a.group, a.kind, a.namespace or None, a.name) != (b.group, b.kind, b.namespace or None, b.name):
        return False
    return not (a.uid and b.uid and a.uid != b.uid)


def finding_naming(fresh: Diagnosis, ref: ObjectRef) -> Finding | None:
    """The first finding of a diagnosis that names the object among its own."""
    for finding in fresh.findings:
        if any(same_object(ref, other) for other in finding.objects):
            return finding
    return None


def left_alone(remedy: Remedy, ref: ObjectRef) -> str:
    """What nsstuck did to the target: nothing, in the kind's words."""
    if remedy.finalizer:
        return f"{remedy.finalizer} was left on {ref.display}"
    return f"{ref.display} was left alone"


def still_proposed(check: Recheck) -> bool:
    """The fresh diagnosis proposes the same remedy (action and finalizer) for this target."""
    remedy = check.remedy
    return any(
        same_object(check.target, target)
        for finding in check.fresh.findings
        for other in finding.remedies
        if other.action is remedy.action and other.finalizer == remedy.finalizer
        for target in other.targets
    )


def no_longer_proposed(check: Recheck) -> str:
    """Why, in words, when the fresh diagnosis no longer proposes the remedy for the target: the
    finding that names the target now, or else what holds the namespace now."""
    fresh, ref = check.fresh, check.target
    finding = finding_naming(fresh, ref)
    if finding is not None:
        now = f"a diagnosis made now says {finding.summary}"
    else:
        blocking = [f for f in fresh.findings if f.blocking]
        if blocking:
            now = (
                f"a diagnosis made now no longer finds that {ref.display} holds the namespace "
                f"(it finds {blocking[0].cause.value}: {blocking[0].summary})"
            )
        else:
            now = "a diagnosis made now finds nothing that blocks the namespace"
    if not fresh.complete:
        now += f" (with {len(fresh.gaps)} piece(s) of evidence missing)"
    return f"{now}: {left_alone(check.remedy, ref)}"


def unless_proposed(check: Recheck) -> str | None:
    """A kind's `cause_gone` when the fresh diagnosis alone tells whether the cause holds."""
    return None if still_proposed(check) else no_longer_proposed(check)


def deletion_started(before: KubeObject, now: KubeObject) -> bool:
    """The object got a deletionTimestamp it did not have before the change."""
    return bool(meta(now).get("deletionTimestamp")) and not meta(before).get("deletionTimestamp")


def deleting_took_effect(remedy: Remedy, before: KubeObject, now: KubeObject) -> bool:
    """A kind's `took_effect` when deleting is all it does."""
    return deletion_started(before, now)


# -- the guarded calls -----------------------------------------------------------------------------


def _kubectl_ns(ref: ObjectRef) -> str:
    return f" -n {shlex.quote(ref.namespace)}" if ref.namespace else ""


def guarded_finalizer_patch(target: ObjectRef, index: int, finalizer: str) -> list[dict[str, Any]]:
    """A JSON patch that removes `finalizer` at `index` only if the object is still exactly the one
    checked: same uid, same resourceVersion, and that finalizer at that index."""
    return [
        {"op": "test", "path": "/metadata/uid", "value": target.uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": target.resource_version},
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]


def remove_metadata_finalizer(target: ObjectRef, obj: KubeObject, finalizer: str) -> Operation:
    finalizers = finalizers_of(obj)
    if finalizer not in finalizers:
        raise ValueError(f"{finalizer} is no longer on {target.display}")
    patch = guarded_finalizer_patch(target, finalizers.index(finalizer), finalizer)
    text = json.dumps(patch, separators=(",", ":"))
    command = (
        f"kubectl patch {target.kubectl_type} {shlex.quote(target.name)}{_kubectl_ns(target)} "
        f"--type=json -p {shlex.quote(text)}"
    )
    return Operation(
        method="PATCH",
        path=object_path(target),
        target=target,
        summary=f"remove {finalizer} from {target.display}",
        kubectl=command,
        body=patch,
        content_type=JSON_PATCH,
    )


def finalize(target: ObjectRef, obj: KubeObject, left: list[str], *, summary: str, jq_filter: str) -> Operation:
    """A PUT to the namespace's /finalize with `spec.finalizers = left`; the live resourceVersion (and
    uid) in the body are the precondition."""
    body = copy.deepcopy(obj)
    body["apiVersion"] = body.get("apiVersion") or target.api_version or "v1"
    body["kind"] = body.get("kind") or target.kind or "Namespace"
    spec = body.get("spec")
    body["spec"] = {**(spec if isinstance(spec, dict) else {}), "finalizers": left}
    path = object_path(target, "finalize")
    command = (
        f"kubectl get namespace {shlex.quote(target.name)} -o json | jq {shlex.quote(jq_filter)} | "
        f"kubectl replace --raw {shlex.quote(path)} -f -"
    )
    return Operation(method="PUT", path=path, target=target, summary=summary, kubectl=command, body=body)


def delete(target: ObjectRef, *, force: bool) -> Operation:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if force:
        body["gracePeriodSeconds"] = 0
    body["preconditions"] = {"uid": target.uid, "resourceVersion": target.resource_version}
    command = f"kubectl delete {target.kubectl_type} {shlex.quote(target.name)}{_kubectl_ns(target)}"
    if force:
        command += " --grace-period=0 --force"
        summary = f"force-delete {target.display} (grace period 0)"
    else:
        summary = f"delete {target.display}"
    return Operation(
        method="DELETE", path=object_path(target), target=target, summary=summary, kubectl=command, body=body
    )


def plain_delete(remedy: Remedy, target: ObjectRef, obj: KubeObject) -> Operation:
    """A kind's `operation` when it deletes its target with preconditions, no force."""
    return delete(target, force=False)
