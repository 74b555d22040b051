"""Time without progress is evidence (issue 37 §1): how long the objects a live or unknown controller keeps
have stood still since their deletion began, and the namespace controller's remaining count across the
incident's snapshots.

Progress is:
- a change by another manager than nsstuck (or the kubelet and the schedulers, `NOT_CONTROLLERS`) after the
  deletion began: a `managedFields` entry's time, a condition's `lastTransitionTime`, or a resourceVersion
  that differs from the one an earlier snapshot of the incident saw;
- fewer remaining objects between follow-ups (`NamespaceContentRemaining` counts).

Time alone never turns a controller dead: past the bound, a live controller is no longer "at work", and
what it then is comes from what it shows (`cleanup`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from bot.diagnosis.context import Context, Held
from bot.diagnosis.controllers import NOT_CONTROLLERS
from bot.domain.findings import Progress, Remaining
from bot.domain.refs import KubeObject, deletion_time, finalizers_of, meta, parse_time
from bot.domain.snapshot import KEPT_VERSIONS, NamespaceSnapshot, Observation

_COUNT = re.compile(r"has (\d+) resource instances")


def remaining_count(ctx: Context) -> int | None:
    """The objects the namespace controller counted as remaining in its last pass (None: not counted)."""
    return _remaining_in(ctx.namespace_obj)


def observe(snapshot: NamespaceSnapshot) -> Observation:
    """What a later diagnosis of the same incident needs of this snapshot to see progress: when, the
    remaining count, and the resourceVersion of each object held by a finalizer while being deleted
    (at most KEPT_VERSIONS of them, in a stable order)."""
    versions: dict[str, str] = {}
    for _, obj in snapshot.all_contents():
        if len(versions) >= KEPT_VERSIONS:
            break
        m = meta(obj)
        uid, version = str(m.get("uid") or ""), str(m.get("resourceVersion") or "")
        if uid and version and m.get("deletionTimestamp") and finalizers_of(obj):
            versions[uid] = version
    remaining = _remaining_in(snapshot.namespace_object) if snapshot.namespace_object is not None else None
    return Observation(at=snapshot.observed_at, remaining=remaining, versions=versions)


def _remaining_in(namespace_obj: KubeObject) -> int | None:
    for cond in (namespace_obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "NamespaceContentRemaining":
            counts = [int(n) for n in _COUNT.findall(str(cond.get("message") or ""))]
            return sum(counts) if counts else None
    return None


def _changes(held: Held, since: datetime) -> Iterable[datetime]:
    for entry in meta(held.obj).get("managedFields") or ():
        if not isinstance(entry, dict) or str(entry.get("manager") or "") in NOT_CONTROLLERS:
            continue
        when = parse_time(entry.get("time"))
        if when is not None and when > since:
            yield when
    for cond in (held.obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict):
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None and when > since:
                yield when


def of_finalizer(ctx: Context, finalizer: str) -> Progress:
    """`of` the objects being deleted that keep `finalizer` (`Context.by_finalizer`), read once per look at the
    namespace (every managedFields entry of every object): whose logs to read and the rules read the same."""
    known = ctx.progress.get(finalizer)
    if known is None:
        known = ctx.progress[finalizer] = of(ctx, ctx.by_finalizer[finalizer])
    return known


def of(ctx: Context, held: list[Held]) -> Progress:
    """The progress of `held` (objects that share a finalizer) as this snapshot and the earlier ones show it."""
    since = min((t for h in held if (t := deletion_time(h.obj)) is not None), default=ctx.now)
    changes: list[datetime] = []
    for h in held:
        changes.extend(_changes(h, since))
        uid = str(meta(h.obj).get("uid") or "")
        version = str(meta(h.obj).get("resourceVersion") or "")
        # an earlier snapshot that saw another version: it changed after that snapshot
        for seen in ctx.snapshot.earlier:
            was = seen.versions.get(uid)
            if was is not None and was != version and seen.at > since:
                changes.append(seen.at)
    remaining = [Remaining(o.at, o.remaining) for o in ctx.snapshot.earlier if o.remaining is not None]
    now_count = remaining_count(ctx)
    if remaining and now_count is not None:
        remaining.append(Remaining(ctx.now, now_count))
    return Progress(
        since=since,
        last_change=max(changes) if changes else None,
        observed_at=ctx.now,
        bound_seconds=int(ctx.no_progress_after.total_seconds()),
        remaining=tuple(remaining),
    )
