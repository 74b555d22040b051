"""Whose log to read (issue 37 §2): the workloads of live or unknown controllers whose objects stood still
past the bound, for those objects, since their deletion began. Read only for these (blocking objects), so a
namespace whose controllers are dead or still at work costs no log read."""

from __future__ import annotations

from bot.diagnosis import catalogue, controllers, progress
from bot.diagnosis.context import Context
from bot.domain.controller_logs import LogTarget, Subject
from bot.domain.findings import ControllerState
from bot.domain.refs import deletion_time, meta, name_of

# objects named per workload (a line is matched against each)
MAX_SUBJECTS = 50


def log_targets(ctx: Context) -> list[LogTarget]:
    """Read through the context the rules read the same look through (`engine.diagnose`'s `context`): the
    controllers judged here are judged once."""
    snapshot = ctx.snapshot
    if snapshot.namespace_object is None or deletion_time(snapshot.namespace_object) is None:
        return []
    found: dict[tuple[str, str, str], LogTarget] = {}
    for finalizer, held in ctx.by_finalizer.items():
        # the cheapest reading first: most finalizers of a namespace stuck for long have a dead controller,
        # whose objects' progress (every object's managedFields) need not be read at all
        owner = catalogue.owner_for(finalizer, held[0].rtype.group)
        if owner.builtin or owner.handled_by_rule or owner.name.startswith("nothing"):
            continue
        judgement = controllers.judged(ctx, finalizer)
        if judgement.state is ControllerState.DEAD or judgement.workload is None:
            continue
        moved = progress.of_finalizer(ctx, finalizer)
        if not moved.stuck:
            continue
        workload = judgement.workload
        key = (str(workload.get("kind")), str(meta(workload).get("namespace")), name_of(workload))
        subjects = tuple(
            Subject(
                key=h.ref.display,
                namespace=str(h.ref.namespace or ""),
                name=h.ref.name,
                uid=str(meta(h.obj).get("uid") or ""),
            )
            for h in held
        )
        was = found.get(key)
        if was is not None:
            subjects = (*was.subjects, *(s for s in subjects if s not in was.subjects))
        found[key] = LogTarget(
            kind=key[0],
            namespace=key[1],
            name=key[2],
            selector=(workload.get("spec") or {}).get("selector") or {},
            since=min(moved.since, was.since) if was is not None else moved.since,
            subjects=subjects[:MAX_SUBJECTS],
        )
    return list(found.values())
