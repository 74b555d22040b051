"""A digest as plain text: what `nsstuck digest run --dry-run` prints. Pure."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.services.digesting import Digest, Entry, Section
from bot.services.reporting import human_seconds


def headline(digest: Digest) -> str:
    local = digest.scheduled_for.astimezone(ZoneInfo(digest.timezone))
    when = local.strftime("%a %Y-%m-%d %H:%M ") + digest.timezone
    clusters = len(digest.sections)
    if digest.all_clear:
        return (
            f"All clear ({when}): no namespace stuck longer than {human_seconds(digest.stuck_after)} "
            f"on {clusters} cluster{'s' if clusters != 1 else ''}."
        )
    unreachable = sum(1 for s in digest.sections if not s.reachable)
    text = f"Stuck namespaces ({when}): {digest.stuck} stuck longer than {human_seconds(digest.stuck_after)}"
    if unreachable:
        text += f", {unreachable} cluster{'s' if unreachable != 1 else ''} unreachable"
    return text


def _line(entry: Entry) -> str:
    if entry.error:
        return f"{entry.namespace}: stuck {human_seconds(entry.stuck_for)}, could not be diagnosed ({entry.error})"
    cause = entry.cause or "unknown"
    text = f"{entry.namespace}: stuck {human_seconds(entry.stuck_for)}, {cause}"
    return text + (f": {entry.summary}" if entry.summary else "")


def section_lines(section: Section) -> list[str]:
    if not section.reachable:
        lines = [f"{section.cluster}: UNREACHABLE ({section.error or 'no answer'})"]
        if section.unverified:
            names = ", ".join(e.namespace for e in section.unverified)
            lines.append(f"  stuck at the last digest, cannot check now: {names}")
    else:
        lines = [f"{section.cluster}:" + (" nothing stuck" if section.quiet else "")]
    for title, entries in (("new since the last digest", section.new), ("still stuck", section.still)):
        if entries:
            lines.append(f"  {title}:")
            lines.extend(f"    - {_line(e)}" for e in entries)
    if section.resolved:
        lines.append("  resolved since the last digest:")
        lines.extend(f"    - {e.namespace}" for e in section.resolved)
    if section.waiting:
        lines.append("  waiting for approval:")
        lines.extend(
            f"    - #{w.id} {w.namespace}: {w.description} ({w.approvals} of {w.required})" for w in section.waiting
        )
    return lines


def render_text(digest: Digest) -> str:
    lines = [headline(digest)]
    if not digest.all_clear:
        for section in digest.sections:
            lines.extend(section_lines(section))
    return "\n".join(lines) + "\n"
