"""Block Kit for `/nsstuck history [<cluster> [<namespace>]]`: an answer only the caller sees. Pure.

Open incidents first, each with a link to its thread when it has one, then the recently resolved
ones, then the summary. Everything that comes from the database (cluster, namespace, cause) is
escaped; channel ids and message timestamps are checked against Slack's formats before they go
into a link, so a bad row can never forge one.

Thread links need no API call: with the workspace's URL (from the slash command's `team_domain`, or
`auth.test`'s `url`) they are permalinks, `https://acme.slack.com/archives/C0123ABCD/p1763712000000100`;
without it they go through `https://slack.com/app_redirect?channel=...&message_ts=...`.
"""

from __future__ import annotations

import re

from bot.services.history import History, IncidentEntry, RecurringNamespace
from bot.services.reporting import human_seconds
from bot.slack.blocks import MAX_BLOCKS, MAX_CHARS, SECTION_LIMIT, Block, Message
from bot.slack.text import clip, code, escape, thread_url

_TEAM_DOMAIN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
LINE_LIMIT = 400
MAX_LINES = 50  # per list: beyond this, "and N more" (the CLI shows everything)


def workspace_url(team_domain: str | None) -> str | None:
    """`https://<team_domain>.slack.com` from a slash command payload's `team_domain`, if it is one."""
    if team_domain and _TEAM_DOMAIN.match(team_domain):
        return f"https://{team_domain}.slack.com"
    return None


def _place(cluster: str, namespace: str) -> str:
    return f"*{escape(cluster)}* / *{escape(namespace)}*"


def incident_line(entry: IncidentEntry, history: History, *, workspace: str | None = None) -> str:
    cause = code(entry.cause) if entry.cause else "_cause not known_"
    if entry.is_open:
        seconds = entry.open_for_seconds(history.generated_at) or 0
        line = f":red_circle: {_place(entry.cluster, entry.namespace)} {cause}, stuck for *{human_seconds(seconds)}*"
    else:
        took = entry.time_to_resolution_seconds
        after = f" after {human_seconds(took)}" if took is not None else ""
        line = f":white_check_mark: {_place(entry.cluster, entry.namespace)} {cause}, resolved{after}"
    if entry.diagnoses > 1:
        line += f", {entry.diagnoses} diagnoses"
    if entry.thread is not None:
        url = thread_url(entry.thread.channel, entry.thread.thread_ts, workspace=workspace)
        if url is not None:
            line += f" · <{url}|thread>"
    return line


def _counts(items: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {count}" for name, count in items) or "none"


def _recurring(items: tuple[RecurringNamespace, ...]) -> str:
    return ", ".join(f"{_place(r.cluster, r.namespace)} ({r.incidents}x)" for r in items) or "none"


def _scope(history: History) -> str:
    filters = history.filters
    if filters.cluster and filters.namespace:
        return _place(filters.cluster, filters.namespace)
    if filters.cluster:
        return f"*{escape(filters.cluster)}*"
    return "every cluster" if filters.within is None else "the clusters of this channel"


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}]}


def _list_sections(title: str, lines: list[str]) -> list[Block]:
    """A titled list over as many sections as it needs, at most MAX_LINES lines, then "and N more"."""
    shown = [clip(line, LINE_LIMIT) for line in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        shown.append(f"…and {len(lines) - MAX_LINES} more (`nsstuck history` lists them all)")
    blocks: list[Block] = []
    current = f"*{title}*"
    for line in shown:
        if len(current) + 1 + len(line) > SECTION_LIMIT:
            blocks.append(_section(current))
            current = f"*{title} (continued)*"
        current += "\n" + line
    blocks.append(_section(current))
    return blocks


def _length(block: Block) -> int:
    text = block.get("text")
    if isinstance(text, dict):
        return len(str(text.get("text", "")))
    return sum(len(str(element.get("text", ""))) for element in block.get("elements") or ())


def history_message(history: History, *, workspace: str | None = None) -> Message:
    """The ephemeral answer: open incidents with their threads, the recently resolved, the summary."""
    summary = history.summary
    open_entries = [e for e in history.incidents if e.is_open]
    resolved_entries = [e for e in history.incidents if not e.is_open]
    median = summary.median_time_to_resolution_seconds
    head = f"Incidents on {_scope(history)}: {summary.open} open, {summary.resolved} resolved" + (
        f", median time to resolution *{human_seconds(median)}*" if median is not None else ""
    )
    body: list[Block] = []
    if open_entries:
        lines = [incident_line(e, history, workspace=workspace) for e in open_entries]
        body.extend(_list_sections(f"Open ({len(open_entries)})", lines))
    else:
        body.append(_section("Nothing open right now." if summary.incidents else "No incidents recorded here yet."))
    if resolved_entries:
        lines = [incident_line(e, history, workspace=workspace) for e in resolved_entries]
        body.extend(_list_sections("Recently resolved", lines))
    summary_lines = [
        "*Summary*",
        f"By cause: {_counts([(code(c.name) if c.name else '_unknown_', c.count) for c in summary.by_cause])}",
        f"By cluster: {_counts([(f'*{escape(str(c.name))}*', c.count) for c in summary.by_cluster])}",
        f"Keep coming back: {_recurring(summary.recurring)}",
    ]
    tail = [
        {"type": "divider"},
        _section("\n".join(summary_lines)),
        _context(f"the {len(history.incidents)} most recent · `nsstuck history --json` on the command line for more"),
    ]
    blocks: list[Block] = [_section(head)]
    budget = MAX_CHARS - sum(_length(b) for b in [*blocks, *tail])
    for block in body:
        # the summary always fits: incident sections give way first
        if len(blocks) + len(tail) + 1 > MAX_BLOCKS or _length(block) > budget:
            blocks.append(_context("…more incidents than fit here: `nsstuck history` lists them all"))
            break
        blocks.append(block)
        budget -= _length(block)
    blocks.extend(tail)
    where = history.filters.cluster or (
        "every cluster" if history.filters.within is None else "the clusters of this channel"
    )
    if history.filters.cluster and history.filters.namespace:
        where = f"{history.filters.cluster}/{history.filters.namespace}"
    text = f"Incidents on {escape(where)}: {summary.open} open, {summary.resolved} resolved"
    return Message(text=text, blocks=tuple(blocks))
