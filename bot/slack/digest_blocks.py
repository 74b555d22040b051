"""Block Kit for a digest: a headline, then one part per cluster with something to say (new, still
stuck, resolved, waiting for approval, or unreachable), each namespace linked to its incident's
thread. Quiet clusters share one line. Pure; everything from a cluster is escaped."""

from __future__ import annotations

from bot.domain.durations import human_seconds
from bot.services.digest_text import headline
from bot.services.digesting import Digest, Entry, Section
from bot.slack.blocks import Block, Message, _context, _section, _sections, pack
from bot.slack.text import code, escape, thread_url


def _name(entry: Entry, workspace: str | None) -> str:
    link = thread_url(entry.channel or "", entry.thread_ts or "", workspace=workspace)
    name = f"*{escape(entry.namespace)}*"
    return f"<{link}|{escape(entry.namespace)}>" if link else name


def _entry_line(entry: Entry, workspace: str | None) -> str:
    age = human_seconds(entry.stuck_for)
    if entry.error:
        return f"• {_name(entry, workspace)}: stuck {age}, could not be diagnosed ({escape(entry.error)})"
    line = f"• {_name(entry, workspace)}: stuck *{age}*, {code(entry.cause or 'unknown')}"
    return line + (f": {escape(entry.summary)}" if entry.summary else "")


def _cluster_blocks(section: Section, workspace: str | None) -> list[Block]:
    lines: list[str] = []
    if not section.reachable:
        lines.append(f":warning: *unreachable*: {escape(section.error or 'no answer')}")
        if section.unverified:
            names = ", ".join(escape(e.namespace) for e in section.unverified)
            lines.append(f"stuck at the last digest, cannot be checked now: {names}")
        return _sections(escape(section.cluster), lines)
    if section.new:
        lines.append(":new: *Newly stuck since the last digest*")
        lines.extend(_entry_line(e, workspace) for e in section.new)
    if section.still:
        lines.append(":hourglass: *Still stuck*")
        lines.extend(_entry_line(e, workspace) for e in section.still)
    if section.resolved:
        lines.append(":white_check_mark: *Resolved since the last digest*")
        lines.extend(f"• {_name(e, workspace)}" for e in section.resolved)
    if section.waiting:
        lines.append(":raised_hand: *Waiting for approval*")
        for w in section.waiting:
            link = thread_url(w.channel or "", w.thread_ts or "", workspace=workspace)
            what = f"#{w.id}" if not link else f"<{link}|#{w.id}>"
            state = "being applied" if w.status == "executing" else f"{w.approvals} of {w.required} approvals"
            lines.append(f"• {what} {escape(w.namespace)}: {escape(w.description)} ({state})")
    return _sections(escape(section.cluster), lines)


def digest_messages(digest: Digest, *, workspace: str | None) -> list[Message]:
    """The digest as one message, or several when it is long (the rest go in the first one's thread)."""
    title = headline(digest)
    blocks: list[Block] = [_section(f":bar_chart: *{escape(title)}*")]
    if not digest.all_clear:
        quiet = [s.cluster for s in digest.sections if s.quiet]
        for section in digest.sections:
            if not section.quiet:
                blocks.extend(_cluster_blocks(section, workspace))
        if quiet:
            blocks.append(_context("Nothing stuck on " + ", ".join(escape(c) for c in quiet)))
    messages = pack(blocks)
    total = len(messages)
    out = []
    for index, packed in enumerate(messages, 1):
        chunk = [*packed, _context(f"part {index} of {total}")] if total > 1 else packed
        out.append(Message(text=title if index == 1 else f"{title} (part {index} of {total})", blocks=tuple(chunk)))
    return out
