"""Planning a remedy against the live cluster: is it still fresh, which exact API calls it amounts to,
and whether it took effect. Pure: it reads objects the caller fetched and returns data.

What every remedy shares is here (a target that is gone, re-created or changed since the diagnosis);
what one kind of remedy does is its kind's (`bot.remediation.kinds`). Every Operation carries the
live object's identity as a precondition, so that the API server refuses it if anything changed in
between (see `bot.remediation.kinds._ops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot.domain.changes import Operation
from bot.domain.findings import Diagnosis, NamespaceState, Remedy
from bot.domain.refs import KubeObject, ObjectRef
from bot.domain.snapshot import NamespaceSnapshot
from bot.remediation.kinds._ops import (
    JSON_PATCH,
    guarded_finalizer_patch,
    resource_version,
    spec_finalizers,
    uid,
)
from bot.remediation.kinds.base import Recheck
from bot.remediation.kinds.registry import RemedyKind, kind_of

__all__ = [
    "JSON_PATCH",
    "blocked_now",
    "cause_reasons",
    "guarded_finalizer_patch",
    "operations",
    "spec_finalizers",
    "stale_reasons",
    "took_effect",
]


# -- checks of the request -------------------------------------------------------------------------


def _planned(remedy: Remedy) -> RemedyKind:
    """The remedy's kind, once the remedy is known to be something that can be planned at all."""
    if not remedy.action.changes_cluster:
        raise ValueError(f"{remedy.action.value} changes nothing in the cluster: there is no operation to plan")
    kind = kind_of(remedy.action)
    if kind.needs_finalizer and not remedy.finalizer:
        raise ValueError(f"a {remedy.action.value} remedy must name its finalizer")
    if not remedy.targets:
        raise ValueError(f"the {remedy.action.value} remedy has no target")
    return kind


def _paired(remedy: Remedy, live: Sequence[Any]) -> None:
    if len(live) != len(remedy.targets):
        raise ValueError(f"{len(live)} live object(s) for {len(remedy.targets)} target(s)")


# -- stale_reasons ---------------------------------------------------------------------------------


def stale_reasons(remedy: Remedy, live: Sequence[KubeObject | None], *, versions: bool = True) -> list[str]:
    """Why the remedy no longer fits the cluster, one plain reason per target that changed since the
    diagnosis ([] when every target is as the diagnosis saw it). `live[i]` is `remedy.targets[i]` as
    just read, None when it is gone. `versions=False` leaves out a changed resourceVersion alone (the
    cause, re-checked, explains a change better than its version number)."""
    kind = _planned(remedy)
    _paired(remedy, live)
    reasons: list[str] = []
    for ref, obj in zip(remedy.targets, live, strict=True):
        reason = _stale_reason(kind, remedy, ref, obj, versions=versions)
        if reason is not None:
            reasons.append(reason)
    return reasons


def _stale_reason(
    kind: RemedyKind, remedy: Remedy, ref: ObjectRef, obj: KubeObject | None, *, versions: bool
) -> str | None:
    display = ref.display
    if obj is None:
        return f"{display} is gone"
    live_uid = uid(obj)
    if ref.uid and live_uid != ref.uid:
        return f"{display} was deleted and re-created (UID {ref.uid} → {live_uid})"
    # what the kind changes is gone before anything else changed: that says more than a new version
    reason = kind.stale_reason(remedy, ref, obj)
    if reason is not None:
        return reason
    version = resource_version(obj)
    if versions and ref.resource_version and version != ref.resource_version:
        return f"{display} changed since the diagnosis (resourceVersion {ref.resource_version} → {version})"
    return None


# -- cause_reasons ---------------------------------------------------------------------------------


def cause_reasons(
    remedy: Remedy,
    live: Sequence[KubeObject],
    now: NamespaceSnapshot,
    fresh: Diagnosis,
    then: NamespaceSnapshot | None = None,
) -> list[str]:
    """Why the cause the remedy rests on no longer holds, by the namespace collected (`now`) and
    diagnosed (`fresh`) right before acting ([] when it still does): the namespace still terminating,
    the evidence complete for a kind that needs it, and each target's cause as its kind reads it.
    `live` are the targets as just read, all present (check `stale_reasons` first); `then` is the
    snapshot the remedy was requested from, when it is still kept."""
    kind = _planned(remedy)
    _paired(remedy, live)
    if fresh.state is NamespaceState.NOT_FOUND:
        return [f"namespace {fresh.namespace} is gone now: nothing was changed"]
    if fresh.state is NamespaceState.ACTIVE:
        return [f"namespace {fresh.namespace} is no longer being deleted: nothing was changed"]
    if kind.needs_fresh_evidence and not fresh.complete:
        gaps = ", ".join(str(g) for g in fresh.gaps[:3])
        return [f"the evidence is incomplete now ({gaps}), and {kind.doing.lower()} needs all of it"]
    reasons = []
    for ref, obj in zip(remedy.targets, live, strict=True):
        check = Recheck(remedy=remedy, target=ref, live=obj, now=now, fresh=fresh, then=then)
        reason = kind.cause_gone(check)
        if reason is not None:
            reasons.append(reason)
    return reasons


def blocked_now(remedy: Remedy, fresh: Diagnosis) -> str | None:
    """Why the remedy's write would be rejected now, by the diagnosis made right before acting: a
    fail-closed webhook whose backend cannot answer still intercepts it (None when nothing does)."""
    for finding in fresh.findings:
        for candidate in finding.remedies:
            if candidate.id == remedy.id and candidate.blocked_reason:
                return f"nothing was changed, the write would fail: {candidate.blocked_reason}"
    return None


# -- operations ------------------------------------------------------------------------------------


def operations(remedy: Remedy, live: Sequence[KubeObject]) -> tuple[Operation, ...]:
    """The API calls that carry out the remedy, one per target, built from the live objects and
    guarded by preconditions on their uid and resourceVersion. Check `stale_reasons` first: this only
    refuses (ValueError) what cannot be planned at all (a missing object, a finalizer not there)."""
    kind = _planned(remedy)
    _paired(remedy, live)
    return tuple(
        kind.operation(remedy, _checked_target(ref, obj), obj) for ref, obj in zip(remedy.targets, live, strict=True)
    )


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


# -- took_effect -----------------------------------------------------------------------------------


def took_effect(remedy: Remedy, before: KubeObject, now: KubeObject | None) -> bool:
    """Whether the live state `now` shows that the remedy's change to one target happened (to settle
    an execution that was interrupted). `before` is that target as read right before the change."""
    kind = _planned(remedy)
    if now is None:
        return True
    before_uid = uid(before)
    if before_uid and uid(now) != before_uid:
        return True
    return kind.took_effect(remedy, before, now)
