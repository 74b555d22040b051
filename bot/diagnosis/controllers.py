"""Whether the controller that removes a finalizer works: alive, dead or unknown, from evidence only.

- **alive**: the held object's status or conditions changed within the last 10 minutes by a manager
  other than nsstuck (`managedFields` time and manager, a condition's `lastTransitionTime`); an Event
  about it from a controller within the last 10 minutes; a Lease the catalogue lists for that
  controller, renewed within its `leaseDurationSeconds`; a Ready workload that runs it.
- **dead**: a workload that runs it exists and is scaled to zero, or has not been available for more
  than 10 minutes; a webhook or APIService of it points at a Service that no longer exists; the
  catalogue says it runs as a workload and none of its known workloads, images or Leases exists.
- **unknown**: anything else (no Lease at all proves nothing: leader election off, managed control
  planes). Controllers inside the control plane are never dead for want of a workload; those inside a
  distribution's server are unknown unless a Lease, Events or a status change shows them.

Time alone never proves a controller dead. Events expire (an hour by default) and a terminating namespace
accepts no new ones (NamespaceLifecycle admission: only existing Events can still be updated), so their
absence proves nothing either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from bot.diagnosis import catalogue, owners
from bot.diagnosis.catalogue_model import CatalogueEntry, Owner, RunsIn
from bot.diagnosis.context import Context, Held, Judgement
from bot.diagnosis.leases import CONTROLLER_MANAGER, LeaseState, read_lease
from bot.diagnosis.reading import age, backend, workload_running, workload_summary
from bot.domain.events import EventView, view
from bot.domain.findings import ControllerState, FoundBy
from bot.domain.refs import KubeObject, condition, meta, name_of, parse_time
from bot.domain.values import strings_in

RECENT = timedelta(minutes=10)
# the field manager nsstuck writes with (bot.kube.patching), and writers that are never a finalizer's controller
NOT_CONTROLLERS = frozenset({"nsstuck", "kubelet", "kube-scheduler", "default-scheduler"})
# what NamespaceLifecycle admission answers a create in a terminating namespace
# (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go)
FORBIDDEN = re.compile(r"unable to create new content in namespace (\S+) because it is being terminated")
QUOTE_LIMIT = 400
EVENTS_NOTE = (
    "Events expire (an hour by default) and a terminating namespace accepts no new ones, so no recent Event "
    "proves nothing"
)


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """A message from the cluster, quoted and escaped (newlines and control characters as \\n, \\uXXXX)."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return json.dumps(cut, ensure_ascii=False)


def _recent(moment: datetime | None, now: datetime) -> bool:
    return moment is not None and timedelta(0) - timedelta(minutes=1) <= now - moment <= RECENT


def status_changes(held: Iterable[Held], now: datetime) -> Iterator[str]:
    """Status or condition changes within RECENT by a writer other than nsstuck, one sentence each.

    Not of pods: their kubelet writes their status, whatever controller keeps their finalizer."""
    for h in held:
        if h.rtype.resource == "pods" and not h.rtype.group:
            continue
        for entry in meta(h.obj).get("managedFields") or ():
            if not isinstance(entry, dict):
                continue
            manager = str(entry.get("manager") or "")
            fields = entry.get("fieldsV1") or {}
            owns_status = entry.get("subresource") == "status" or (isinstance(fields, dict) and "f:status" in fields)
            when = parse_time(entry.get("time"))
            if owns_status and manager not in NOT_CONTROLLERS and _recent(when, now):
                via = " through /status" if entry.get("subresource") == "status" else ""
                yield (
                    f"{h.ref.display}: its status was written {age(when, now)} ago by {manager or 'an unnamed manager'}"
                    f"{via} (managedFields)"
                )
        for cond in (h.obj.get("status") or {}).get("conditions") or ():
            if not isinstance(cond, dict):
                continue
            when = parse_time(cond.get("lastTransitionTime"))
            if _recent(when, now):
                reason = f", {cond.get('reason')}" if cond.get("reason") else ""
                yield (
                    f"{h.ref.display}: condition {cond.get('type')}={cond.get('status')}{reason} changed "
                    f"{age(when, now)} ago"
                )


def events_about(ctx: Context, held: Iterable[Held]) -> list[tuple[Held, EventView]]:
    objects = list(held)
    out = []
    for event in ctx.snapshot.events:
        seen = view(event)
        for h in objects:
            if seen.about(h.obj):
                out.append((h, seen))
                break
    return out


def recent_events(ctx: Context, held: Iterable[Held]) -> Iterator[str]:
    for h, event in events_about(ctx, held):
        if event.reporter in NOT_CONTROLLERS or not _recent(event.last_seen, ctx.now):
            continue
        yield (
            f"Event {event.reason or '(no reason)'} about {h.ref.display} from "
            f"{event.reporter or 'an unnamed reporter'}, last seen {age(event.last_seen, ctx.now)} ago: "
            f"{quote(event.message)}"
        )


def forbidden_in_status(ctx: Context, held: Iterable[Held]) -> Iterator[str]:
    """The terminating namespace's refusal, as the held objects' status or conditions quote it."""
    for h in held:
        for text in strings_in(h.obj.get("status") or {}):
            match = FORBIDDEN.search(text)
            if match and match.group(1) == ctx.snapshot.namespace:
                yield f"{h.ref.display}: its status says {quote(text)}"


def forbidden_events(ctx: Context) -> list[EventView]:
    """Events in the namespace that quote the terminating namespace's refusal."""
    out = []
    for event in ctx.snapshot.events:
        seen = view(event)
        match = FORBIDDEN.search(seen.message)
        if match and match.group(1) == ctx.snapshot.namespace:
            out.append(seen)
    return out


def _kcm(ctx: Context) -> Judgement:
    reading = read_lease(ctx.snapshot, *CONTROLLER_MANAGER, ctx.now)
    evidence = [reading.evidence]
    checks = ["kubectl -n kube-system get lease kube-controller-manager -o yaml"]
    if reading.state is LeaseState.FRESH:
        return Judgement(ControllerState.ALIVE, evidence, why="kube-controller-manager is running")
    if reading.state is LeaseState.ABSENT:
        evidence.append(
            "kube-controller-manager holds that Lease while it runs with leader election (the default); without it, "
            "leader election is off or the control plane is managed and hides it, which proves nothing"
        )
    if not ctx.facts.present:
        evidence.append(
            "the namespace has no deletion conditions: no namespace controller has worked on it, so this control "
            "plane may not run kube-controller-manager's controllers at all (some virtual or minimal control "
            "planes do not)"
        )
    return Judgement(
        ControllerState.UNKNOWN, evidence, why="whether kube-controller-manager runs is unknown", checks=checks
    )


def _leases(ctx: Context, entry: CatalogueEntry | None) -> tuple[list[str], list[str], bool]:
    """(evidence, evidence of the fresh ones, whether any may exist) for the Leases the catalogue lists."""
    if entry is None or not entry.runtime.leases:
        return [], [], False
    evidence: list[str] = []
    fresh: list[str] = []
    present = False
    for lease in entry.runtime.leases:
        reading = read_lease(ctx.snapshot, lease.namespace, lease.name, ctx.now)
        evidence.append(reading.evidence)
        if reading.state is LeaseState.FRESH:
            fresh.append(reading.evidence)
        present = present or reading.state is not LeaseState.ABSENT
    return evidence, fresh, present


def _unavailable_for(workload: KubeObject, now: datetime) -> timedelta | None:
    """How long a Deployment has been without its minimum of available replicas (its Available condition)."""
    available = condition(workload, "Available")
    if available is None or available.get("status") != "False":
        return None
    since = parse_time(available.get("lastTransitionTime"))
    return now - since if since is not None else None


def _dead_workload(workload: KubeObject, now: datetime) -> str | None:
    spec = workload.get("spec") or {}
    where = f"{workload_summary(workload)} in {meta(workload).get('namespace')}"
    if workload.get("kind") != "DaemonSet" and spec.get("replicas") == 0:
        return f"{where}: scaled to zero"
    down = _unavailable_for(workload, now)
    if down is not None and down > RECENT:
        return f"{where}: not available for {age(now - down, now)}"
    return None


def _dead_backends(ctx: Context, owner: Owner, entry: CatalogueEntry | None) -> list[str]:
    """Webhooks and APIServices of the controller whose Service no longer exists. A catalogued owner is
    recognised by any of its markers; one guessed from a domain only by its most distinctive word."""
    if not owner.markers or any("services" in g.what for g in ctx.snapshot.gaps):
        return []
    markers = [m.lower() for m in (owner.markers if entry is not None else owner.markers[:1])]
    out = []
    for caller in ctx.service_callers:
        if any(m in caller.text for m in markers):
            target = backend(ctx.snapshot, caller.namespace, caller.name)
            if not target.exists:
                out.append(f"{caller.what} points at {target.ref}, which no longer exists")
    return out


def judged(ctx: Context, finalizer: str) -> Judgement:
    """`judge` of the controller of `finalizer`, over every deleting object that keeps it (`Context.by_finalizer`),
    made once per look at the namespace: whose logs are read (`log_targets`) and the rules read one judgement
    (on a namespace of a thousand finalizers whose controllers are searched for, judging is 20-30 ms of CPU)."""
    known = ctx.judgements.get(finalizer)
    if known is None:
        held = ctx.by_finalizer[finalizer]
        known = judge(ctx, finalizer, catalogue.owner_for(finalizer, held[0].rtype.group), held)
        ctx.judgements[finalizer] = known
    return known


def judge(ctx: Context, finalizer: str, owner: Owner, held: list[Held]) -> Judgement:
    """Alive, dead or unknown, for the controller that removes `finalizer` from `held`, with the evidence, and
    how that controller was found (the catalogue's own knowledge, for Kubernetes' and no one's)."""
    judgement = _judge(ctx, finalizer, owner, held)
    if judgement.found_by is None:
        judgement.found_by = FoundBy.CATALOGUE
    return judgement


def _judge(ctx: Context, finalizer: str, owner: Owner, held: list[Held]) -> Judgement:
    entry = catalogue.entry(finalizer)
    runs_in = entry.runtime.runs_in if entry else None
    if owner.name.startswith("nothing"):
        return Judgement(
            ControllerState.DEAD,
            [f"no controller removes a finalizer named {finalizer!r} from a {held[0].obj.get('kind')}"],
            why="nothing removes it",
        )
    if runs_in is RunsIn.RETIRED:
        return Judgement(
            ControllerState.DEAD,
            [f"no current release of {entry.project if entry else owner.name} removes {finalizer}"],
            why="no current release of its controller removes it",
        )

    alive = [*status_changes(held, ctx.now), *recent_events(ctx, held)]
    lease_evidence, lease_fresh, lease_present = _leases(ctx, entry)
    if runs_in is RunsIn.CONTROL_PLANE and entry and entry.runtime.where == "kube-apiserver":
        return Judgement(
            ControllerState.ALIVE,
            [*alive, "it runs in every kube-apiserver, and the API server answered this diagnosis"],
            why="the API server runs it",
        )
    if runs_in is RunsIn.CONTROL_PLANE and entry and entry.runtime.where == "kube-controller-manager":
        verdict = _kcm(ctx)
        if alive and verdict.state is not ControllerState.ALIVE:
            verdict = Judgement(ControllerState.ALIVE, why="kube-controller-manager is at work on it")
        verdict.evidence[:0] = alive
        return verdict

    # a workload of it shows it alive wherever it runs (a cloud-controller-manager DaemonSet); only one that
    # runs as a workload can be shown dead by one
    candidates = owners.known_workloads(owner, entry, ctx.snapshot.workloads)
    found_by = FoundBy.CATALOGUE if entry is not None else FoundBy.NAME
    search = owners.searched(owner, entry, candidates)
    located = owners.locate(ctx, finalizer, held) if search else None
    if located is not None and (located.workloads or (entry is None and not candidates)):
        candidates, found_by = located.workloads, located.found_by
    found = list(located.evidence) if located is not None else []
    if search and located is None and (said := owners.nothing_found(ctx, held)):
        found.append(said)
    # a search whose reads failed (RBAC or OLM forbidden, not in time) proves no absence: a named gap, never dead
    unsearched = [g for g in ctx.snapshot.gaps if search and g.what.endswith(owners.READ_SUFFIX)]
    if unsearched:
        found.append(
            f"the cluster could not all be searched for its controller ({'; '.join(str(g) for g in unsearched[:3])})"
        )
    running = [w for w in candidates if workload_running(w)]
    looked = []
    markers = tuple(owner.markers) + (tuple(entry.runtime.images) if entry else ())
    if markers and found_by in (FoundBy.CATALOGUE, FoundBy.NAME):
        looked.append(
            f"looked for {', '.join(repr(m) for m in markers)} in the names, labels and images of "
            f"{len(ctx.snapshot.workloads)} Deployments, StatefulSets and DaemonSets"
        )
    path = "" if found_by in (FoundBy.CATALOGUE, FoundBy.NAME) else f", {owners.describe(found_by)}"
    if alive or lease_fresh or running:
        evidence = [*alive, *lease_fresh, *found]
        evidence.extend(f"running: {workload_summary(w)} in {meta(w).get('namespace')}" for w in running[:3])
        workload = running[0] if running else (candidates[0] if candidates else None)
        name = name_of(workload) if workload is not None else owner.name
        if running:
            why = f"its controller ({name}{path}) is running"
        elif lease_fresh:
            why = f"its controller ({name}) is running (it renews its Lease)"
        else:
            why = f"its controller ({name}) is at work"
        return Judgement(ControllerState.ALIVE, evidence, workload=workload, why=why, found_by=found_by)

    evidence = [*looked, *found, *lease_evidence]
    workloads_gap = any("deployments" in g.what or "workloads" in g.what for g in ctx.snapshot.gaps)
    if workloads_gap:
        evidence.append("the cluster's workloads could not all be listed, so what runs is not fully known")
    inside = runs_in in (RunsIn.CONTROL_PLANE, RunsIn.DISTRIBUTION)
    if runs_in is RunsIn.CONTROL_PLANE:
        evidence.append(
            f"it runs inside the control plane ({entry.runtime.where if entry else 'unknown'}), which no "
            "workload of the cluster shows"
        )
    elif runs_in is RunsIn.DISTRIBUTION:
        evidence.append(
            f"it runs inside {entry.runtime.where if entry else 'the distribution'}'s server, which no workload shows; "
            "only a Lease or Events could show it at work"
        )

    if not inside:
        dead = [reason for w in candidates if (reason := _dead_workload(w, ctx.now))]
        if dead:
            evidence.extend(dead)
            return Judgement(
                ControllerState.DEAD,
                evidence,
                workload=candidates[0],
                why=f"its controller ({name_of(candidates[0])}{path}) exists but does not run",
                found_by=found_by,
            )
        gone = _dead_backends(ctx, owner, entry)
        if gone:
            evidence.extend(gone)
            return Judgement(
                ControllerState.DEAD, evidence, why="its controller's Service no longer exists", found_by=found_by
            )
        if (
            located is not None
            and located.gone
            and found_by is located.found_by
            and not workloads_gap
            and not unsearched
        ):
            # what the cluster says it runs as (OLM's deployment, the conversion webhook's Service) is gone
            evidence.extend(located.gone)
            return Judgement(
                ControllerState.DEAD,
                evidence,
                why=f"its controller ({owners.describe(found_by)}) was uninstalled",
                found_by=found_by,
            )
        if (
            runs_in is RunsIn.WORKLOAD
            and not candidates
            and not lease_present
            and not workloads_gap
            and not unsearched
            and not any("leases" in g.what for g in ctx.snapshot.gaps)
        ):
            known = ", ".join(f"{w.kind} {w.namespace}/{w.name}" for w in entry.runtime.workloads) if entry else ""
            evidence.append(
                f"{owner.name} runs as a workload{f' ({known})' if known else ''}, and none of its workloads, "
                "images or Leases exists: it was uninstalled"
            )
            return Judgement(ControllerState.DEAD, evidence, why="its controller was uninstalled", found_by=found_by)

    checks: list[str] = []
    if candidates:
        workload = candidates[0]
        evidence.extend(f"not ready: {workload_summary(w)} in {meta(w).get('namespace')}" for w in candidates[:3])
        kind = str(workload.get("kind", "deployment")).lower()
        checks.append(f"kubectl -n {meta(workload).get('namespace')} describe {kind} {name_of(workload)}")
        why = f"its controller ({name_of(workload)}{path}) exists but is not ready; whether it works is unknown"
    else:
        workload = None
        why = f"whether {owner.name} runs is unknown"
        if not inside and owner.markers:
            evidence.append(
                f"no workload in the cluster looks like {owner.name}, but it may run outside the cluster or under "
                "another name"
            )
    evidence.append(f"no status change or Event shows it at work on these objects; {EVENTS_NOTE}")
    if entry is not None and entry.runtime.leases is None:
        evidence.append(f"the catalogue knows no Lease of {owner.name}, so none was looked for")
    elif entry is None:
        evidence.append(f"{finalizer} is not in the catalogue, so no Lease of its controller is known")
    if runs_in is RunsIn.CONTROL_PLANE:
        find_out = f"First find out whether {entry.runtime.where if entry else 'the control plane'} runs"
    elif runs_in is RunsIn.DISTRIBUTION:
        find_out = f"First find out whether {entry.runtime.where if entry else 'the distribution'} runs it"
    else:
        find_out = f"First find out whether {owner.name} runs (in the cluster, outside it, or under another name)"
    return Judgement(
        ControllerState.UNKNOWN,
        evidence,
        workload=workload,
        why=why,
        checks=checks,
        find_out=find_out,
        found_by=found_by,
    )
