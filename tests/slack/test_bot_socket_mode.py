"""The real bot process in Socket Mode: commands as envelopes, acks in time, reconnects, readiness."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import Running, running_bot


@pytest.fixture
def bot(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Running]:
    with running_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True) as running:
        slack_emulator.socket.wait_for_connections(1, timeout=15)
        yield running
        slack_emulator.socket.drop_all()  # the builtin client's close() waits otherwise


def _ready(bot: Running) -> int:
    try:
        with urllib.request.urlopen(bot.url + "/readyz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        with e:  # the error is the response: closing it closes its connection
            return int(e.code)


def test_a_command_envelope_is_acked_in_time_and_diagnosed(bot: Running) -> None:
    assert _ready(bot) == 200
    ack = bot.slack.socket_mode.slash_command("/nsstuck", "prod-eu payload-svc", user=ALICE, channel=OPS_CHANNEL)
    assert ack.elapsed < 3.0
    assert "On it: diagnosing `payload-svc`" in str(ack.payload)
    message = bot.slack.wait_for_message(OPS_CHANNEL, "payload-svc", timeout=20)
    assert "no such namespace" in bot.slack.render(message)
    # nothing was answered over HTTP: in Socket Mode /slack/events is not served
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(bot.url + "/slack/events", data=b"x"), timeout=5)
    with caught.value as refused:
        assert refused.code == 404


def test_the_bot_reconnects_after_a_disconnect_and_keeps_working(bot: Running) -> None:
    first = bot.slack.socket.connections()[-1]
    bot.slack.socket.send_disconnect(reason="refresh_requested", close_after=0.2)
    second = bot.slack.socket.wait_for_new_connection(after=first.id, timeout=15)
    assert second.id != first.id
    ack = bot.slack.socket_mode.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=5)
    assert "/nsstuck <cluster> <namespace>" in str(ack.payload)


def test_readiness_follows_the_socket(bot: Running) -> None:
    assert _ready(bot) == 200
    bot.slack.revoke_token(bot.slack.app_token)  # it cannot get a new connection URL any more
    # a close frame: the builtin client notices at once (a silent drop takes it 40-57 s: issue 10)
    for connection in bot.slack.socket.connections():
        bot.slack.socket.close(connection)
    bot.slack.wait_for(lambda: _ready(bot) == 503 or None, timeout=30, message="/readyz stayed 200")
