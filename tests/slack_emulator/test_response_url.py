"""The response_url sink, driven with slack_sdk's WebhookClient (what Bolt's respond() uses)."""

from __future__ import annotations

from slack_sdk.webhook import WebhookClient

from tests.fakes.slackapi import FakeClock, SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL, populate_workspace


def test_command_response_url_posts_and_limits(slack_emulator: SlackEmulator) -> None:
    fields = slack_emulator.payloads.slash_command("/nsstuck", "diagnose shop", user=ALICE, channel=OPS_CHANNEL)
    url = fields["response_url"]
    assert url.startswith(slack_emulator.url + "/webhook/commands/T111/")
    hook = WebhookClient(url)
    resp = hook.send(text="working on it")  # ephemeral by default
    assert (resp.status_code, resp.body) == (200, "ok")
    assert [m["text"] for m in slack_emulator.ephemerals(OPS_CHANNEL, ALICE)] == ["working on it"]
    assert slack_emulator.channel_messages(OPS_CHANNEL) == []
    resp = hook.send(text="shop is stuck on 1 finalizer", response_type="in_channel")
    assert resp.status_code == 200
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["shop is stuck on 1 finalizer"]
    resp = hook.send(text="updated", response_type="in_channel", replace_original=True)
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["updated"]
    for _ in range(2):
        assert hook.send(text="more").status_code == 200
    sixth = hook.send(text="one too many")
    assert (sixth.status_code, sixth.body) == (404, "expired_url")
    assert hook.send(blocks=[]).status_code == 404
    posts = slack_emulator.webhook_posts()
    assert [p.status for p in posts] == [200, 200, 200, 200, 200, 404, 404]
    assert posts[0].json == {"text": "working on it"}
    assert posts[0].user == ALICE
    assert [e.method for e in slack_emulator.calls()].count("webhook") == 7


def test_response_url_rejects_bad_bodies(slack_emulator: SlackEmulator) -> None:
    url = slack_emulator.payloads.slash_command("/nsstuck", "", user=ALICE, channel=OPS_CHANNEL)["response_url"]
    hook = WebhookClient(url)
    assert (hook.send(text="").status_code, hook.send(text="").body) == (400, "no_text")
    bad = hook.send(text="x", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}])
    assert (bad.status_code, bad.body) == (400, "invalid_blocks")
    assert WebhookClient(slack_emulator.url + "/webhook/commands/T111/0/nope").send(text="x").status_code == 404
    assert hook.send(text="fine").status_code == 200  # failures did not use up the URL


def test_response_url_expires_after_30_minutes(slack_env: None) -> None:
    clock = FakeClock()
    with populate_workspace(SlackEmulator(clock=clock)) as emu:
        url = emu.payloads.slash_command("/nsstuck", "", user=BOB, channel=OPS_CHANNEL)["response_url"]
        clock.advance(29 * 60)
        assert WebhookClient(url).send(text="still fine").status_code == 200
        clock.advance(61)
        resp = WebhookClient(url).send(text="too late")
        assert (resp.status_code, resp.body) == (404, "expired_url")


def test_action_response_url_replaces_and_deletes_the_source(slack_emulator: SlackEmulator) -> None:
    from tests.fakes.slackapi.pytest_plugin import make_web_client

    client = make_web_client(slack_emulator)
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Force-finalize *shop*?"}},
        {
            "type": "actions",
            "block_id": "approval",
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve",
                    "value": "req-1",
                    "text": {"type": "plain_text", "text": "Approve"},
                },
                {
                    "type": "button",
                    "action_id": "reject",
                    "value": "req-1",
                    "text": {"type": "plain_text", "text": "Reject"},
                },
            ],
        },
    ]
    posted = client.chat_postMessage(channel=OPS_CHANNEL, text="approve?", blocks=blocks)
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["Force-finalize *shop*?\n[Approve] [Reject]"]
    payload = slack_emulator.payloads.block_actions(OPS_CHANNEL, posted["ts"], "approve", user=BOB)
    assert payload["actions"][0]["value"] == "req-1"
    undo = {
        "type": "actions",
        "elements": [{"type": "button", "action_id": "undo", "text": {"type": "plain_text", "text": "Undo"}}],
    }
    WebhookClient(payload["response_url"]).send(
        text="Approved",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "Approved by <@U0BBBBBBB>"}}, undo],
        replace_original=True,
    )
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["Approved by <@U0BBBBBBB>\n[Undo]"]
    payload = slack_emulator.payloads.block_actions(OPS_CHANNEL, posted["ts"], "undo", user=BOB)
    assert payload["message"]["text"] == "Approved"
    assert "value" not in payload["actions"][0]
    WebhookClient(payload["response_url"]).send(delete_original=True)
    assert slack_emulator.channel_messages(OPS_CHANNEL) == []
