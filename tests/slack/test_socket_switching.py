"""Socket Mode connections replaced without a pause (bot/slack/socket_mode.py), on the real bot process.

Bolt's default client notices a connection that died without a close frame after 40 to 57 s, and
acknowledges the first command after a `refresh_requested` only once the old connection's read
returns (up to 3 s); bench/socket.py measures both clients side by side. Here the bot runs with its
defaults (a ping every 2 s, replaced after 6 s without a pong).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.settings import load_settings
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import Running, running_bot

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing


@pytest.fixture
def bot(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Running]:
    with running_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True) as running:
        slack_emulator.socket.wait_for_connections(1, timeout=15)
        yield running
        slack_emulator.socket.drop_all()


def test_a_connection_that_went_silent_is_replaced_within_seconds(bot: Running) -> None:
    first = bot.slack.socket.connections()[-1]
    time.sleep(2.5)  # a pong or two on the healthy connection first
    silenced_at = time.monotonic()
    bot.slack.socket.silence(first)
    second = bot.slack.socket.wait_for_new_connection(after=first.id, timeout=20)
    noticed = time.monotonic() - silenced_at
    # 6 s without a pong, checked every 2 s; the last pong came up to 2 s before the silence
    assert noticed < 10.0, noticed
    assert noticed > 3.0, noticed  # it was the pings that told, not something quicker by accident
    ack = bot.slack.socket_mode.slash_command(
        "/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=3, connection=second
    )
    assert ack.connection_id == second.id
    assert "/nsstuck <cluster> <namespace>" in str(ack.payload)


def test_the_first_command_after_a_refresh_is_acknowledged_at_once(bot: Running) -> None:
    first = bot.slack.socket.connections()[-1]
    # Slack asks for a new connection and closes the old one only 5 s later
    bot.slack.socket.send_disconnect(reason="refresh_requested", connection=first, close_after=5.0)
    second = bot.slack.socket.wait_for_new_connection(after=first.id, timeout=10)
    ack = bot.slack.socket_mode.slash_command(
        "/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=3, connection=second
    )
    assert ack.connection_id == second.id
    assert ack.elapsed < 1.0, ack.elapsed
    # the old connection is let go by the bot, not left to Slack's close
    bot.slack.socket.wait_for_close(first, timeout=4.0)


def test_every_command_sent_around_a_refresh_is_acknowledged_once(bot: Running) -> None:
    first = bot.slack.socket.connections()[-1]
    bot.slack.socket.send_disconnect(reason="refresh_requested", connection=first, close_after=1.0)
    second = bot.slack.socket.wait_for_new_connection(after=first.id, timeout=10)
    acks = [
        bot.slack.socket_mode.slash_command(
            "/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=3, connection=second
        )
        for _ in range(5)
    ]
    assert all(a.elapsed < 1.0 for a in acks), [a.elapsed for a in acks]
    assert len({a.envelope_id for a in acks}) == 5


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"NSSTUCK_SOCKET_PING_SECONDS": "5", "NSSTUCK_SOCKET_STALE_SECONDS": "5"}, "environment"),
        ({"NSSTUCK_SOCKET_PING_SECONDS": "0"}, "NSSTUCK_SOCKET_PING_SECONDS"),
        ({"NSSTUCK_SOCKET_STALE_SECONDS": "soon"}, "NSSTUCK_SOCKET_STALE_SECONDS"),
    ],
)
def test_ping_settings_are_checked(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert variable in str(caught.value)
