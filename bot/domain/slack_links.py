"""Links to Slack messages made from their ids alone, without an API call. Pure."""

from __future__ import annotations

import re
from urllib.parse import urlencode

CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,30}$")
MESSAGE_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
WORKSPACE_URL = re.compile(r"^https://[a-z0-9][a-z0-9.-]{0,200}\.slack(-gov)?\.com/?$")


def thread_url(channel: str, thread_ts: str, *, workspace: str | None = None) -> str | None:
    """A link to the thread's parent message, or None when the ids do not look like Slack's."""
    if not CHANNEL_ID.match(channel) or not MESSAGE_TS.match(thread_ts):
        return None
    if workspace and WORKSPACE_URL.match(workspace):
        return f"{workspace.rstrip('/')}/archives/{channel}/p{thread_ts.replace('.', '')}"
    return "https://slack.com/app_redirect?" + urlencode({"channel": channel, "message_ts": thread_ts})
