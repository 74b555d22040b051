"""Making text safe and short for Slack. Pure."""

from __future__ import annotations

from bot.domain.slack_links import thread_url

__all__ = ["clip", "code", "escape", "thread_url"]


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
