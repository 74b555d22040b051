"""Payload builders, signing and the plain-text rendering."""

from __future__ import annotations

import time

import pytest
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from tests.fakes.slackapi import SlackEmulator, render_message, slack_signature
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, CAROL, OPS_CHANNEL


def test_signature_matches_the_documented_test_vector() -> None:
    body = (
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
        "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
        "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
        "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    signature = slack_signature("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body)
    assert signature == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_driver_requests_verify_with_slack_sdk(slack_emulator: SlackEmulator) -> None:
    driver = slack_emulator.http_driver("http://127.0.0.1:9/unused")
    verifier = SignatureVerifier(slack_emulator.signing_secret)
    for signing, valid in [
        ("valid", True),
        ("forged", False),
        ("stale", False),
        ("future", False),
        ("tampered", False),
    ]:
        req = driver.sign("a=1&b=2", "application/x-www-form-urlencoded", signing=signing)  # type: ignore[arg-type]
        assert verifier.is_valid_request(req.body, req.headers) is valid, signing
    unsigned = driver.sign("a=1", "application/x-www-form-urlencoded", signing="unsigned")
    assert "X-Slack-Signature" not in unsigned.headers
    assert abs(int(driver.sign("", "application/json").headers["X-Slack-Request-Timestamp"]) - time.time()) < 2


def test_slash_command_fields(slack_emulator: SlackEmulator) -> None:
    fields = slack_emulator.payloads.slash_command("/nsstuck", "diagnose shop", user=ALICE, channel=OPS_CHANNEL)
    assert set(fields) == {
        "token", "team_id", "team_domain", "channel_id", "channel_name", "user_id", "user_name", "command",
        "text", "api_app_id", "is_enterprise_install", "response_url", "trigger_id",
    }  # fmt: skip
    assert (fields["channel_name"], fields["user_name"], fields["is_enterprise_install"]) == (
        "nsstuck-ops",
        "alice",
        "false",
    )
    assert fields["trigger_id"] in slack_emulator.state.triggers


def test_clicks_on_ephemeral_messages_and_selects(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    select = {
        "type": "static_select",
        "action_id": "pick",
        "placeholder": {"type": "plain_text", "text": "Pick a finalizer"},
        "options": [
            {"text": {"type": "plain_text", "text": "kubernetes"}, "value": "kubernetes"},
            {"text": {"type": "plain_text", "text": "example.com/x"}, "value": "example.com/x"},
        ],
    }
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "Which one?"}, "accessory": select}]
    eph = slack_web_client.chat_postEphemeral(channel=OPS_CHANNEL, user=CAROL, text="which?", blocks=blocks)
    assert render_message(slack_emulator.ephemerals(OPS_CHANNEL, CAROL)[0]) == "Which one? [Pick a finalizer]"
    payload = slack_emulator.payloads.block_actions(
        OPS_CHANNEL, eph["message_ts"], "pick", user=CAROL, value="example.com/x"
    )
    assert payload["container"]["is_ephemeral"] is True
    assert "message" not in payload
    assert payload["actions"][0]["selected_option"]["value"] == "example.com/x"
    with pytest.raises(LookupError):
        slack_emulator.payloads.block_actions(OPS_CHANNEL, eph["message_ts"], "pick", user=CAROL, value="nope")
    with pytest.raises(LookupError):
        slack_emulator.payloads.block_actions(OPS_CHANNEL, eph["message_ts"], "missing", user=CAROL)


def test_view_submission_state_values(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    view = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Approve"},
        "blocks": [
            {
                "type": "input",
                "block_id": "who",
                "label": {"type": "plain_text", "text": "Approver"},
                "element": {"type": "users_select", "action_id": "user"},
            },
            {
                "type": "input",
                "block_id": "mode",
                "label": {"type": "plain_text", "text": "Mode"},
                "element": {
                    "type": "static_select",
                    "action_id": "choice",
                    "options": [{"text": {"type": "plain_text", "text": "Dry run"}, "value": "dry"}],
                },
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": "note"}},
        ],
    }
    opened = slack_web_client.views_open(trigger_id=slack_emulator.issue_trigger(BOB), view=view)["view"]
    payload = slack_emulator.payloads.view_submission(opened["id"], {"who": {"user": CAROL}}, user=BOB)
    assert payload["view"]["state"]["values"] == {
        "who": {"user": {"type": "users_select", "selected_user": CAROL}},
        "mode": {"choice": {"type": "static_select", "selected_option": None}},
    }
    assert payload["view"]["type"] == "modal"
    with pytest.raises(LookupError):
        slack_emulator.payloads.view_submission(opened["id"], {"nope": {"x": "y"}}, user=BOB)
    # An empty ack closes the modal.
    slack_emulator.payloads.apply_ack(payload, None)
    assert slack_emulator.modal_stack(BOB) == []


def test_render_message() -> None:
    message = {
        "text": "fallback",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "shop is stuck"}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "*Phase*\nTerminating"}]},
            {"type": "divider"},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": "since 3h"}, {"type": "image", "alt_text": "k8s"}],
            },
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": "Approve"}, "action_id": "a"},
                    {"type": "button", "text": {"type": "plain_text", "text": "Reject"}, "action_id": "r"},
                ],
            },
            {
                "type": "rich_text",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [{"type": "text", "text": "done "}, {"type": "user", "user_id": "U1"}],
                    }
                ],
            },
        ],
    }
    assert render_message(message) == (
        "shop is stuck\n*Phase*\nTerminating\n---\nsince 3h [image: k8s]\n[Approve] [Reject]\ndone <@U1>"
    )
    assert render_message({"text": "plain"}) == "plain"


@pytest.mark.timing
def test_wait_for_times_out_with_a_message(slack_emulator: SlackEmulator) -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match="never"):
        slack_emulator.wait_for(lambda: False, 0.2, message="never")
    assert time.monotonic() - started < 1
    with pytest.raises(AssertionError, match="no message containing 'x'"):
        slack_emulator.wait_for_message(OPS_CHANNEL, "x", timeout=0.1)
