"""The report for a terminal: cause first, then evidence, objects and remedies with their commands."""

from __future__ import annotations

from bot.domain import durations
from bot.domain.findings import Diagnosis, Finding, NamespaceState, Prediction, Remedy, Risk

_RISK_MARK = {Risk.NONE: "safe", Risk.LOW: "low risk", Risk.MEDIUM: "MEDIUM RISK", Risk.HIGH: "HIGH RISK"}
# ANSI SGR codes of the colours of a terminal report (`nsstuck diagnose` on a terminal, unless NO_COLOR)
_RISK_COLOUR = {Risk.NONE: "32", Risk.LOW: "32", Risk.MEDIUM: "33", Risk.HIGH: "1;31"}
_BOLD, _RED, _YELLOW, _DIM = "1", "1;31", "33", "2"


def _paint(text: str, sgr: str, colour: bool) -> str:
    return f"\x1b[{sgr}m{text}\x1b[0m" if colour else text


def human_seconds(seconds: int) -> str:
    """The terminal's durations: seconds shown under ten minutes ("5m 30s"), "4d 0h" kept even."""
    return durations.human_seconds(seconds, seconds_below_minutes=10)


def headline(diagnosis: Diagnosis) -> str:
    """One line: state, cause, for how long."""
    where = f"{diagnosis.cluster}/{diagnosis.namespace}"
    if diagnosis.state is NamespaceState.NOT_FOUND:
        return f"{where}: namespace not found (already gone, or never existed)"
    if diagnosis.state is NamespaceState.ACTIVE:
        if diagnosis.prediction is None:
            return f"{where}: namespace is Active, not being deleted"
        return f"{where}: namespace is Active; {foresight(diagnosis.prediction)}"
    age = human_seconds(diagnosis.terminating_for_seconds or 0)
    blocking = [f for f in diagnosis.findings if f.blocking]
    if not blocking:
        moving = next((f.progress for f in diagnosis.findings if f.progress is not None), None)
        still = f" ({moving.text})" if moving is not None else ""
        return f"{where}: Terminating for {age}; not stuck yet, content is still being deleted{still}"
    first = blocking[0]
    still = f" ({first.progress.text})" if first.progress is not None else ""
    return f"{where}: Terminating for {age}; stuck: {first.cause.value}{still}: {first.summary}"


def foresight(prediction: Prediction) -> str:
    """What deleting the Active namespace now would meet, in one clause."""
    reason = next((f for f in prediction.findings if f.blocking), None)
    if reason is not None:
        return f"deleting it now would get stuck: {reason.cause.value}: {reason.summary}"
    if not prediction.complete:
        return "deleting it now: nothing seen would hold it, but the evidence is incomplete (see below)"
    return "deleting it now: nothing would hold it"


def _remedy_lines(index: int, remedy: Remedy, colour: bool = False) -> list[str]:
    approval = ", needs approval" if remedy.requires_approval else ""
    mark = _paint(_RISK_MARK[remedy.risk], _RISK_COLOUR[remedy.risk], colour)
    lines = [f"  {index}. [{mark}{approval}] {remedy.description}"]
    if remedy.blocked_reason:
        lines.append(f"       {_paint(remedy.blocked_reason.replace('blocked:', 'BLOCKED:', 1), _RED, colour)}")
    lines.extend(f"       $ {command}" for command in remedy.commands)
    for item in remedy.leaves_behind[:10]:
        lines.append(f"       leaves behind: {item}")
    if len(remedy.leaves_behind) > 10:
        lines.append(f"       ... and {len(remedy.leaves_behind) - 10} more")
    return lines


def _finding_lines(number: int, finding: Finding, colour: bool = False, *, predicted: bool = False) -> list[str]:
    if predicted:
        flag = _paint("WOULD BLOCK", _RED, colour) if finding.blocking else _paint("would not block", _DIM, colour)
    else:
        flag = _paint("BLOCKING", _RED, colour) if finding.blocking else _paint("not blocking", _DIM, colour)
    lines = [f"[{number}] {_paint(finding.cause.value, _BOLD, colour)} ({flag}): {finding.summary}"]
    if predicted and finding.controller is not None:
        lines.append(f"  its controller: {finding.controller.state.value}")
    if finding.progress is not None:
        lines.append(f"  progress: {finding.progress.text}")
    if finding.evidence:
        lines.append("  evidence:")
        lines.extend(f"  - {e}" for e in finding.evidence)
    if finding.objects:
        lines.append("  objects:")
        lines.extend(f"  - {o.display}" + (f" in {o.namespace}" if o.namespace else "") for o in finding.objects[:20])
        if len(finding.objects) > 20:
            lines.append(f"  - ... and {len(finding.objects) - 20} more")
    if finding.remedies:
        lines.append("  before the delete, safest first:" if predicted else "  remedies, safest first:")
        for i, remedy in enumerate(finding.remedies, 1):
            lines.extend(_remedy_lines(i, remedy, colour))
    return lines


def render_text(diagnosis: Diagnosis, *, colour: bool = False) -> str:
    """The report for a terminal; `colour`: with ANSI colours (the caller decides, NO_COLOR included)."""
    lines = [_paint(headline(diagnosis), _BOLD, colour)]
    if not diagnosis.complete:
        lines.append("")
        lines.append(
            _paint("INCOMPLETE", _YELLOW, colour)
            + ": some evidence could not be collected, so no force-finalize is offered:"
        )
        lines.extend(f"  - {gap}" for gap in diagnosis.gaps)
    for number, finding in enumerate(diagnosis.findings, 1):
        lines.append("")
        lines.extend(_finding_lines(number, finding, colour))
    if diagnosis.prediction is not None:
        lines.extend(_prediction_lines(diagnosis.prediction, colour))
    if diagnosis.recurrence is not None:
        lines.extend(["", diagnosis.recurrence.text])
    if diagnosis.seen_before:
        lines.extend(["", _paint("Seen before", _BOLD, colour) + " (same cluster, cause and blocking object):"])
        for seen in diagnosis.seen_before:
            link = f" ({seen.thread.permalink})" if seen.thread is not None and seen.thread.permalink else ""
            lines.append(f"  - incident {seen.incident}, {seen.said}{link}")
    return "\n".join(lines) + "\n"


def _prediction_lines(prediction: Prediction, colour: bool) -> list[str]:
    """What deleting it now would meet: the reasons, each with its evidence and what to do before the delete."""
    if prediction.complete and not prediction.findings:
        return []  # the headline says it all
    lines = ["", _paint("If it were deleted now:", _BOLD, colour)]
    if not prediction.complete:
        lines.append(
            _paint("INCOMPLETE", _YELLOW, colour)
            + ": some evidence could not be collected or does not tell, so nsstuck cannot say nothing would hold it:"
        )
        lines.extend(f"  - {gap}" for gap in prediction.gaps)
    if not prediction.findings:
        lines.append("  nothing seen would hold it")
    for number, finding in enumerate(prediction.findings, 1):
        lines.append("")
        lines.extend(_finding_lines(number, finding, colour, predicted=True))
    return lines
