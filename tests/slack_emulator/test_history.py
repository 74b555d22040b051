"""conversations.history and conversations.replies, and message metadata, with the real WebClient."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL

META = {"event_type": "nsstuck_post", "event_payload": {"key": "run:1:0"}}


def _error(call: object) -> str:
    with pytest.raises(SlackApiError) as info:
        call()  # type: ignore[operator]
    return str(info.value.response["error"])


def test_history_is_newest_first_top_level_only_with_metadata_on_request(
    slack_emulator: SlackEmulator, slack_web_client: WebClient
) -> None:
    root = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="root", metadata=META)
    slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="reply", thread_ts=root["ts"])
    slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="second")

    plain = slack_web_client.conversations_history(channel=OPS_CHANNEL)
    assert [m["text"] for m in plain["messages"]] == ["second", "root"]
    assert all("metadata" not in m for m in plain["messages"])
    assert plain["has_more"] is False

    full = slack_web_client.conversations_history(channel=OPS_CHANNEL, include_all_metadata=True)
    assert full["messages"][1]["metadata"] == META
    assert full["messages"][1]["reply_count"] == 1

    newer = slack_web_client.conversations_history(channel=OPS_CHANNEL, oldest=root["ts"])
    assert [m["text"] for m in newer["messages"]] == ["second"]  # oldest is exclusive
    both = slack_web_client.conversations_history(channel=OPS_CHANNEL, oldest=root["ts"], inclusive=True)
    assert [m["text"] for m in both["messages"]] == ["second", "root"]


def test_history_pages_with_a_cursor(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    for i in range(5):
        slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text=f"m{i}")
    seen: list[str] = []
    for page in slack_web_client.conversations_history(channel=OPS_CHANNEL, limit=2):
        seen.extend(m["text"] for m in page["messages"])
    assert seen == ["m4", "m3", "m2", "m1", "m0"]
    assert _error(lambda: slack_web_client.conversations_history(channel=OPS_CHANNEL, cursor="nope")) == (
        "invalid_cursor"
    )
    assert _error(lambda: slack_web_client.conversations_history(channel=OPS_CHANNEL, oldest="x")) == (
        "invalid_ts_oldest"
    )


def test_replies_are_the_parent_then_the_thread(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    root = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="root")
    first = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="one", thread_ts=root["ts"], metadata=META)
    slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="two", thread_ts=root["ts"])

    thread = slack_web_client.conversations_replies(channel=OPS_CHANNEL, ts=root["ts"], include_all_metadata=True)
    assert [m["text"] for m in thread["messages"]] == ["root", "one", "two"]
    assert thread["messages"][1]["metadata"] == META
    by_reply = slack_web_client.conversations_replies(channel=OPS_CHANNEL, ts=first["ts"])
    assert [m["text"] for m in by_reply["messages"]] == ["root", "one", "two"]
    assert "metadata" not in by_reply["messages"][1]
    assert _error(lambda: slack_web_client.conversations_replies(channel=OPS_CHANNEL, ts="1.000001")) == (
        "thread_not_found"
    )


def test_reading_needs_the_bot_in_the_channel(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    slack_emulator.channel(OPS_CHANNEL).bot_is_member = False
    assert _error(lambda: slack_web_client.conversations_history(channel=OPS_CHANNEL)) == "not_in_channel"
    assert _error(lambda: slack_web_client.conversations_history(channel="CNOPE")) == "channel_not_found"
