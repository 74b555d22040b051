"""Block Kit messages for a diagnosis: a one-line verdict for the channel, the full report for its
thread. Pure functions of the Diagnosis; everything from the cluster is escaped.

Slack's limits (the brief, section 7): 3,000 characters per section, 50 blocks per message, and an
undocumented aggregate of about 13k characters of blocks per message. Long lists are never cut:
they are split over several sections, and the sections over as many thread messages as needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.domain.durations import human_seconds
from bot.domain.findings import Diagnosis, Finding, FoundBy, NamespaceState, Remedy, Risk
from bot.slack import ids
from bot.slack.text import clip, code, escape, thread_url

SECTION_LIMIT = 3000
MAX_BLOCKS = 45  # below the 50 allowed, for the context blocks we may append
MAX_CHARS = 11_000  # below the ~13k aggregate Slack enforces
LINE_LIMIT = 400

Block = dict[str, Any]

_RISK = {
    Risk.NONE: "safe",
    Risk.LOW: "low risk",
    Risk.MEDIUM: ":warning: medium risk",
    Risk.HIGH: ":rotating_light: high risk",
}


@dataclass(frozen=True)
class Message:
    text: str  # the notification and accessibility fallback
    blocks: tuple[Block, ...]


# a finding about a finalizer: what its controller's state means (issue 22)
CONTROLLER_STATES = {
    "alive": "the evidence shows it at work",
    "dead": "the evidence shows it is not running, or that none exists",
    "unknown": "nothing seen shows whether it runs",
}


def risk_label(risk: Risk) -> str:
    return _RISK[risk]


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}]}


def _sections(title: str, lines: list[str]) -> list[Block]:
    """A titled list as as many sections as it takes, every line kept (clipped if absurdly long)."""
    blocks: list[Block] = []
    current = f"*{title}*"
    for raw in lines:
        line = clip(raw, LINE_LIMIT)
        if len(current) + 1 + len(line) > SECTION_LIMIT:
            blocks.append(_section(current))
            current = f"*{title} (continued)*"
        current += "\n" + line
    blocks.append(_section(current))
    return blocks


def where(diagnosis: Diagnosis) -> str:
    return f"*{escape(diagnosis.cluster)}* / *{escape(diagnosis.namespace)}*"


def verdict(
    diagnosis: Diagnosis, *, requested_by: str | None = None, unasked: bool = False, deleted_by: str | None = None
) -> Message:
    """The short message in the channel: state, cause, how long it has been terminating; who asked, or
    (`unasked`) that the watch found it, or (`deleted_by`, a Kubernetes user) that the admission webhook
    saw that user delete it."""
    place = where(diagnosis)
    plain = f"{diagnosis.cluster}/{diagnosis.namespace}"
    if diagnosis.state is NamespaceState.NOT_FOUND:
        line, text = f":white_check_mark: {place}: no such namespace (already gone?)", f"{plain}: not found"
    elif diagnosis.state is NamespaceState.ACTIVE:
        line, text = _active(diagnosis, place, plain)
    else:
        age = human_seconds(diagnosis.terminating_for_seconds or 0)
        blocking = [f for f in diagnosis.findings if f.blocking]
        if blocking and deleted_by is not None:
            cause = blocking[0].cause.value
            line = (
                f":rotating_light: {place} was just deleted by {code(deleted_by)} and *will get stuck*\n"
                f"*Cause:* {code(cause)}: {escape(blocking[0].summary)}"
            )
            text = f"{plain}: deleted by {deleted_by}, will get stuck ({cause})"
        elif blocking:
            cause = blocking[0].cause.value
            line = (
                f":red_circle: {place} is *stuck*, Terminating for *{age}*\n"
                f"*Cause:* {code(cause)}: {escape(blocking[0].summary)}"
            )
            if blocking[0].progress is not None:
                line += f"\n*Progress:* {escape(blocking[0].progress.text)}"
            text = f"{plain}: stuck ({cause}), Terminating for {age}"
        else:
            line = f":large_yellow_circle: {place} is Terminating for *{age}*: still deleting content, not stuck yet"
            moving = next((f.progress for f in diagnosis.findings if f.progress is not None), None)
            if moving is not None:
                line += f"\n*Progress:* {escape(moving.text)}"
            text = f"{plain}: Terminating for {age}, not stuck yet"
    notes = []
    if requested_by:
        notes.append(f"asked by <@{escape(requested_by)}>")
    if unasked:
        notes.append("found by nsstuck's watch, unasked")
    if deleted_by is not None:
        notes.append(
            f"deleted by {code(deleted_by)}; what will hold it: as nsstuck's admission webhook predicted at the delete"
        )
    if not diagnosis.complete:
        notes.append(":warning: incomplete evidence")
    if diagnosis.findings or has_prediction_details(diagnosis):
        notes.append("details in the thread")
    blocks = [_section(line)]
    blocks.extend(_memory(diagnosis))
    if notes:
        blocks.append(_context(" · ".join(notes)))
    return Message(text=text, blocks=tuple(blocks))


def _memory(diagnosis: Diagnosis) -> list[Block]:
    """Seen before (issue 39 §3): the recurrence line, then the earlier incidents, linked to their threads."""
    lines = []
    if diagnosis.recurrence is not None:
        lines.append(f":repeat: *Recurring:* {escape(diagnosis.recurrence.text)}")
    if diagnosis.seen_before:
        lines.append("*Seen before* (same cluster, cause and blocking object):")
        for seen in diagnosis.seen_before:
            link = seen.thread.permalink if seen.thread is not None else None
            name = f"<{link}|incident {seen.incident}>" if link else f"incident {seen.incident}"
            lines.append(f"• {name}, {escape(seen.said)}")
    return [_section("\n".join(lines))] if lines else []


def _active(diagnosis: Diagnosis, place: str, plain: str) -> tuple[str, str]:
    """An Active namespace's line, and with its prediction what deleting it now would meet."""
    prediction = diagnosis.prediction
    if prediction is None:
        return f":large_green_circle: {place} is Active, not being deleted", f"{plain}: active"
    reason = next((f for f in prediction.findings if f.blocking), None)
    if reason is not None:
        return (
            f":large_orange_circle: {place} is Active; *deleting it now would get stuck*: "
            f"{code(reason.cause.value)}: {escape(reason.summary)}",
            f"{plain}: active; deleting it now would get stuck ({reason.cause.value})",
        )
    if not prediction.complete:
        return (
            f":large_green_circle: {place} is Active; deleting it now: nothing seen would hold it, but the evidence "
            "is incomplete",
            f"{plain}: active; deleting it now: evidence incomplete",
        )
    return (
        f":large_green_circle: {place} is Active; deleting it now: nothing would hold it",
        f"{plain}: active; deleting it now: nothing would hold it",
    )


def _remedy_lines(remedy: Remedy, index: int) -> list[str]:
    approval = ", needs approval" if remedy.requires_approval else ""
    lines = [f"{index}. [{_RISK[remedy.risk]}{approval}] {escape(remedy.description)}"]
    if remedy.blocked_reason:
        lines.append(f"      :no_entry: {escape(remedy.blocked_reason)}")
    lines.extend(f"      {code(command)}" for command in remedy.commands)
    lines.extend(f"      leaves behind: {escape(item)}" for item in remedy.leaves_behind)
    return lines


MAX_OBJECTS = 15
MAX_REMEDIES = 6
MORE = "…and {n} more (the full report is attached)"


def _request_buttons(run_id: int, numbered: list[tuple[int, Remedy]], *, block_id: str) -> Block | None:
    """One "Request fix N" button per shown remedy that changes the cluster (N as numbered above)."""
    elements = [
        {
            "type": "button",
            "action_id": f"{ids.REQUEST_REMEDY}:{index}",  # unique within the block, as Slack requires
            "value": f"{run_id}:{remedy.id}",
            "text": {"type": "plain_text", "text": f"Request fix {index}", "emoji": True},
        }
        for index, remedy in numbered
        if remedy.requires_approval
    ]
    return {"type": "actions", "block_id": block_id, "elements": elements} if elements else None


def has_prediction_details(diagnosis: Diagnosis) -> bool:
    """An Active namespace's prediction names reasons or gaps: they go in the verdict's thread."""
    prediction = diagnosis.prediction
    return prediction is not None and bool(prediction.findings or prediction.gaps)


def _finding_blocks(
    number: int, finding: Finding, *, run_id: int | None = None, predicted: bool = False
) -> tuple[list[Block], bool]:
    """The blocks of one finding, and whether a list had to be cut. With `run_id`, the remedies that
    change the cluster get a button that files a remediation request (a prediction's never do)."""
    if predicted:
        flag = "would block" if finding.blocking else "would not block"
    else:
        flag = "blocking" if finding.blocking else "not blocking"
    cut = False
    blocks = [_section(f"*{number}. {code(finding.cause.value)}* ({flag}): {escape(finding.summary)}")]
    if finding.controller is not None:
        state = finding.controller.state.value
        found = finding.controller.found_by
        # how it was found, where the cluster (not the catalogue or the finalizer's name) said it
        how = f"; {found.said}" if found is not None and found not in (FoundBy.CATALOGUE, FoundBy.NAME) else ""
        blocks.append(_context(f"Controller: *{state}* ({CONTROLLER_STATES[state]}{how})"))
    if finding.progress is not None:
        blocks.append(_context(f"Progress: *{escape(finding.progress.text)}*"))
    if finding.evidence:
        blocks.extend(_sections("Evidence", [f"• {escape(e)}" for e in finding.evidence]))
    if finding.objects:
        objects = [
            f"• {code(o.display)}" + (f" in {code(o.namespace)}" if o.namespace else "")
            for o in finding.objects[:MAX_OBJECTS]
        ]
        if len(finding.objects) > MAX_OBJECTS:
            objects.append(MORE.format(n=len(finding.objects) - MAX_OBJECTS))
            cut = True
        blocks.extend(_sections(f"Objects ({len(finding.objects)})", objects))
    if finding.remedies:
        numbered = list(enumerate(finding.remedies, 1))
        lines: list[str] = []
        shown = numbered[: MAX_REMEDIES - 1]
        for index, remedy in shown:
            lines.extend(_remedy_lines(remedy, index))
        if len(numbered) > MAX_REMEDIES:
            lines.append(MORE.format(n=len(numbered) - MAX_REMEDIES))
            cut = True
        if len(numbered) >= MAX_REMEDIES:  # the last one (often the last resort) always stays visible
            lines.extend(_remedy_lines(numbered[-1][1], numbered[-1][0]))
            shown = [*shown, numbered[-1]]
        blocks.extend(_sections("Before the delete" if predicted else "Remedies, safest first", lines))
        if run_id is not None and not predicted:
            buttons = _request_buttons(run_id, shown, block_id=f"remedies:{run_id}:{number}")
            if buttons is not None:
                blocks.append(buttons)
    blocks.append({"type": "divider"})
    return blocks, cut


def report(diagnosis: Diagnosis) -> list[Message]:
    """The report as thread messages within Slack's limits; long lists end in "and N more"."""
    return report_parts(diagnosis)[0]


def report_parts(diagnosis: Diagnosis, *, run_id: int | None = None) -> tuple[list[Message], bool]:
    """The thread messages, and whether anything was cut (the full report then goes along as a file).
    With the diagnosis run's id, remedies that change the cluster get request buttons."""
    blocks: list[Block] = []
    cut = False
    if not diagnosis.complete:
        gaps = [f"• {escape(str(g))}" for g in diagnosis.gaps]
        blocks.extend(_sections(":warning: Incomplete evidence, so no force-finalize is offered", gaps))
    for number, finding in enumerate(diagnosis.findings, 1):
        finding_blocks, finding_cut = _finding_blocks(number, finding, run_id=run_id)
        blocks.extend(finding_blocks)
        cut = cut or finding_cut
    prediction = diagnosis.prediction
    if prediction is not None:
        blocks.append(_section("*If it were deleted now* (nothing is deleted: no fix here files a request)"))
        if not prediction.complete:
            gaps = [f"• {escape(str(g))}" for g in prediction.gaps]
            blocks.extend(_sections(":warning: Incomplete evidence, so nsstuck cannot say nothing would hold it", gaps))
        for number, finding in enumerate(prediction.findings, 1):
            finding_blocks, finding_cut = _finding_blocks(number, finding, predicted=True)
            blocks.extend(finding_blocks)
            cut = cut or finding_cut
        if not prediction.findings and prediction.complete:
            blocks.append(_section("Nothing would hold this namespace."))
    if not blocks:
        blocks.append(_section("Nothing holds this namespace."))
    messages = pack(blocks)
    total = len(messages)
    out = []
    for index, packed in enumerate(messages, 1):
        chunk = packed[:-1] if packed and packed[-1].get("type") == "divider" else packed
        if total > 1:
            chunk = [*chunk, _context(f"part {index} of {total}")]
        fallback = f"Diagnosis of {diagnosis.cluster}/{diagnosis.namespace}" + (
            f", part {index} of {total}" if total > 1 else ""
        )
        out.append(Message(text=fallback, blocks=tuple(chunk)))
    return out, cut


def pack(blocks: list[Block]) -> list[list[Block]]:
    """Blocks in order, as few messages as Slack's per-message limits allow."""
    messages: list[list[Block]] = [[]]
    size = 0
    for block in blocks:
        length = _length(block)
        if messages[-1] and (len(messages[-1]) >= MAX_BLOCKS or size + length > MAX_CHARS):
            messages.append([])
            size = 0
        messages[-1].append(block)
        size += length
    return messages


def _length(block: Block) -> int:
    text = block.get("text") or {}
    if isinstance(text, dict):
        return len(str(text.get("text", "")))
    return sum(len(str(e.get("text", ""))) for e in block.get("elements") or ())


def ephemeral(text: str) -> Message:
    return Message(text=text, blocks=(_section(text),))


def home(
    incidents: list[Any],
    *,
    workspace_url: str,
    now_seconds: Callable[[Any], int],
    requests: Sequence[str] = (),
) -> dict[str, Any]:
    """The App Home tab: the open incidents, oldest first, each with a link to its thread, and the
    remediation requests that wait for approval (as lines)."""
    items: list[Block] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Stuck namespaces"}},
    ]
    if not incidents:
        items.append(_section(":white_check_mark: No namespace is stuck right now."))
    shown = incidents[:90]
    for incident in shown:
        age = human_seconds(now_seconds(incident.since))
        cause = code(incident.cause or "unknown")
        line = f"*{escape(incident.cluster)}* / *{escape(incident.namespace)}* · {cause} · stuck for {age}"
        link = thread_url(incident.channel or "", incident.thread_ts or "", workspace=workspace_url)
        if link:
            line += f" · <{link}|thread>"
        items.append(_section(line))
    if len(incidents) > len(shown):
        items.append(_context(f"…and {len(incidents) - len(shown)} more (`/nsstuck history` lists them all)"))
    if requests:
        items.append({"type": "header", "text": {"type": "plain_text", "text": "Changes waiting for approval"}})
        items.extend(_sections("Requests", list(requests))[:10])
    items.append(_context("Updated when you open this tab."))
    return {"type": "home", "blocks": items}
