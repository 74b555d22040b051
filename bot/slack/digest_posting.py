"""Posting a digest: the first message in the channel, any further parts in its thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.errors import ConfigError, NsstuckError
from bot.services.digesting import Digest
from bot.settings import Settings
from bot.slack.blocks import Message
from bot.slack.digest_blocks import digest_messages

Send = Callable[[str, Message, str | None], dict[str, Any]]


def post_digest(send: Send, digest: Digest, *, workspace: str | None) -> str | None:
    """Post it through `send(channel, message, thread_ts)`; returns the first message's ts."""
    messages = digest_messages(digest, workspace=workspace)
    first = send(digest.channel, messages[0], None)
    ts = str(first.get("ts") or "") or None
    for message in messages[1:]:
        send(digest.channel, message, ts)
    return ts


def direct_poster(settings: Settings) -> Callable[[Digest], str | None]:
    """A poster for one-off runs (the CLI): the Web API directly, no pacer, no Bolt app."""
    if settings.slack_bot_token is None:
        raise ConfigError("environment", "SLACK_BOT_TOKEN", "required to post a digest")
    client = WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2), RateLimitErrorRetryHandler(max_retry_count=3)],
    )

    def send(channel: str, message: Message, thread_ts: str | None) -> dict[str, Any]:
        response = client.chat_postMessage(
            channel=channel,
            text=message.text,
            blocks=list(message.blocks),
            thread_ts=thread_ts,
            unfurl_links=False,  # a digest links to every incident's thread: no preview of each
            unfurl_media=False,
        )
        return dict(response.data) if isinstance(response.data, dict) else {}

    def poster(digest: Digest) -> str | None:
        try:
            workspace = str(client.auth_test().get("url") or "") or None
            return post_digest(send, digest, workspace=workspace)
        except SlackApiError as e:
            raise NsstuckError(f"Slack refused the digest: {e.response.get('error')}") from None

    return poster
