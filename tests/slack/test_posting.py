"""Posting once when Slack's answer is lost (bot/slack/posting.py), against the Slack emulator over HTTP."""

from __future__ import annotations

from urllib.error import URLError

import pytest
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from bot.services.metrics import Metrics
from bot.slack.blocks import Message
from bot.slack.pacing import ChannelPacer, Transient
from bot.slack.posting import Backlog, Poster
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL

HELLO = Message(text="hello", blocks=({"type": "section", "text": {"type": "mrkdwn", "text": "hello"}},))


def _poster(emu: SlackEmulator, *, timeout: int = 5, settle: float = 3.0) -> Poster:
    client = WebClient(
        token=emu.bot_token,
        base_url=emu.api_url,
        timeout=timeout,
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2, error_types=[URLError])],
    )
    return Poster(client, settle=settle, bot_id=lambda: emu.identity.bot_id, metrics=Metrics())


def _texts(emu: SlackEmulator) -> list[str]:
    return [str(m["text"]) for m in emu.channel_messages(OPS_CHANNEL)]


def test_a_post_that_timed_out_but_went_through_is_found_not_sent_again(slack_emulator: SlackEmulator) -> None:
    slack_emulator.set_latency("chat.postMessage", 1.5)
    poster = _poster(slack_emulator, timeout=1)
    pacer = ChannelPacer(interval=0.05)
    post = poster.prepare(OPS_CHANNEL, HELLO)
    answer = pacer.submit(OPS_CHANNEL, lambda: poster.send(post)).result(timeout=20)
    pacer.close()
    [message] = slack_emulator.channel_messages(OPS_CHANNEL)
    assert answer["ts"] == message["ts"]
    assert message["metadata"] == {"event_type": "nsstuck_post", "event_payload": {"key": post.key}}
    assert len(slack_emulator.calls("chat.postMessage")) == 1
    assert slack_emulator.calls("conversations.history")


def test_a_post_slack_answered_500_is_looked_for_then_sent_again_at_once(slack_emulator: SlackEmulator) -> None:
    slack_emulator.inject("chat.postMessage", http_status=500, times=2)
    poster = _poster(slack_emulator, settle=30.0)  # a 500 is an answer: no waiting for the settle time
    pacer = ChannelPacer(interval=0.05)
    post = poster.prepare(OPS_CHANNEL, HELLO, thread_ts=None)
    pacer.submit(OPS_CHANNEL, lambda: poster.send(post)).result(timeout=10)
    pacer.close()
    assert _texts(slack_emulator) == ["hello"]
    assert len(slack_emulator.calls("conversations.history")) == 2
    assert [c.status for c in slack_emulator.calls("chat.postMessage")] == [500, 500, 200]


def test_a_429_or_a_refused_connection_is_sent_again_without_looking(slack_emulator: SlackEmulator) -> None:
    slack_emulator.inject("chat.postMessage", http_status=429, retry_after=1, times=1)
    poster = _poster(slack_emulator)
    pacer = ChannelPacer(interval=0.05)
    post = poster.prepare(OPS_CHANNEL, HELLO)
    pacer.submit(OPS_CHANNEL, lambda: poster.send(post)).result(timeout=10)
    assert _texts(slack_emulator) == ["hello"]
    assert not slack_emulator.calls("conversations.history")

    nowhere = Poster(WebClient(token="xoxb-x", base_url="http://127.0.0.1:1/api/", retry_handlers=[]), settle=30.0,
                     bot_id=lambda: None, metrics=Metrics())  # fmt: skip
    lost = nowhere.prepare(OPS_CHANNEL, HELLO)
    with pytest.raises(Transient):
        nowhere.send(lost)
    assert not lost.in_doubt  # nothing reached Slack
    pacer.close()


def test_a_thread_reply_is_looked_for_in_its_thread(slack_emulator: SlackEmulator) -> None:
    poster = _poster(slack_emulator, timeout=1)
    root = poster.send(poster.prepare(OPS_CHANNEL, HELLO))
    slack_emulator.set_latency("chat.postMessage", 1.5)
    reply = poster.prepare(OPS_CHANNEL, Message(text="reply", blocks=()), thread_ts=str(root["ts"]))
    pacer = ChannelPacer(interval=0.05)
    pacer.submit(OPS_CHANNEL, lambda: poster.send(reply)).result(timeout=20)
    pacer.close()
    assert [m["text"] for m in slack_emulator.thread(OPS_CHANNEL, str(root["ts"]))] == ["reply"]
    assert slack_emulator.calls("conversations.replies")


def test_the_backlog_keeps_what_slack_fails_and_drops_what_it_refuses() -> None:
    backlog = Backlog()
    outcomes: dict[str, list[Exception | None]] = {"down": [Transient("500"), None], "refused": [ValueError("no")]}
    done: list[str] = []

    def work(name: str) -> None:
        outcome = outcomes[name].pop(0)
        if outcome is not None:
            raise outcome
        done.append(name)

    backlog.keep("down", lambda: work("down"))
    backlog.keep("down", lambda: work("down"))  # one entry per key
    backlog.keep("refused", lambda: work("refused"))
    assert backlog.retry() == 0  # Slack still fails: the pass stops
    assert len(backlog) == 2
    assert backlog.retry() == 1
    assert done == ["down"]
    assert len(backlog) == 0  # the refused one is dropped
