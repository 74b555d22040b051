"""Planning a remedy against the live cluster: is it still fresh, which exact API calls it amounts to,
and whether it took effect. Pure: it reads objects the caller fetched and returns data.

Every Operation is built from the object as it was just read, and carries that object's identity as
a precondition (a JSON patch `test` of uid and resourceVersion, the resourceVersion of a PUT, or the
DeleteOptions preconditions), so that the API server refuses it if anything changed in between.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot.domain.changes import Operation, object_path
from bot.domain.findings import Action, Remedy
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of, meta

JSON_PATCH = "application/json-patch+json"

_DELETES = (Action.DELETE_APISERVICE, Action.DELETE_WEBHOOK_CONFIGURATION, Action.FORCE_DELETE_POD)
_NEEDS_FINALIZER = (Action.REMOVE_FINALIZER, Action.REMOVE_NAMESPACE_FINALIZER)


# -- reading raw objects ---------------------------------------------------------------------------


def spec_finalizers(obj: KubeObject) -> list[str]:
    """A Namespace's `spec.finalizers` (the `kubernetes` token and its kind), [] when absent."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    return [str(f) for f in spec.get("finalizers") or ()]


def _uid(obj: KubeObject) -> str | None:
    value = meta(obj).get("uid")
    return str(value) if value else None


def _resource_version(obj: KubeObject) -> str | None:
    value = meta(obj).get("resourceVersion")
    return str(value) if value else None


# -- checks of the request -------------------------------------------------------------------------


def _planned(remedy: Remedy) -> None:
    if not remedy.action.changes_cluster:
        raise ValueError(f"{remedy.action.value} changes nothing in the cluster: there is no operation to plan")
    if remedy.action in _NEEDS_FINALIZER and not remedy.finalizer:
        raise ValueError(f"a {remedy.action.value} remedy must name its finalizer")
    if not remedy.targets:
        raise ValueError(f"the {remedy.action.value} remedy has no target")


def _paired(remedy: Remedy, live: Sequence[Any]) -> None:
    if len(live) != len(remedy.targets):
        raise ValueError(f"{len(live)} live object(s) for {len(remedy.targets)} target(s)")


# -- stale_reasons ---------------------------------------------------------------------------------


def stale_reasons(remedy: Remedy, live: Sequence[KubeObject | None]) -> list[str]:
    """Why the remedy no longer fits the cluster, one plain reason per target that changed since the
    diagnosis ([] when every target is as the diagnosis saw it). `live[i]` is `remedy.targets[i]` as
    just read, None when it is gone."""
    _planned(remedy)
    _paired(remedy, live)
    reasons: list[str] = []
    for ref, obj in zip(remedy.targets, live, strict=True):
        reason = _stale_reason(remedy, ref, obj)
        if reason is not None:
            reasons.append(reason)
    return reasons


def _stale_reason(remedy: Remedy, ref: ObjectRef, obj: KubeObject | None) -> str | None:
    display = ref.display
    if obj is None:
        return f"{display} is gone"
    uid = _uid(obj)
    if ref.uid and uid != ref.uid:
        return f"{display} was deleted and re-created (UID {ref.uid} → {uid})"
    finalizer = remedy.finalizer or ""
    if remedy.action is Action.REMOVE_FINALIZER and finalizer not in finalizers_of(obj):
        return f"{finalizer} is no longer on {display}"
    if remedy.action is Action.REMOVE_NAMESPACE_FINALIZER and finalizer not in (
        finalizers_of(obj) + spec_finalizers(obj)
    ):
        return f"{finalizer} is no longer on {display}"
    if remedy.action is Action.FORCE_FINALIZE_NAMESPACE and not spec_finalizers(obj):
        return f"{display} has no spec.finalizers left: it is already finalized"
    version = _resource_version(obj)
    if ref.resource_version and version != ref.resource_version:
        return f"{display} changed since the diagnosis (resourceVersion {ref.resource_version} → {version})"
    return None


# -- operations ------------------------------------------------------------------------------------


def operations(remedy: Remedy, live: Sequence[KubeObject]) -> tuple[Operation, ...]:
    """The API calls that carry out the remedy, one per target, built from the live objects and
    guarded by preconditions on their uid and resourceVersion. Check `stale_reasons` first: this only
    refuses (ValueError) what cannot be planned at all (a missing object, a finalizer not there)."""
    _planned(remedy)
    _paired(remedy, live)
    return tuple(_operation(remedy, ref, obj) for ref, obj in zip(remedy.targets, live, strict=True))


def _checked_target(ref: ObjectRef, obj: KubeObject | None) -> ObjectRef:
    """The live object as a reference (uid and resourceVersion included), after making sure it is
    the object the remedy names."""
    if not isinstance(obj, dict):
        raise ValueError(f"{ref.display} is gone: there is nothing to change")
    target = ObjectRef.of(obj, resource=ref.resource)
    target = replace(target, api_version=target.api_version or ref.api_version, kind=target.kind or ref.kind)
    if (target.name, target.namespace or None) != (ref.name, ref.namespace or None):
        where = f"{target.namespace}/{target.name}" if target.namespace else target.name
        raise ValueError(f"the live object {where} is not {ref.display}")
    if not target.uid or not target.resource_version:
        raise ValueError(f"the live {ref.display} has no uid or resourceVersion to guard the change with")
    return target


def _operation(remedy: Remedy, ref: ObjectRef, obj: KubeObject) -> Operation:
    target = _checked_target(ref, obj)
    action = remedy.action
    finalizer = remedy.finalizer or ""
    if action is Action.REMOVE_FINALIZER:
        return _remove_metadata_finalizer(target, obj, finalizer)
    if action is Action.REMOVE_NAMESPACE_FINALIZER:
        if finalizer in finalizers_of(obj):
            return _remove_metadata_finalizer(target, obj, finalizer)
        if finalizer in spec_finalizers(obj):
            left = [f for f in spec_finalizers(obj) if f != finalizer]
            return _finalize(
                target,
                obj,
                left,
                summary=f"remove {finalizer} from the spec.finalizers of {target.display}",
                jq_filter=f".spec.finalizers -= {json.dumps([finalizer])}",
            )
        raise ValueError(f"{finalizer} is no longer on {target.display}")
    if action is Action.FORCE_FINALIZE_NAMESPACE:
        current = ", ".join(spec_finalizers(obj)) or "none"
        return _finalize(
            target,
            obj,
            [],
            summary=f"force-finalize {target.display}: empty its spec.finalizers (now {current})",
            jq_filter=".spec.finalizers = []",
        )
    if action in _DELETES:
        return _delete(target, force=action is Action.FORCE_DELETE_POD)
    raise ValueError(f"no operation is known for {action.value}")  # pragma: no cover - every action is handled


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


def _remove_metadata_finalizer(target: ObjectRef, obj: KubeObject, finalizer: str) -> Operation:
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


def _finalize(target: ObjectRef, obj: KubeObject, left: list[str], *, summary: str, jq_filter: str) -> Operation:
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


def _delete(target: ObjectRef, *, force: bool) -> Operation:
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


# -- took_effect -----------------------------------------------------------------------------------


def took_effect(remedy: Remedy, before: KubeObject, now: KubeObject | None) -> bool:
    """Whether the live state `now` shows that the remedy's change to one target happened (to settle
    an execution that was interrupted). `before` is that target as read right before the change."""
    _planned(remedy)
    if now is None:
        return True
    before_uid = _uid(before)
    if before_uid and _uid(now) != before_uid:
        return True
    finalizer = remedy.finalizer or ""
    action = remedy.action
    if action is Action.REMOVE_FINALIZER:
        return finalizer not in finalizers_of(now)
    if action is Action.REMOVE_NAMESPACE_FINALIZER:
        return finalizer not in finalizers_of(now) and finalizer not in spec_finalizers(now)
    if action is Action.FORCE_FINALIZE_NAMESPACE:
        return not spec_finalizers(now)
    now_meta, before_meta = meta(now), meta(before)
    if now_meta.get("deletionTimestamp") and not before_meta.get("deletionTimestamp"):
        return True
    if action is Action.FORCE_DELETE_POD:
        # a pod that was already terminating (and still has finalizers) keeps its deletionTimestamp;
        # the forced delete shows as its grace period dropping to 0
        return now_meta.get("deletionGracePeriodSeconds") == 0 and before_meta.get("deletionGracePeriodSeconds") != 0
    return False
