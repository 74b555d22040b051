"""The report for a terminal: cause first, then evidence, objects and remedies with their commands."""

from __future__ import annotations

from bot.domain import durations
from bot.domain.findings import Diagnosis, Finding, NamespaceState, Remedy, Risk

_RISK_MARK = {Risk.NONE: "safe", Risk.LOW: "low risk", Risk.MEDIUM: "MEDIUM RISK", Risk.HIGH: "HIGH RISK"}


def human_seconds(seconds: int) -> str:
    """The terminal's durations: seconds shown under ten minutes ("5m 30s"), "4d 0h" kept even."""
    return durations.human_seconds(seconds, seconds_below_minutes=10)


def headline(diagnosis: Diagnosis) -> str:
    """One line: state, cause, for how long."""
    where = f"{diagnosis.cluster}/{diagnosis.namespace}"
    if diagnosis.state is NamespaceState.NOT_FOUND:
        return f"{where}: namespace not found (already gone, or never existed)"
    if diagnosis.state is NamespaceState.ACTIVE:
        return f"{where}: namespace is Active, not being deleted"
    age = human_seconds(diagnosis.terminating_for_seconds or 0)
    blocking = [f for f in diagnosis.findings if f.blocking]
    if not blocking:
        return f"{where}: Terminating for {age}; not stuck yet, content is still being deleted"
    return f"{where}: Terminating for {age}; stuck: {blocking[0].cause.value}: {blocking[0].summary}"


def _remedy_lines(index: int, remedy: Remedy) -> list[str]:
    approval = ", needs approval" if remedy.requires_approval else ""
    lines = [f"  {index}. [{_RISK_MARK[remedy.risk]}{approval}] {remedy.description}"]
    if remedy.blocked_reason:
        lines.append(f"       {remedy.blocked_reason.replace('blocked:', 'BLOCKED:', 1)}")
    lines.extend(f"       $ {command}" for command in remedy.commands)
    for item in remedy.leaves_behind[:10]:
        lines.append(f"       leaves behind: {item}")
    if len(remedy.leaves_behind) > 10:
        lines.append(f"       ... and {len(remedy.leaves_behind) - 10} more")
    return lines


def _finding_lines(number: int, finding: Finding) -> list[str]:
    flag = "BLOCKING" if finding.blocking else "not blocking"
    lines = [f"[{number}] {finding.cause.value} ({flag}): {finding.summary}"]
    if finding.evidence:
        lines.append("  evidence:")
        lines.extend(f"  - {e}" for e in finding.evidence)
    if finding.objects:
        lines.append("  objects:")
        lines.extend(f"  - {o.display}" + (f" in {o.namespace}" if o.namespace else "") for o in finding.objects[:20])
        if len(finding.objects) > 20:
            lines.append(f"  - ... and {len(finding.objects) - 20} more")
    if finding.remedies:
        lines.append("  remedies, safest first:")
        for i, remedy in enumerate(finding.remedies, 1):
            lines.extend(_remedy_lines(i, remedy))
    return lines


def render_text(diagnosis: Diagnosis) -> str:
    lines = [headline(diagnosis)]
    if not diagnosis.complete:
        lines.append("")
        lines.append("INCOMPLETE: some evidence could not be collected, so no force-finalize is offered:")
        lines.extend(f"  - {gap}" for gap in diagnosis.gaps)
    for number, finding in enumerate(diagnosis.findings, 1):
        lines.append("")
        lines.extend(_finding_lines(number, finding))
    return "\n".join(lines) + "\n"
