"""What every rule family reads: the snapshot, the parsed conditions, and small shared views."""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from functools import cached_property

from bot.diagnosis.conditions import ConditionFacts, parse_conditions
from bot.domain.controller_logs import QUOTED, ControllerLog, ObjectLines
from bot.domain.findings import Cause, Controller, ControllerState, Finding, FoundBy, Progress, Remedy
from bot.domain.refs import KubeObject, ObjectRef, deletion_time, finalizers_of, name_of
from bot.domain.snapshot import NamespaceSnapshot, ResourceType


@dataclass(frozen=True)
class Held:
    """One object in the namespace that is being deleted but still exists."""

    rtype: ResourceType
    obj: KubeObject

    @cached_property
    def ref(self) -> ObjectRef:
        # made once: a rule reads it for the finding, its remedies and their ranking
        return ObjectRef.of(self.obj, resource=self.rtype.resource or None)

    @property
    def finalizers(self) -> list[str]:
        return finalizers_of(self.obj)


@dataclass(frozen=True)
class ServiceCaller:
    """A webhook or an APIService that calls a Service: what it is, as the evidence says it, and the
    text its controller's markers are looked for in (lower case)."""

    what: str
    text: str
    namespace: str
    name: str


@dataclass
class Judgement:
    """What the evidence says of one finalizer's controller (`controllers.judge`)."""

    state: ControllerState
    evidence: list[str] = field(default_factory=list)
    # the workload that runs it (running or not), for remedies that name it
    workload: KubeObject | None = None
    # a few words for the summary: "its controller (kiali-operator) is running"
    why: str = ""
    # what to check when the evidence is not enough
    checks: list[str] = field(default_factory=list)
    # for people, when its state is unknown: what to find out first
    find_out: str = ""
    # how its controller was found (`owners`); None: no controller was looked for (nothing removes it)
    found_by: FoundBy | None = None

    @property
    def controller(self) -> Controller:
        return Controller(self.state, tuple(self.evidence), self.found_by)


# how long a live controller's objects may stand still after their deletion began before it is no longer
# "at work" (NSSTUCK_NO_PROGRESS_MINUTES; issue 37 §1)
NO_PROGRESS_AFTER = timedelta(minutes=30)


class Context:
    def __init__(self, snapshot: NamespaceSnapshot, *, no_progress_after: timedelta = NO_PROGRESS_AFTER) -> None:
        self.snapshot = snapshot
        self.no_progress_after = no_progress_after
        self.now: datetime = snapshot.observed_at
        namespace = snapshot.namespace_object or {}
        self.namespace_obj: KubeObject = namespace
        self.facts: ConditionFacts = parse_conditions(snapshot.namespace_object)
        # each finalizer's controller as judged so far (`controllers.judged`), and the progress of the objects
        # that keep it (`progress.of_finalizer`): once per look at the namespace
        self.judgements: dict[str, Judgement] = {}
        self.progress: dict[str, Progress] = {}

    def carried_to(self, snapshot: NamespaceSnapshot) -> Context:
        """This look at the namespace, for `snapshot`: this context's snapshot with what was read after it for
        the rules (the controller logs `log_targets` named, and the gaps of those reads). What was worked out
        is kept (the objects' progress too), the controllers' judgements only where those reads left no new gap
        (a gap is evidence to a judgement). Any other snapshot gets a context of its own."""
        if snapshot is self.snapshot:
            return self
        before = self.snapshot
        if any(
            getattr(snapshot, f.name) is not getattr(before, f.name)
            for f in fields(snapshot)
            if f.name not in ("controller_logs", "gaps")
        ):
            return Context(snapshot, no_progress_after=self.no_progress_after)
        carried = copy.copy(self)  # what the cached properties hold, with it
        carried.snapshot = snapshot
        carried.judgements = dict(self.judgements) if snapshot.gaps == before.gaps else {}
        carried.progress = dict(self.progress)
        return carried

    @cached_property
    def namespace_ref(self) -> ObjectRef:
        return ObjectRef.of(self.namespace_obj, resource="namespaces")

    @cached_property
    def deleting(self) -> list[Held]:
        """Every object in the namespace that has a deletionTimestamp (those of `remaining`: one ref each)."""
        return [h for h in self.remaining if deletion_time(h.obj) is not None]

    @cached_property
    def remaining(self) -> list[Held]:
        """Every object still in the namespace (being deleted or not)."""
        return [Held(t, o) for t, o in self.snapshot.all_contents()]

    @cached_property
    def by_finalizer(self) -> dict[str, list[Held]]:
        """The objects being deleted by each finalizer they keep, the finalizers sorted (read by whose logs to
        read and by the rules; not to be changed)."""
        groups: dict[str, list[Held]] = defaultdict(list)
        for held in self.deleting:
            for finalizer in held.finalizers:
                groups[finalizer].append(held)
        return dict(sorted(groups.items()))

    @cached_property
    def service_callers(self) -> list[ServiceCaller]:
        """Every webhook and APIService that calls a Service, in the snapshot's order (read once: each
        controller judged looks for its own among them, and a cluster may have a thousand APIServices,
        most of them local, calling none)."""
        callers = []
        for config in self.snapshot.webhook_configurations:
            for hook in config.get("webhooks") or ():
                service = (hook.get("clientConfig") or {}).get("service") or {}
                if not service:
                    continue
                callers.append(
                    ServiceCaller(
                        f"webhook {hook.get('name')} ({config.get('kind')} {name_of(config)})",
                        f"{name_of(config)} {hook.get('name', '')} {service.get('namespace', '')} "
                        f"{service.get('name', '')}".lower(),
                        str(service.get("namespace")),
                        str(service.get("name")),
                    )
                )
        for apiservice in self.snapshot.apiservices:
            service = (apiservice.get("spec") or {}).get("service") or {}
            if not service:
                continue
            callers.append(
                ServiceCaller(
                    f"APIService {name_of(apiservice)}",
                    f"{name_of(apiservice)} {service.get('namespace', '')} {service.get('name', '')}".lower(),
                    str(service.get("namespace")),
                    str(service.get("name")),
                )
            )
        return callers

    @cached_property
    def crds_by_type(self) -> dict[tuple[str, str], KubeObject]:
        """Every CRD by the (group, plural) it defines (read once: a cluster may have a thousand, and each
        finalizer whose controller is searched for looks up its own)."""
        out: dict[tuple[str, str], KubeObject] = {}
        for crd in self.snapshot.crds:
            spec = crd.get("spec") or {}
            out.setdefault((str(spec.get("group") or ""), str((spec.get("names") or {}).get("plural") or "")), crd)
        return out

    def logs_about(self, keys: Iterable[str]) -> list[tuple[ControllerLog, ObjectLines | None]]:
        """The controller logs read for any of these objects (by their display), with what each said of
        the first of them it names (None: a read that failed, or that named none of them)."""
        wanted = list(keys)
        out: list[tuple[ControllerLog, ObjectLines | None]] = []
        for log in self.snapshot.controller_logs:
            if log.problem:
                if any(key in log.subjects for key in wanted):
                    out.append((log, None))
                continue
            lines = [found for key in wanted if (found := log.about(key)) is not None]
            if lines:
                out.append((log, combined(lines)))
        return out

    def orphan_lines(self, limit: int = 50) -> list[str]:
        """What force-finalizing would leave behind, for the remedy's warning."""
        lines = [h.ref.display for h in self.remaining]
        if len(lines) > limit:
            lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
        return lines


def combined(lines: list[ObjectLines]) -> ObjectLines:
    """What one log said about several objects, as one (counts summed, the last quotes kept)."""
    return ObjectLines(
        key=lines[0].key,
        matched=sum(x.matched for x in lines),
        refusals=sum(x.refusals for x in lines),
        event_refusals=sum(x.event_refusals for x in lines),
        errors=sum(x.errors for x in lines),
        quoted=tuple(q for x in lines for q in x.quoted)[-QUOTED:],
    )


def still_deleting(
    summary: str,
    *,
    objects: Iterable[ObjectRef] = (),
    evidence: Iterable[str] = (),
    remedies: Iterable[Remedy],
    controller: Controller | None = None,
    progress: Progress | None = None,
) -> Finding:
    """Content that is being deleted normally: context for the reader, not a verdict to act on."""
    return Finding(
        cause=Cause.CONTENT_DELETING,
        blocking=False,
        summary=summary,
        objects=tuple(objects),
        evidence=tuple(e for e in evidence if e),
        remedies=tuple(remedies),
        controller=controller,
        progress=progress,
    )
