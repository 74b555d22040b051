"""A minimal real Bolt App over Socket Mode (Bolt's default SocketModeHandler, i.e. the builtin client)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler

from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, make_web_client


@pytest.fixture
def handler(slack_emulator: SlackEmulator) -> Iterator[SocketModeHandler]:
    executor = ThreadPoolExecutor(max_workers=8)
    app = App(client=make_web_client(slack_emulator), listener_executor=executor)

    @app.command("/nsstuck")
    def command(ack: Any, command: dict[str, Any], say: Any) -> None:
        ack(f"Looking into `{command['text']}`")
        say(text=f"diagnosis of {command['text']}", channel=command["channel_id"])

    handler = SocketModeHandler(app, app_token=slack_emulator.app_token)
    handler.connect()  # type: ignore[no-untyped-call]  # non-blocking, unlike start()
    try:
        yield handler
    finally:
        handler.client.auto_reconnect_enabled = False
        slack_emulator.socket.drop_all()
        handler.client.closed = True
        handler.client.message_queue.put("{}")
        handler.close()  # type: ignore[no-untyped-call]
        executor.shutdown(wait=False)


def test_bolt_socket_mode_round_trip_is_not_hit_by_the_payload_trap(
    slack_emulator: SlackEmulator, handler: SocketModeHandler
) -> None:
    slack_emulator.socket.wait_for_connections(1)
    ack = slack_emulator.socket_mode.slash_command("/nsstuck", "payload-svc", user=ALICE, channel=OPS_CHANNEL)
    assert ack.payload == {"text": "Looking into `payload-svc`"}
    assert [m["text"] for m in slack_emulator.ephemerals(OPS_CHANNEL, ALICE)] == ["Looking into `payload-svc`"]
    msg = slack_emulator.wait_for_message(OPS_CHANNEL, "diagnosis of payload-svc")
    assert msg["bot_id"] == "B111"
    assert len(slack_emulator.calls("auth.test")) == 1
