"""Making text safe and short for Slack. Pure."""

from __future__ import annotations

import re
from urllib.parse import urlencode

_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,30}$")
_MESSAGE_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
_WORKSPACE_URL = re.compile(r"^https://[a-z0-9][a-z0-9.-]{0,200}\.slack(-gov)?\.com/?$")


def escape(text: str) -> str:
    """Escape mrkdwn control characters: `&` first, then `<` and `>` (the Slack brief, section 7).

    Everything that comes from a user or a cluster goes through here before it meets mrkdwn, so that
    `<!channel>` in a typo or an object name pings nobody and links nowhere.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    """Inline code: escaped, with backticks that would end it turned into quotes."""
    return "`" + escape(text).replace("`", "'") + "`"


def clip(text: str, limit: int, *, suffix: str = "…") -> str:
    """At most `limit` characters, cut on a character boundary with a visible mark."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(suffix))] + suffix


def thread_url(channel: str, thread_ts: str, *, workspace: str | None = None) -> str | None:
    """A link to the thread's parent message, or None when the ids do not look like Slack's."""
    if not _CHANNEL_ID.match(channel) or not _MESSAGE_TS.match(thread_ts):
        return None
    if workspace and _WORKSPACE_URL.match(workspace):
        return f"{workspace.rstrip('/')}/archives/{channel}/p{thread_ts.replace('.', '')}"
    return "https://slack.com/app_redirect?" + urlencode({"channel": channel, "message_ts": thread_ts})
