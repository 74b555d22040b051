"""Rate limits, injected faults, latency and the journal."""

from __future__ import annotations

import time

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from tests.fakes.slackapi import FakeClock, RateLimiter, SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, SECOND_CHANNEL, make_web_client

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing


def test_rate_limiter_is_a_token_bucket_per_channel() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock)
    limiter.set_rule("chat.postMessage", per_second=1.0, burst=2)
    assert limiter.check("chat.postMessage", "C1") is None
    assert limiter.check("chat.postMessage", "C1") is None
    assert limiter.check("chat.postMessage", "C1") == 1
    assert limiter.check("chat.postMessage", "C2") is None  # another channel has its own bucket
    assert limiter.check("users.info", None) is None  # no rule, no limit
    clock.advance(0.5)
    assert limiter.check("chat.postMessage", "C1") == 1
    clock.advance(0.5)
    assert limiter.check("chat.postMessage", "C1") is None
    limiter.set_rule("chat.update", per_second=0.25, burst=1, per_channel=False)
    assert limiter.check("chat.update", "C1") is None
    assert limiter.check("chat.update", "C2") == 4  # shared bucket; integer seconds, rounded up
    assert limiter.limited == [("chat.postMessage", "C1", 1), ("chat.postMessage", "C1", 1), ("chat.update", "", 4)]


def test_post_message_429_without_retry_handler(slack_env: None) -> None:
    clock = FakeClock()
    with SlackEmulator(limiter_clock=clock, post_message_burst=1) as emu:
        emu.add_channel(OPS_CHANNEL, "ops", members=[])
        emu.add_channel(SECOND_CHANNEL, "other", members=[])
        client = WebClient(token=emu.bot_token, base_url=emu.api_url)  # default handlers: no 429 retry
        client.chat_postMessage(channel=OPS_CHANNEL, text="one")
        with pytest.raises(SlackApiError) as info:
            client.chat_postMessage(channel=OPS_CHANNEL, text="two")
        assert info.value.response.status_code == 429
        assert info.value.response["error"] == "ratelimited"
        assert info.value.response.headers["Retry-After"] == "1"
        assert client.chat_postMessage(channel=SECOND_CHANNEL, text="elsewhere")["ok"]
        clock.advance(1.0)
        assert client.chat_postMessage(channel=OPS_CHANNEL, text="two")["ok"]
        assert [e.status for e in emu.calls("chat.postMessage")] == [200, 429, 200, 200]
        assert len(emu.channel_messages(OPS_CHANNEL)) == 2


def test_rate_limit_error_retry_handler_waits_and_succeeds(slack_emulator: SlackEmulator) -> None:
    slack_emulator.set_rate_limit("chat.postMessage", per_second=1.0, burst=1)
    client = make_web_client(slack_emulator, rate_limit_retries=1)
    assert any(isinstance(h, RateLimitErrorRetryHandler) for h in client.retry_handlers)
    client.chat_postMessage(channel=OPS_CHANNEL, text="first")
    started = time.monotonic()
    assert client.chat_postMessage(channel=OPS_CHANNEL, text="second")["ok"]
    waited = time.monotonic() - started
    assert 1.0 <= waited < 3.0  # Retry-After: 1, plus the handler's random() jitter
    assert [e.status for e in slack_emulator.calls("chat.postMessage")] == [200, 429, 200]
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["first", "second"]


def test_injected_faults(slack_emulator: SlackEmulator) -> None:
    client = make_web_client(slack_emulator, rate_limit_retries=0)
    rule = slack_emulator.inject("chat.postMessage", error="channel_not_found", times=2)
    for _ in range(2):
        with pytest.raises(SlackApiError) as info:
            client.chat_postMessage(channel=OPS_CHANNEL, text="x")
        assert info.value.response["error"] == "channel_not_found"
    assert rule.hits == 2
    assert client.chat_postMessage(channel=OPS_CHANNEL, text="x")["ok"]

    slack_emulator.inject("users.info", http_status=500)
    with pytest.raises(SlackApiError) as info:
        client.users_info(user=ALICE)
    assert info.value.response.status_code == 500
    assert info.value.response["error"] == "internal_error"

    slack_emulator.inject("*", http_status=429, retry_after=7, when=lambda p: p.get("channel") == SECOND_CHANNEL)
    assert client.conversations_info(channel=OPS_CHANNEL)["ok"]  # filtered out by `when`
    with pytest.raises(SlackApiError) as info:
        client.conversations_info(channel=SECOND_CHANNEL)
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "7"
    assert info.value.response["error"] == "ratelimited"


def test_reset_connection_is_retried_by_the_default_handler(slack_emulator: SlackEmulator) -> None:
    client = WebClient(token=slack_emulator.bot_token, base_url=slack_emulator.api_url)
    slack_emulator.inject("auth.test", reset_connection=True, times=1)
    assert client.auth_test()["ok"]  # ConnectionErrorRetryHandler resends once
    assert [e.response is None for e in slack_emulator.calls("auth.test")] == [True, False]


def test_latency_per_method(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    slack_emulator.set_latency("users.info", 0.3)
    started = time.monotonic()
    slack_web_client.users_info(user=ALICE)
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    slack_web_client.auth_test()
    assert time.monotonic() - started < 0.25


def test_journal_records_parsed_bodies_without_tokens(
    slack_emulator: SlackEmulator, slack_web_client: WebClient
) -> None:
    before = time.time()
    slack_web_client.chat_postMessage(
        channel=OPS_CHANNEL, text="hi", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]
    )
    slack_web_client.users_info(user=ALICE)
    post, info = slack_emulator.calls()
    assert post.method == "chat.postMessage"
    assert post.params["blocks"][0]["type"] == "section"  # JSON body, parsed
    assert post.headers["Content-Type"].startswith("application/json")
    assert info.params == {"user": ALICE}  # form body, parsed
    assert info.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert "slackclient/" in info.headers["User-Agent"]
    assert before - 1 <= post.time <= time.time()
    assert post.ok
    assert post.response["ts"] == slack_emulator.channel_messages(OPS_CHANNEL)[0]["ts"]
    assert slack_emulator.bot_token not in repr(slack_emulator.calls())
    assert slack_emulator.server_errors == []
