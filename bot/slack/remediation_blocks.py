"""Block Kit for remediation: the request buttons under a report's remedies, and the request
message with its Approve and Reject buttons. Pure functions; everything from a cluster is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.domain.durations import human_seconds
from bot.domain.findings import Risk
from bot.remediation.requests import RequestView
from bot.slack import ids
from bot.slack.blocks import Block, Message, risk_label
from bot.slack.text import clip, code, escape
from bot.store.audit import Appended

BUTTON_TEXT = 75


def _button(text: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "value": value,
        "text": {"type": "plain_text", "text": clip(text, BUTTON_TEXT), "emoji": True},
    }
    if style:
        button["style"] = style
    return button


def mention(approver: str) -> str:
    return f"<!subteam^{approver}>" if approver.startswith("S") else f"<@{approver}>"


_STATUS = {
    "executing": ":gear: Approved by {approvers}: making the change now…",
    "applied": ":white_check_mark: Applied (approved by {approvers}). {reason}",
    "failed": ":x: Failed: {reason}",
    "stale": ":hourglass: Stale, nothing changed: {reason}",
    "rejected": ":no_entry: Rejected: {reason}",
    "expired": ":hourglass: Expired without enough approvals; nothing changed.",
}


def request_message(view: RequestView, *, approvers: Sequence[str], now: datetime) -> Message:
    """The request in the thread: who asked, the change in words and as kubectl, who must approve."""
    remedy = view.remedy
    lines = [
        f":hammer_and_wrench: *Remediation request #{view.id}* on *{escape(view.cluster)}* / "
        f"*{escape(view.namespace)}*, asked by <@{escape(view.requested_by)}>",
        f"*Change:* {escape(remedy.description)}",
        f"*Risk:* {risk_label(remedy.risk)}",
    ]
    if remedy.leaves_behind:
        lines.append("*Leaves behind:* " + escape("; ".join(remedy.leaves_behind)))
    text = "\n".join(lines)
    blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000)}}]
    if remedy.commands:
        by_hand = "*The same by hand:*\n" + "\n".join(code(c) for c in remedy.commands)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip(by_hand, 3000)}})
    approved = ", ".join(f"<@{escape(u)}>" for u in view.approvals) or "nobody yet"
    if view.status == "pending":
        who = ", ".join(mention(a) for a in approvers) or "nobody (no approvers are configured)"
        left = max(0, int((view.expires_at - now).total_seconds()))
        needs = (
            f"*Needs* {view.required_approvals} approval{'s' if view.required_approvals > 1 else ''} from {who} "
            f"(the requester's own does not count) · approved by {approved} "
            f"({len(view.approvals)} of {view.required_approvals}) · expires in {human_seconds(left)}"
        )
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": clip(needs, 3000)}]})
        approve = _button("Approve", ids.APPROVE, str(view.id), style="primary")
        if remedy.risk is Risk.HIGH:
            approve["confirm"] = {
                "title": {"type": "plain_text", "text": "Approve a high-risk change?"},
                "text": {"type": "mrkdwn", "text": clip(escape(remedy.description), 300)},
                "confirm": {"type": "plain_text", "text": "Approve"},
                "deny": {"type": "plain_text", "text": "Cancel"},
                "style": "danger",
            }
        reject = _button("Reject", ids.REJECT, str(view.id), style="danger")
        blocks.append({"type": "actions", "block_id": f"request:{view.id}", "elements": [approve, reject]})
        fallback = f"Remediation request #{view.id}: {remedy.description} (needs approval)"
    else:
        template = _STATUS.get(view.status, "{reason}")
        status = template.format(approvers=approved, reason=escape(view.status_reason or ""))
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip(status, 3000)}})
        fallback = f"Remediation request #{view.id}: {view.status}"
    return Message(text=clip(fallback, 300), blocks=tuple(blocks))


def pending_lines(views: Sequence[RequestView]) -> list[str]:
    """App Home lines for the requests waiting for approval or being executed."""
    out = []
    for view in views:
        state = (
            "being applied"
            if view.status == "executing"
            else (f"{len(view.approvals)} of {view.required_approvals} approvals")
        )
        out.append(
            f"#{view.id} *{escape(view.cluster)}* / *{escape(view.namespace)}*: {escape(view.remedy.description)} "
            f"· asked by <@{escape(view.requested_by)}> · {state}"
        )
    return out


def audit_mark(entry: Appended) -> str:
    """The audit entry a message reports, as the thread shows it (mrkdwn): "audit #123 · `3f2a9c1b0d4e`".
    A copy of the chain's hash outside the database, for `nsstuck audit verify --expect-head`."""
    return f"audit #{entry.seq} · {code(entry.short)}"


def outcome_text(view: RequestView) -> str:
    """One line on how a request ended, for its thread (plain words: escaped before it is posted)."""
    reason = view.status_reason or ""
    if view.status == "applied":
        return f"Done: {reason}. Following `{view.namespace}` until it is gone."
    if view.status == "stale":
        return (
            f"Not applied: the cluster changed since the diagnosis ({reason}). Nothing was changed; "
            f"run `/nsstuck {view.cluster} {view.namespace}` again and request it from the fresh diagnosis."
        )
    if view.status == "failed":
        return f"Failed: {reason}."
    return f"Request is {view.status}: {reason}"


def verification_text(view: RequestView) -> str:
    """How the namespace fared after an applied change (plain words: escaped before it is posted)."""
    if view.verification == "gone":
        return f"`{view.namespace}` is gone after remediation #{view.id}."
    if view.verification == "still_terminating":
        return (
            f"`{view.namespace}` is still Terminating after remediation #{view.id}; "
            f"run `/nsstuck {view.cluster} {view.namespace}` to see what holds it now."
        )
    return (
        f"Could not tell whether `{view.namespace}` is gone after remediation #{view.id}: the cluster did not answer."
    )
