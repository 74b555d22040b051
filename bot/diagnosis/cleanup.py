"""Alive is not finishing (issue 37 §1, §2): a live controller whose objects stood still past the bound.

Past `Context.no_progress_after` without progress (`progress`), a live controller is no longer content
being deleted. What it is comes from what nsstuck can read, in this order:

- its log quotes NamespaceLifecycle refusing its own cleanup in the terminating namespace (not one of its
  Events): `finalizer_deadlock`;
- its cleanup keeps failing for another reason, as the objects' status or conditions, the controller's
  log (repeated errors about the object) or its pods' restarts show: `cleanup_failing`, quoting the failure;
- nothing shows a failure, but the object's own spec names a Secret in the terminating namespace that does
  not exist, which a controller that must write it there can never create: `finalizer_deadlock`, said as
  an inference;
- nothing says why: a blocking `unknown`, with the command that reads the controller's log.

The remedies never start with removing the finalizer: the controller runs, and fixing what it fails on lets
it finish its own cleanup.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from bot.diagnosis import catalogue, remedies
from bot.diagnosis.catalogue_model import Owner
from bot.diagnosis.context import Context, Held, Judgement
from bot.diagnosis.controllers import quote
from bot.diagnosis.reading import age
from bot.domain.controller_logs import REPEATED, ControllerLog, ObjectLines
from bot.domain.durations import human_seconds
from bot.domain.findings import Cause, Controller, ControllerState, Finding, Progress, Risk
from bot.domain.refs import KubeObject, meta, name_of

# words of a failure in a status value or a condition's reason or message
FAILURE = re.compile(
    r"(?i)(fail(ed|ure|ing|s)?|error|unauthori[sz]ed|forbidden|denied|refused|unable|cannot|can't|not found|"
    r"timed? ?out|invalid|expired|\b[45]\d\d\b)"
)
# fields of a status that count failures (a number above zero is a failure seen that often)
FAILURE_COUNTS = ("failureCount", "failures", "retries", "errorCount")


def _status_strings(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime", "observedGeneration"):
                continue
            yield from _status_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _status_strings(item, path)


def status_failures(held: list[Held]) -> list[str]:
    """The failures the held objects' status shows: a condition that is not met with a failing reason or
    message, a status value naming a failure, a failure count."""
    out: list[str] = []
    for h in held:
        status = h.obj.get("status") or {}
        if not isinstance(status, dict):
            continue
        said = False
        for cond in status.get("conditions") or ():
            if not isinstance(cond, dict) or cond.get("status") == "True":
                continue
            text = f"{cond.get('reason') or ''} {cond.get('message') or ''}"
            if FAILURE.search(text):
                out.append(
                    f"{h.ref.display}: condition {cond.get('type')}={cond.get('status')} "
                    f"({cond.get('reason') or 'no reason'}): {quote(str(cond.get('message') or ''))}"
                )
                said = True
        if said:
            continue
        rest = {k: v for k, v in status.items() if k != "conditions"}
        for path, text in _status_strings(rest):
            if FAILURE.search(text):
                out.append(f"{h.ref.display}: status.{path} is {quote(text)}")
        for key in FAILURE_COUNTS:
            count = rest.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                out.append(f"{h.ref.display}: status.{key} is {count}")
    return out


def _missing_own_secrets(ctx: Context, held: list[Held]) -> list[str]:
    """Secrets the held objects' spec names (`secretName`) in their own namespace that do not exist there,
    when the namespace's Secrets were listed."""
    if "secrets" not in ctx.snapshot.contents and any("secrets" in g.what for g in ctx.snapshot.gaps):
        return []
    if any("secrets" in g.what for g in ctx.snapshot.gaps):
        return []
    present = {name_of(s) for s in ctx.snapshot.objects("secrets")}
    out = []
    for h in held:
        spec = h.obj.get("spec") or {}
        name = spec.get("secretName") if isinstance(spec, dict) else None
        if isinstance(name, str) and name and name not in present:
            out.append(
                f"{h.ref.display}: spec.secretName names Secret {name}, which does not exist in namespace "
                f"{ctx.snapshot.namespace}"
            )
    return out


def _identity(workload: KubeObject) -> tuple[str, str, str]:
    return str(workload.get("kind", "deployment")).lower(), str(meta(workload).get("namespace")), name_of(workload)


def _since_flag(since: datetime, now: datetime) -> str:
    minutes = max(1, int((now - since).total_seconds() // 60) + 1)
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def log_command(ctx: Context, judgement: Judgement, since: datetime) -> str | None:
    if judgement.workload is None:
        return None
    kind, namespace, name = _identity(judgement.workload)
    return f"kubectl -n {namespace} logs {kind}/{name} --all-containers --since={_since_flag(since, ctx.now)}"


def _log_lines(ctx: Context, held: list[Held]) -> list[tuple[ControllerLog, ObjectLines | None]]:
    return ctx.logs_about(h.ref.display for h in held)


def _log_evidence(logs: list[tuple[ControllerLog, ObjectLines | None]], ctx: Context) -> list[str]:
    out = []
    for log, lines in logs:
        where = f"the log of {log.workload} in {log.namespace} since {age(log.since, ctx.now)} ago"
        if log.problem:
            out.append(f"{where} could not be read: {log.problem}")
        elif lines is None or not lines.matched:
            out.append(
                f"{where} ({log.lines_read} lines, {', '.join(log.pods) or 'no container'}) names none of these "
                "objects: the controller does not appear to be working on them"
            )
        else:
            parts = [f"{lines.matched} line(s) name them"]
            if lines.refusals:
                parts.append(f"{lines.refusals} quote NamespaceLifecycle refusing its cleanup")
            if lines.errors:
                parts.append(f"{lines.errors} report errors")
            if lines.event_refusals:
                parts.append(
                    f"{lines.event_refusals} only say its Events were refused in the terminating namespace "
                    "(which proves nothing about its cleanup)"
                )
            out.append(f"{where}: " + "; ".join(parts))
            out.extend(f"  log: {quote(line)}" for line in lines.quoted)
        if log.truncated:
            out.append(f"  the log of {log.workload} was longer than nsstuck reads; its newest part was read")
        out.extend(f"{log.workload}: {r}" for r in log.restarts)
    return out


def _orphaned_outside(finalizer: str, owner: Owner) -> tuple[str, Risk]:
    entry = catalogue.entry(finalizer)
    if entry is not None and entry.cleanup:
        return (
            f"what {owner.name}'s cleanup does is left undone, outside the cluster too: {entry.cleanup}",
            Risk.MEDIUM,
        )
    return (
        f"what {owner.name}'s cleanup would have done (resources it made outside the cluster: cloud resources, "
        "external accounts, realms...) is left undone, and nsstuck does not know what that is",
        Risk.HIGH,
    )


def stuck(  # noqa: PLR0917 (the rule's reading of one finalizer, passed on as it is)
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    judgement: Judgement,
    evidence: list[str],
    progress: Progress,
) -> Finding:
    """The finding for a live controller whose objects stood still past the bound."""
    what = _counted(held)
    verb = "keeps" if len(held) == 1 else "keep"
    name = name_of(judgement.workload) if judgement.workload is not None else owner.name
    logs = _log_lines(ctx, held)
    log_evidence = _log_evidence(logs, ctx)
    still = progress.text
    command = log_command(ctx, judgement, progress.since)
    commands = [command] if command else []
    objects = tuple(h.ref for h in held)
    controller = Controller(ControllerState.ALIVE, tuple(judgement.evidence))
    base = [
        *evidence,
        f"{still} (deletion began {age(progress.since, ctx.now)} ago; "
        f"a live controller usually finishes within {_bound(progress)})",
    ]

    refused = [(log, lines) for log, lines in logs if lines is not None and lines.refusals]
    if refused:
        log, lines = refused[0]
        assert lines is not None
        refusal = next((q for q in reversed(lines.quoted) if "unable to create new content" in q), lines.quoted[-1])
        return _deadlock(
            ctx,
            finalizer,
            owner,
            held,
            name,
            commands,
            controller,
            progress,
            [*base, *log_evidence],
            f"{log.workload} logged {quote(refusal)}",
        )

    failing_logs = [(log, lines) for log, lines in logs if lines is not None and lines.errors >= REPEATED]
    status = status_failures(held)
    restarts = [r for log, _ in logs for r in log.restarts]
    if status or failing_logs or restarts:
        failure = (
            status[0]
            if status
            else (
                f"{failing_logs[0][0].workload} logged {quote(failing_logs[0][1].quoted[-1])}"
                if failing_logs
                else f"{restarts[0]}"
            )
        )
        consequence, risk = _orphaned_outside(finalizer, owner)
        describe = [f"kubectl -n {h.ref.namespace} get {h.ref.kubectl_type} {h.ref.name} -o yaml" for h in held[:3]]
        fix = remedies.investigate(
            f"Fix what the failure names ({failure}); {name} then finishes its cleanup and removes {finalizer}",
            [*commands, *describe],
        )
        removals = [remedies.remove_finalizer(h.ref, finalizer, risk=risk, consequence=consequence) for h in held]
        return Finding(
            cause=Cause.CLEANUP_FAILING,
            blocking=True,
            summary=(
                f"{what} {verb} finalizer {finalizer}; its controller ({name}) is alive but its cleanup keeps "
                f"failing: {failure}"
            ),
            objects=objects,
            evidence=(*base, *status, *log_evidence),
            remedies=remedies.rank([fix, *removals]),
            controller=controller,
            progress=progress,
        )

    missing = _missing_own_secrets(ctx, held)
    if missing:
        return _deadlock(
            ctx,
            finalizer,
            owner,
            held,
            name,
            commands,
            controller,
            progress,
            [*base, *log_evidence, *missing],
            f"{missing[0]}, and a controller that must write it there cannot: nothing can be created in a "
            "terminating namespace; nothing else nsstuck can read explains the wait (an inference)",
        )

    return Finding(
        cause=Cause.UNKNOWN,
        blocking=True,
        summary=(
            f"{what} {verb} finalizer {finalizer}; a live controller ({name}) has not finished for "
            f"{_still(progress)}; nothing nsstuck can read says why"
        ),
        objects=objects,
        evidence=(
            *base,
            *log_evidence,
            "no condition or status value of these objects reports a failure"
            + ("" if logs else ", and no log of the controller was read"),
        ),
        remedies=(
            remedies.investigate(
                f"Read {name}'s log about {held[0].ref.name} since the deletion began, and its status",
                [
                    *commands,
                    *(f"kubectl -n {h.ref.namespace} describe {h.ref.kubectl_type} {h.ref.name}" for h in held[:3]),
                ],
            ),
        ),
        controller=controller,
        progress=progress,
    )


def _deadlock(  # noqa: PLR0917
    ctx: Context,
    finalizer: str,
    owner: Owner,
    held: list[Held],
    name: str,
    commands: list[str],
    controller: Controller,
    progress: Progress,
    evidence: list[str],
    refusal: str,
) -> Finding:
    entry = catalogue.entry(finalizer)
    if entry is not None and entry.manual_cleanup:
        manual = f"Do by hand what {owner.name}'s cleanup would have done: {entry.manual_cleanup}"
    else:
        manual = (
            f"Do by hand what {owner.name}'s cleanup would have done (what it tried to create in "
            f"{ctx.snapshot.namespace}), then remove {finalizer}"
        )
    consequence = (
        f"the cleanup {owner.name} could not finish does not happen: do it by hand first "
        "(a namespace being deleted never accepts the objects it needs)"
    )
    what = _counted(held)
    verb = "keeps" if len(held) == 1 else "keep"
    return Finding(
        cause=Cause.FINALIZER_DEADLOCK,
        blocking=True,
        summary=(
            f"{what} {verb} finalizer {finalizer}; its controller ({name}) is alive but cannot finish: its cleanup "
            f"must create objects in namespace {ctx.snapshot.namespace}, which is being deleted"
        ),
        objects=tuple(h.ref for h in held),
        evidence=(
            *evidence,
            refusal,
            "the API server refuses every new object in a terminating namespace (NamespaceLifecycle admission), "
            "so this cleanup can never finish on its own",
        ),
        remedies=remedies.rank(
            [
                remedies.investigate(manual, commands),
                *(remedies.remove_finalizer(h.ref, finalizer, risk=Risk.MEDIUM, consequence=consequence) for h in held),
            ]
        ),
        controller=controller,
        progress=progress,
    )


def _still(progress: Progress) -> str:
    return progress.text.removeprefix("no progress for ")


def _bound(progress: Progress) -> str:
    return human_seconds(progress.bound_seconds, keep_zero=False)


def _counted(held: list[Held]) -> str:
    kinds = sorted({str(h.obj.get("kind") or h.rtype.key) for h in held})
    return f"{len(held)} {' and '.join(kinds)} object{'s' if len(held) > 1 else ''}"
