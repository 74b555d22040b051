"""The same hostile payloads as Socket Mode envelopes (JSON objects, so any field may have any type):
the bot acknowledges every one it refuses (so that Slack does not send it again), stays connected and
ready, records nothing, shows nothing, and logs no failure."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from bot.slack import ids
from bot.slack.shapes import problem
from tests.fakes.slackapi.pytest_plugin import (
    ALICE,
    OPS_CHANNEL,
)
from tests.hostile.conftest import VISIBLE, Hostile, bot_under_attack
from tests.hostile.test_payloads import (
    COMMAND_FIELDS,
    DELETE,
    events,
    json_values,
    modal_payloads,
    not_a_user_id,
    put,
)

JSON = dict[str, Any]
small_garbage = st.one_of(json_values, st.integers(1_000, 50_000).map(lambda n: "x" * n))


@pytest.fixture(scope="module")
def socket_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    with bot_under_attack(tmp_path_factory.mktemp("hostile-socket"), socket_mode=True) as flow:
        yield Hostile(flow)


def click(hostile: Hostile, action: str, value: object) -> JSON:
    """A block_actions payload of the shape Slack sends, from a message in the ops channel."""
    builder = hostile.flow.bot.driver.builder
    return {
        "type": "block_actions",
        "user": {"id": ALICE, "username": "alice", "name": "alice", "team_id": builder.ident.team_id},
        "api_app_id": builder.ident.app_id,
        "token": builder.ident.verification_token,
        "container": {"type": "message", "message_ts": "1.2", "channel_id": OPS_CHANNEL, "is_ephemeral": False},
        "trigger_id": "1.2.3",
        "team": {"id": builder.ident.team_id, "domain": builder.ident.team_domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": OPS_CHANNEL, "name": "nsstuck-ops"},
        "state": {"values": {}},
        "response_url": builder.state.issue_response_url("actions", OPS_CHANNEL, ALICE),
        "actions": [{"type": "button", "action_id": action, "block_id": "b", "value": value, "action_ts": "1.3"}],
    }


@st.composite
def envelopes(draw: st.DrawFn, hostile: Hostile) -> tuple[str, JSON]:
    builder = hostile.flow.bot.driver.builder
    kind = draw(st.sampled_from(["slash_commands", "click", "events_api", "modal"]))
    if kind == "slash_commands":
        payload: JSON = dict(builder.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL))
        for key in draw(st.lists(st.sampled_from(COMMAND_FIELDS), unique=True, min_size=1, max_size=3)):
            value = draw(st.one_of(st.just(DELETE), small_garbage, not_a_user_id))
            put(payload, (key,), value)
        if payload.get("command") == "/nsstuck" and isinstance(payload.get("text"), str):
            # a command that parses is not garbage: who sends it is
            put(payload, ("user_id",), draw(not_a_user_id))
        return "slash_commands", payload
    if kind == "click":
        payload = click(hostile, draw(st.sampled_from([ids.APPROVE, ids.REJECT, "nsstuck_request_remedy:1"])), "1")
        where = draw(
            st.sampled_from(
                [("user",), ("user", "id"), ("actions",), ("actions", 0), ("actions", 0, "action_id"), ("type",)]
            )
        )
        put(payload, where, draw(st.one_of(st.just(DELETE), small_garbage)))
        put(payload, ("actions", 0, "value"), draw(small_garbage))  # and never a value of a real button
        return "interactive", payload
    if kind == "events_api":
        return "events_api", draw(events(builder))
    return "interactive", draw(modal_payloads(builder))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_hostile_envelopes(socket_bot: Hostile, data: st.DataObject) -> None:
    socket = socket_bot.slack.socket
    kind, payload = data.draw(envelopes(socket_bot), label="envelope")
    before = socket_bot.baseline()
    refused = problem(payload, api_url=socket_bot.slack.api_url)
    event("refused" if refused else "let through")
    envelope = socket.send_envelope(kind, payload)
    if refused:
        ack = socket.wait_ack(envelope, timeout=3)  # acknowledged, so that Slack does not send it again
        assert ack.payload is None
    assert socket_bot.rows() == before.rows
    assert {m: len(socket_bot.slack.calls(m)) for m in VISIBLE} == before.calls
    socket_bot.assert_log_clean(before.log_size)


def test_a_large_envelope_is_read_whole_on_the_same_connection(socket_bot: Hostile) -> None:
    """slack_sdk's builtin client recursed once per KiB read: a 2 MB envelope cost it the connection."""
    socket = socket_bot.slack.socket
    [connection] = socket.wait_for_connections(1, timeout=5)
    before = socket_bot.baseline()
    payload = dict(
        socket_bot.flow.bot.driver.builder.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
    )
    payload["padding"] = "\u00e9" * 350_000  # sent as JSON escapes: about 2 MB
    ack = socket.request("slash_commands", payload, timeout=10)
    assert "/nsstuck <cluster> <namespace>" in str(ack.payload)
    assert [c.id for c in socket.connections()] == [connection.id]
    socket_bot.assert_log_clean(before.log_size)


# -- frames that are not envelopes at all -----------------------------------------------------------

FRAME_TYPES = ["hello", "disconnect", "slash_commands", "interactive", "events_api", "", "x" * 300]


@st.composite
def frames(draw: st.DrawFn) -> str | bytes:
    """A WebSocket message from a broken or hostile peer: not JSON, JSON that is not an object, binary,
    an object of a known or unknown type whose fields have any type (a missing or non-string
    envelope_id, a payload that is not an object, a disconnect with any reason)."""
    kind = draw(st.sampled_from(["text", "binary", "json", "object"]))
    if kind == "text":
        return draw(st.one_of(st.text(max_size=200), st.sampled_from(["{", "}", "null", "[]", "42", '{"type":'])))
    if kind == "binary":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(json_values.filter(lambda v: not isinstance(v, dict))))
    frame: JSON = {"type": draw(st.one_of(st.sampled_from(FRAME_TYPES), small_garbage))}
    for key in draw(st.lists(st.sampled_from(["envelope_id", "payload", "reason", "accepts_response_payload"]))):
        frame[key] = draw(st.one_of(small_garbage, st.just({"type": "block_actions"})))
    if frame["type"] in ("slash_commands", "interactive", "events_api") and isinstance(frame.get("envelope_id"), str):
        frame["payload"] = draw(json_values.filter(lambda v: not isinstance(v, dict)))  # never a well-formed one
    return json.dumps(frame)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frame=frames())
@example(frame='{"type": [{"token": true}], "envelope_id": "e-list-type"}')  # found by CI: must still be acked
@example(frame='{"type": "hello", "envelope_id": "e-hello", "payload": null}')
def test_frames_that_are_not_envelopes(socket_bot: Hostile, frame: str | bytes) -> None:
    """Whatever arrives on the connection, the bot stays connected (a disconnect frame of any reason
    is taken as one: it reconnects), records nothing, shows nothing and logs no failure."""
    socket = socket_bot.slack.socket
    current = socket.wait_for_connections(1, timeout=10)[-1]
    before = socket_bot.baseline()
    try:
        parsed = json.loads(frame)
    except ValueError:
        parsed = None
    fields = parsed if isinstance(parsed, dict) else {}
    envelope_id = fields.get("envelope_id")
    disconnect = fields.get("type") == "disconnect" and not {"envelope_id", "payload"} & fields.keys()
    socket.send_frame(frame, connection=current)
    if isinstance(envelope_id, str) and 0 < len(envelope_id) <= 200 and fields.get("type") != "disconnect":
        socket.wait_ack(envelope_id, timeout=3)  # a broken envelope is still acknowledged: not sent again
    if disconnect:  # taken as Slack's: a new connection, and the old one closed (before the next frame)
        socket.wait_for_new_connection(current.id, timeout=10)
        socket.wait_for_close(current, timeout=10)
    time.sleep(0.05)
    socket.wait_for_connections(1, timeout=10)
    assert socket_bot.rows() == before.rows
    assert {m: len(socket_bot.slack.calls(m)) for m in VISIBLE} == before.calls
    socket_bot.assert_log_clean(before.log_size)


def test_after_all_of_it_the_bot_is_connected_and_nothing_happened(socket_bot: Hostile) -> None:
    time.sleep(1.5)
    socket_bot.slack.socket.wait_for_connections(1, timeout=5)
    with urllib.request.urlopen(socket_bot.flow.bot.url + "/readyz", timeout=5) as response:
        assert response.status == 200
    assert socket_bot.rows() == socket_bot.initial.rows
    assert {m: len(socket_bot.slack.calls(m)) for m in VISIBLE} == socket_bot.initial.calls
    socket_bot.assert_log_clean()
    # and it still answers
    ack = socket_bot.slack.socket_mode.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=5)
    assert "/nsstuck <cluster> <namespace>" in str(ack.payload)
