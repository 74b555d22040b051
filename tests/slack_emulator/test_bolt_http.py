"""A minimal real Bolt App, served over WSGI by Bolt's own adapter, driven by the emulator's HTTP driver."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from slack_bolt import App, BoltRequest
from slack_bolt.adapter.wsgi import SlackRequestHandler

from tests.fakes.slackapi import HttpDriver, SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL, make_web_client


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class BoltUnderTest:
    app: App
    url: str
    driver: HttpDriver
    commands: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    event_headers: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def bolt(slack_emulator: SlackEmulator) -> Iterator[BoltUnderTest]:
    executor = ThreadPoolExecutor(max_workers=8)
    app = App(
        client=make_web_client(slack_emulator), signing_secret=slack_emulator.signing_secret, listener_executor=executor
    )
    httpd = make_server(
        "127.0.0.1", 0, SlackRequestHandler(app), server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
    )
    url = f"http://127.0.0.1:{httpd.server_address[1]}/slack/events"
    under_test = BoltUnderTest(app, url, slack_emulator.http_driver(url))

    @app.command("/nsstuck")
    def command(ack: Any, command: dict[str, Any], respond: Any) -> None:
        under_test.commands.append(command)
        ack(f"Looking into `{command['text']}`")
        respond(text=f"diagnosis of {command['text']}: 1 finalizer left", response_type="in_channel")

    @app.action("approve")
    def approve(ack: Any, body: dict[str, Any], respond: Any) -> None:
        ack()
        under_test.actions.append(body)
        respond(text=f"Approved by <@{body['user']['id']}>", replace_original=True)

    @app.event("app_mention")
    def mention(event: dict[str, Any], request: BoltRequest) -> None:
        under_test.event_headers.append(dict(request.headers))

    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield under_test
    finally:
        httpd.shutdown()
        httpd.server_close()
        executor.shutdown(wait=False)


def test_app_construction_calls_auth_test_once(slack_emulator: SlackEmulator, bolt: BoltUnderTest) -> None:
    (call,) = slack_emulator.calls("auth.test")
    assert call.raw_body == ""
    assert call.headers["Content-Type"] == "application/json;charset=utf-8"
    assert call.token_kind == "bot"


def test_signed_slash_command_round_trip(slack_emulator: SlackEmulator, bolt: BoltUnderTest) -> None:
    delivery = bolt.driver.slash_command("/nsstuck", "diagnose shop", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    assert delivery.body == "Looking into `diagnose shop`"
    assert delivery.content_type.startswith("text/plain")
    assert delivery.elapsed < 3
    # The plain-text ack is what Alice sees, ephemerally; respond() then posts in the channel.
    assert [m["text"] for m in slack_emulator.ephemerals(OPS_CHANNEL, ALICE)] == ["Looking into `diagnose shop`"]
    msg = slack_emulator.wait_for_message(OPS_CHANNEL, "diagnosis of diagnose shop")
    assert msg["text"] == "diagnosis of diagnose shop: 1 finalizer left"
    (post,) = slack_emulator.webhook_posts()
    assert post.json == {"text": "diagnosis of diagnose shop: 1 finalizer left", "response_type": "in_channel"}
    (command,) = bolt.commands
    assert command["user_id"] == ALICE
    assert command["channel_id"] == OPS_CHANNEL


@pytest.mark.parametrize("signing", ["forged", "stale", "future", "unsigned", "tampered"])
def test_bad_signatures_get_401(bolt: BoltUnderTest, signing: Any) -> None:
    delivery = bolt.driver.slash_command("/nsstuck", "x", user=ALICE, channel=OPS_CHANNEL, signing=signing)
    assert delivery.status == 401
    assert delivery.json() == {"error": "invalid request"}
    assert bolt.commands == []


def test_stale_request_is_400_seconds_old(bolt: BoltUnderTest) -> None:
    stale = bolt.driver.sign("a=b", "application/x-www-form-urlencoded", signing="stale")
    fresh = bolt.driver.sign("a=b", "application/x-www-form-urlencoded")
    age = int(fresh.headers["X-Slack-Request-Timestamp"]) - int(stale.headers["X-Slack-Request-Timestamp"])
    assert age == 400


def test_bolt_accepts_a_replayed_request(bolt: BoltUnderTest) -> None:
    """Bolt only checks the signature and the 5-minute window: a replay inside it runs the command again.
    A bot that must not act twice has to deduplicate on its own."""
    first = bolt.driver.slash_command("/nsstuck", "once", user=ALICE, channel=OPS_CHANNEL)
    again = bolt.driver.replay(first)
    assert (first.status, again.status) == (200, 200)
    assert again.request.body == first.request.body
    assert [c["text"] for c in bolt.commands] == ["once", "once"]
    assert bolt.commands[0]["trigger_id"] == bolt.commands[1]["trigger_id"]


def test_text_containing_payload_hits_bolts_parsing_trap(bolt: BoltUnderTest) -> None:
    """Brief §4: a form body containing the substring "payload" is parsed as interactivity and yields {}."""
    delivery = bolt.driver.slash_command("/nsstuck", "payload-svc", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 404
    assert delivery.json() == {"error": "unhandled request"}
    assert bolt.commands == []
    assert bolt.driver.slash_command("/nsstuck", "pay-load-svc", user=ALICE, channel=OPS_CHANNEL).status == 200


def test_button_click_on_a_posted_message(slack_emulator: SlackEmulator, bolt: BoltUnderTest) -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Force-finalize *shop*?"}},
        {
            "type": "actions",
            "block_id": "approval:req-42",
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve",
                    "value": "req-42",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve", "emoji": True},
                }
            ],
        },
    ]
    parent = bolt.app.client.chat_postMessage(channel=OPS_CHANNEL, text="request")
    posted = bolt.app.client.chat_postMessage(
        channel=OPS_CHANNEL, text="approve?", blocks=blocks, thread_ts=parent["ts"]
    )
    assert slack_emulator.thread_text(OPS_CHANNEL, parent["ts"]) == ["Force-finalize *shop*?\n[Approve]"]
    delivery = bolt.driver.click(OPS_CHANNEL, posted["ts"], "approve", user=BOB)
    assert (delivery.status, delivery.body) == (200, "")
    slack_emulator.wait_for(lambda: bolt.actions, 3)
    (body,) = bolt.actions
    assert body["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": OPS_CHANNEL,
        "is_ephemeral": False,
        "thread_ts": parent["ts"],
    }
    assert body["channel"] == {"id": OPS_CHANNEL, "name": "nsstuck-ops"}
    assert body["message"]["thread_ts"] == parent["ts"]
    assert body["message"]["blocks"][1]["block_id"] == "approval:req-42"
    assert body["actions"][0]["value"] == "req-42"
    assert body["actions"][0]["block_id"] == "approval:req-42"
    assert body["trigger_id"] in slack_emulator.state.triggers
    assert body["response_url"].startswith(slack_emulator.url + "/webhook/actions/")
    slack_emulator.wait_for(lambda: "Approved by" in slack_emulator.thread_text(OPS_CHANNEL, parent["ts"])[0], 3)
    assert slack_emulator.thread_text(OPS_CHANNEL, parent["ts"]) == ["Approved by <@U0BBBBBBB>"]


def test_events_url_verification_and_ssl_check(slack_emulator: SlackEmulator, bolt: BoltUnderTest) -> None:
    assert bolt.driver.url_verification("abc").json() == {"challenge": "abc"}
    assert bolt.driver.url_verification("abc", signing="forged").status == 401
    assert (bolt.driver.ssl_check().status, bolt.driver.ssl_check().body) == (200, "")
    payload = slack_emulator.payloads.app_mention(OPS_CHANNEL, "<@U0BOT> status", user=ALICE)
    delivery = bolt.driver.event(payload, retry_num=1, retry_reason="http_timeout")
    assert delivery.status == 200
    slack_emulator.wait_for(lambda: bolt.event_headers, 3)
    assert bolt.event_headers[0]["x-slack-retry-num"] == ["1"]
    assert bolt.event_headers[0]["x-slack-retry-reason"] == ["http_timeout"]
