"""Socket Mode, driven by the real slack_sdk builtin SocketModeClient (what Bolt's SocketModeHandler uses)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.client import BaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from tests.fakes.slackapi import AckTimeout, SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL


class Recorder:
    """A listener that acks like Bolt does and remembers what it got."""

    def __init__(self) -> None:
        self.requests: list[SocketModeRequest] = []
        self.ack = True
        self.lock = threading.Lock()

    def __call__(self, client: BaseSocketModeClient, req: SocketModeRequest) -> None:
        with self.lock:
            self.requests.append(req)
        if not self.ack:
            return
        if req.type == "slash_commands":
            reply = {"text": f"Accepted: {req.payload['text']}"}
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id, payload=reply))
        elif req.type == "interactive" and req.payload["type"] == "view_submission":
            errors = {"response_action": "errors", "errors": {"reason": "Say why"}}
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id, payload=errors))
        else:
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def sm_client(slack_emulator: SlackEmulator, recorder: Recorder) -> Iterator[SocketModeClient]:
    web = WebClient(token=slack_emulator.bot_token, base_url=slack_emulator.api_url)
    client = SocketModeClient(app_token=slack_emulator.app_token, web_client=web, ping_interval=0.2)
    client.socket_mode_request_listeners.append(recorder)
    client.connect()
    try:
        yield client
    finally:
        client.auto_reconnect_enabled = False
        slack_emulator.socket.drop_all()  # else close() waits up to 3 s for the client's blocking recv
        client.closed = True
        client.message_queue.put("{}")  # wakes the message processor's 1 s queue poll, so close() is quick
        client.close()
        # close() joins the monitor thread; a reconnect it had under way when close() began may have
        # made a new session after close() closed the old one (the client re-enables reconnecting)
        if client.current_session is not None:
            client.current_session.close()


def test_connect_hello_and_ping(slack_emulator: SlackEmulator, sm_client: SocketModeClient) -> None:
    (conn,) = slack_emulator.socket.wait_for_connections(1)
    hello = slack_emulator.socket.sent[0]
    assert hello == {
        "type": "hello",
        "num_connections": 1,
        "debug_info": {"host": "emu", "build_number": 10, "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A111"},
    }
    (opened,) = slack_emulator.calls("apps.connections.open")
    assert opened.token_kind == "app"
    assert opened.params == {}
    assert conn.ticket in opened.response["url"]
    # The client pings on connect; websockets answers with a pong the client records.
    session = sm_client.current_session
    assert session is not None
    slack_emulator.wait_for(lambda: session.last_ping_pong_time is not None, 3)
    assert sm_client.is_connected()


def test_slash_command_envelope_and_ack(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient, recorder: Recorder
) -> None:
    slack_emulator.socket.wait_for_connections(1)
    ack = slack_emulator.socket_mode.slash_command("/nsstuck", "diagnose payload-svc", user=ALICE, channel=OPS_CHANNEL)
    assert ack.payload == {"text": "Accepted: diagnose payload-svc"}
    assert ack.elapsed < 3
    (req,) = recorder.requests
    assert req.type == "slash_commands"
    assert req.accepts_response_payload is True
    assert req.payload["command"] == "/nsstuck"
    assert req.payload["user_id"] == ALICE
    assert req.payload["response_url"].startswith(slack_emulator.url + "/webhook/commands/")
    # Slack shows the ack text to the user as an ephemeral message.
    assert [m["text"] for m in slack_emulator.ephemerals(OPS_CHANNEL, ALICE)] == ["Accepted: diagnose payload-svc"]


def test_events_carry_retry_fields(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient, recorder: Recorder
) -> None:
    slack_emulator.socket.wait_for_connections(1)
    payload = slack_emulator.payloads.app_mention(OPS_CHANNEL, "<@U0BOT> diagnose shop", user=ALICE)
    ack = slack_emulator.socket_mode.event(payload, retry_attempt=1, retry_reason="timeout")
    assert ack.payload is None
    assert ack.frame == {"envelope_id": ack.envelope_id}
    (req,) = recorder.requests
    assert (req.type, req.retry_attempt, req.retry_reason) == ("events_api", 1, "timeout")
    assert req.payload["event"]["type"] == "app_mention"
    assert req.payload["event"]["channel"] == OPS_CHANNEL
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["<@U0BOT> diagnose shop"]  # the user's message is visible


def test_view_submission_ack_sets_errors(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient, slack_web_client: WebClient, recorder: Recorder
) -> None:
    view = {
        "type": "modal",
        "callback_id": "why",
        "title": {"type": "plain_text", "text": "Why"},
        "submit": {"type": "plain_text", "text": "Go"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": "text"},
            }
        ],
    }
    opened = slack_web_client.views_open(trigger_id=slack_emulator.issue_trigger(ALICE), view=view)["view"]
    slack_emulator.socket.wait_for_connections(1)
    ack = slack_emulator.socket_mode.submit_view(opened["id"], {"reason": {"text": ""}}, user=ALICE)
    assert ack.payload == {"response_action": "errors", "errors": {"reason": "Say why"}}
    assert slack_emulator.view_errors(opened["id"]) == {"reason": "Say why"}
    (req,) = recorder.requests
    assert req.payload["view"]["state"]["values"] == {"reason": {"text": {"type": "plain_text_input", "value": ""}}}
    assert [v["id"] for v in slack_emulator.modal_stack(ALICE)] == [opened["id"]]  # still open


def test_unacknowledged_envelope_times_out(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient, recorder: Recorder
) -> None:
    recorder.ack = False
    slack_emulator.socket.wait_for_connections(1)
    eid = slack_emulator.socket.send_envelope("events_api", slack_emulator.payloads.app_home_opened(ALICE))
    with pytest.raises(AckTimeout):
        slack_emulator.socket.wait_ack(eid, timeout=0.3)
    slack_emulator.wait_for(lambda: recorder.requests, 2)


def test_disconnect_refresh_requested_reconnects(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient, recorder: Recorder
) -> None:
    (first,) = slack_emulator.socket.wait_for_connections(1)
    # Like Slack, close the old socket shortly after asking for the refresh: the client's reader thread is
    # parked in the old socket's blocking recv (3 s timeout) until then, and reads nothing from the new one.
    slack_emulator.socket.send_disconnect("refresh_requested", close_after=0.2)
    second = slack_emulator.socket.wait_for_new_connection(after=first.id, timeout=5)
    slack_emulator.socket.wait_for_close(first, timeout=5)
    assert len(slack_emulator.calls("apps.connections.open")) == 2
    assert second.ticket != first.ticket
    ack = slack_emulator.socket_mode.slash_command("/nsstuck", "after", user=ALICE, channel=OPS_CHANNEL)
    assert ack.connection_id == second.id
    assert recorder.requests[-1].payload["text"] == "after"


def test_link_disabled_then_server_closes(slack_emulator: SlackEmulator, sm_client: SocketModeClient) -> None:
    (first,) = slack_emulator.socket.wait_for_connections(1)
    slack_emulator.socket.send_disconnect("link_disabled", close_after=0.05)
    slack_emulator.socket.wait_for_close(first, timeout=5)
    disconnect = {"type": "disconnect", "reason": "link_disabled", "debug_info": {"host": "emu"}}
    assert disconnect in slack_emulator.socket.sent
    # The builtin client treats every disconnect alike: it fetches a new URL and reconnects.
    slack_emulator.socket.wait_for_new_connection(after=first.id, timeout=5)


def test_dropped_connection_is_detected_and_replaced(
    slack_emulator: SlackEmulator, sm_client: SocketModeClient
) -> None:
    (first,) = slack_emulator.socket.wait_for_connections(1)
    slack_emulator.socket.drop()
    slack_emulator.socket.wait_for_close(first, timeout=2)
    assert slack_emulator.socket.connections() == [] or slack_emulator.socket.connections()[0].id > first.id
    second = slack_emulator.socket.wait_for_new_connection(after=first.id, timeout=8)
    assert second.open
    ack = slack_emulator.socket_mode.slash_command("/nsstuck", "again", user=ALICE, channel=OPS_CHANNEL)
    assert ack.connection_id == second.id


def test_handshake_with_a_bad_or_reused_ticket_is_refused(slack_emulator: SlackEmulator) -> None:
    def handshake(path: str) -> str:
        port = int(slack_emulator.socket_url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            sock.sendall(
                (
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                ).encode()
            )
            return sock.recv(4096).decode(errors="replace").split("\r\n")[0]

    url = slack_emulator.socket.issue_url()
    path = url[url.index("/link/") :]
    assert handshake("/link/?ticket=forged&app_id=A111").startswith("HTTP/1.1 401")
    assert handshake(path).startswith("HTTP/1.1 101")
    assert handshake(path).startswith("HTTP/1.1 401")  # tickets are single-use
    assert len(slack_emulator.socket.refused_handshakes) == 2


def test_envelope_shapes(slack_emulator: SlackEmulator, sm_client: SocketModeClient) -> None:
    slack_emulator.socket.wait_for_connections(1)
    slack_emulator.socket_mode.slash_command("/nsstuck", "x", user=ALICE, channel=OPS_CHANNEL)
    envelope: dict[str, Any] = slack_emulator.socket.sent[-1]
    assert set(envelope) == {"envelope_id", "type", "accepts_response_payload", "payload"}
    assert envelope["type"] == "slash_commands"
    assert json.loads(json.dumps(envelope["payload"]))["is_enterprise_install"] == "false"
