"""pytest fixtures for the emulated Slack platform.

- ``slack_env``: clears ``SLACK_CLIENT_ID``/``SLACK_CLIENT_SECRET`` (which silently switch Bolt to OAuth
  mode), ``SLACK_BOT_TOKEN``/``SLACK_APP_TOKEN``/``SLACK_SIGNING_SECRET`` and every proxy variable
  (slack_sdk ignores ``NO_PROXY``).
- ``slack_emulator``: a started ``SlackEmulator`` with the default workspace (``populate_workspace``),
  stopped after the test.
- ``slack_web_client``: a real ``slack_sdk.WebClient`` for the bot token, pointed at the emulator, with
  ``RateLimitErrorRetryHandler(max_retry_count=2)`` added.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .emulator import SlackEmulator

SIGNING_SECRET = "emulator-signing-secret-0123456789abcdef"
BOT_TOKEN = "xoxb-111-222-emulatorbottoken"
APP_TOKEN = "xapp-1-A111-333-emulatorapptoken"

OPS_CHANNEL = "C0123ABCD"
SECOND_CHANNEL = "C0SECOND1"
ALICE = "U0AAAAAAA"
BOB = "U0BBBBBBB"
CAROL = "U0CCCCCCC"
APPROVERS = "S0BBBBBBB"

ENV_TO_CLEAR = (
    "SLACK_CLIENT_ID",
    "SLACK_CLIENT_SECRET",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)


def populate_workspace(emu: SlackEmulator) -> SlackEmulator:
    """alice, bob, carol; #nsstuck-ops (everyone) and #platform (alice only); @ns-approvers = bob + carol."""
    emu.add_user(ALICE, "alice", real_name="Alice Adams", email="alice@example.com")
    emu.add_user(BOB, "bob", real_name="Bob Brown", email="bob@example.com", tz="America/New_York")
    emu.add_user(CAROL, "carol", real_name="Carol Chen", email="carol@example.com", tz="Asia/Tokyo")
    bot = emu.identity.bot_user_id
    emu.add_channel(OPS_CHANNEL, "nsstuck-ops", members=[ALICE, BOB, CAROL, bot])
    emu.add_channel(SECOND_CHANNEL, "platform", members=[ALICE, bot])
    emu.add_usergroup(APPROVERS, "ns-approvers", [BOB, CAROL], name="Namespace approvers")
    return emu


@pytest.fixture
def slack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def slack_emulator(slack_env: None) -> Iterator[SlackEmulator]:
    emu = SlackEmulator(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN)
    populate_workspace(emu)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def make_web_client(emu: SlackEmulator, *, token: str | None = None, rate_limit_retries: int = 2) -> Any:
    """A real ``slack_sdk.WebClient`` talking to the emulator (bot token unless ``token`` is given)."""
    from slack_sdk import WebClient
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

    client = WebClient(token=token or emu.bot_token, base_url=emu.api_url, timeout=10)
    if rate_limit_retries:
        client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=rate_limit_retries))
    return client


@pytest.fixture
def slack_web_client(slack_emulator: SlackEmulator) -> Any:
    return make_web_client(slack_emulator)
