"""The Web API, exercised with the real slack_sdk WebClient."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import (
    ALICE,
    APPROVERS,
    BOB,
    CAROL,
    OPS_CHANNEL,
    SECOND_CHANNEL,
)


def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        call()
    return str(info.value.response["error"])


def _raw_post(emu: SlackEmulator, method: str, body: bytes, content_type: str, token: str | None) -> dict[str, Any]:
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(emu.api_url + method, data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=5) as resp:
            result: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # unknown_method comes with a 404
        result = json.loads(exc.read())
    return result


def test_auth_test_has_the_shape_bolt_reads(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    resp = slack_web_client.auth_test()
    assert resp.data == {
        "ok": True,
        "url": "https://emu.slack.com/",
        "team": "Emu",
        "user": "nsstuck",
        "team_id": "T111",
        "user_id": "U0BOT",
        "bot_id": "B111",
        "is_enterprise_install": False,
    }
    assert "chat:write" in resp.headers["x-oauth-scopes"].split(",")
    (entry,) = slack_emulator.calls("auth.test")
    assert entry.params == {}
    assert entry.headers["Authorization"] == "Bearer [redacted]"
    assert entry.token_kind == "bot"


def test_tokens_are_checked(slack_emulator: SlackEmulator) -> None:
    url = slack_emulator.api_url
    assert _error(lambda: WebClient(base_url=url).auth_test()) == "not_authed"
    assert _error(lambda: WebClient(token="xoxb-nope", base_url=url).auth_test()) == "invalid_auth"
    app = WebClient(token=slack_emulator.app_token, base_url=url)
    assert _error(lambda: app.chat_postMessage(channel=OPS_CHANNEL, text="x")) == "not_allowed_token_type"
    bot = WebClient(token=slack_emulator.bot_token, base_url=url)
    assert _error(lambda: bot.apps_connections_open(app_token=slack_emulator.bot_token)) == "not_allowed_token_type"
    url_resp = app.apps_connections_open(app_token=slack_emulator.app_token)
    assert url_resp["url"].startswith(slack_emulator.socket_url + "?ticket=")
    assert url_resp["url"].endswith("&app_id=A111")
    slack_emulator.revoke_token(slack_emulator.bot_token)
    assert _error(bot.auth_test) == "token_revoked"
    # The journal never holds a token value.
    dump = repr(slack_emulator.calls())
    assert slack_emulator.bot_token not in dump
    assert slack_emulator.app_token not in dump


def test_post_message_threads_and_reads_back(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    parent = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="namespace *shop* is stuck")
    assert parent["channel"] == OPS_CHANNEL
    assert parent["message"]["bot_id"] == "B111"
    assert parent["message"]["user"] == "U0BOT"
    reply = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="finding 1", thread_ts=parent["ts"])
    assert reply["message"]["thread_ts"] == parent["ts"]
    assert float(reply["ts"]) > float(parent["ts"])
    # A reply to a reply lands in the root's thread.
    nested = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="finding 2", thread_ts=reply["ts"])
    assert nested["message"]["thread_ts"] == parent["ts"]

    assert [m["text"] for m in slack_emulator.channel_messages(OPS_CHANNEL)] == ["namespace *shop* is stuck"]
    assert slack_emulator.thread_text(OPS_CHANNEL, parent["ts"]) == ["finding 1", "finding 2"]
    root = slack_emulator.message(OPS_CHANNEL, parent["ts"])
    assert root is not None
    assert root["reply_count"] == 2
    assert slack_emulator.channel_messages(SECOND_CHANNEL) == []

    broadcast = slack_web_client.chat_postMessage(
        channel=OPS_CHANNEL, text="summary", thread_ts=parent["ts"], reply_broadcast=True
    )
    assert slack_emulator.channel_text(OPS_CHANNEL)[-1] == "summary"
    assert slack_emulator.thread(OPS_CHANNEL, parent["ts"])[-1]["ts"] == broadcast["ts"]


def test_post_message_errors(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    c = slack_web_client
    assert _error(lambda: c.chat_postMessage(channel="CNOPE", text="x")) == "channel_not_found"
    with pytest.warns(UserWarning, match="`text` argument is missing"):
        assert _error(lambda: c.chat_postMessage(channel=OPS_CHANNEL, text="")) == "no_text"
    assert _error(lambda: c.chat_postMessage(channel=OPS_CHANNEL, text="x" * 40_001)) == "msg_too_long"
    assert c.chat_postMessage(channel=OPS_CHANNEL, text="x" * 40_000)["ok"]
    assert _error(lambda: c.chat_postMessage(channel=OPS_CHANNEL, text="x", thread_ts="1.000001")) == "thread_not_found"
    slack_emulator.channel(SECOND_CHANNEL).bot_is_member = False
    assert _error(lambda: c.chat_postMessage(channel=SECOND_CHANNEL, text="x")) == "not_in_channel"
    slack_emulator.channel(SECOND_CHANNEL).is_archived = True
    assert _error(lambda: c.chat_postMessage(channel=SECOND_CHANNEL, text="x")) == "is_archived"
    # By name works too, as in Slack.
    assert c.chat_postMessage(channel="#nsstuck-ops", text="by name")["channel"] == OPS_CHANNEL


def test_update_delete_and_ephemeral(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    c = slack_web_client
    posted = c.chat_postMessage(channel=OPS_CHANNEL, text="pending")
    updated = c.chat_update(
        channel=OPS_CHANNEL,
        ts=posted["ts"],
        text="approved",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "*approved* by <@U0BBBBBBB>"}}],
    )
    assert updated["ts"] == posted["ts"]
    assert updated["text"] == "approved"
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["*approved* by <@U0BBBBBBB>"]
    (change,) = slack_emulator.updates(OPS_CHANNEL)
    assert change.before["text"] == "pending"
    assert _error(lambda: c.chat_update(channel=OPS_CHANNEL, ts="1.2", text="x")) == "message_not_found"
    human = slack_emulator.post_user_message(OPS_CHANNEL, "hello bot", user=ALICE)
    assert _error(lambda: c.chat_update(channel=OPS_CHANNEL, ts=human["ts"], text="x")) == "cant_update_message"
    assert _error(lambda: c.chat_delete(channel=OPS_CHANNEL, ts=human["ts"])) == "cant_delete_message"
    c.chat_delete(channel=OPS_CHANNEL, ts=posted["ts"])
    assert slack_emulator.channel_text(OPS_CHANNEL) == ["hello bot"]

    eph = c.chat_postEphemeral(channel=OPS_CHANNEL, user=BOB, text="only for bob")
    assert eph["message_ts"]
    assert [m["text"] for m in slack_emulator.ephemerals(OPS_CHANNEL, BOB)] == ["only for bob"]
    assert slack_emulator.ephemerals(OPS_CHANNEL, ALICE) == []
    assert _error(lambda: c.chat_postEphemeral(channel=SECOND_CHANNEL, user=CAROL, text="x")) == "user_not_in_channel"
    assert _error(lambda: c.chat_postEphemeral(channel=OPS_CHANNEL, user="U0NOPE", text="x")) == "user_not_found"


def _section(n: int) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * n}}


def _button(text: str = "Approve", **extra: Any) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": text}, "action_id": "approve", **extra}


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ([_section(1)] * 51, "no more than 50 items allowed [json-pointer:/blocks]"),
        ([_section(3001)], "must be less than 3001 characters [json-pointer:/blocks/0/text/text]"),
        (
            [{"type": "actions", "elements": [_button("A" * 76)]}],
            "must be less than 76 characters [json-pointer:/blocks/0/elements/0/text/text]",
        ),
        (
            [{"type": "actions", "elements": [_button(value="v" * 2001)]}],
            "must be less than 2001 characters [json-pointer:/blocks/0/elements/0/value]",
        ),
        (
            [{"type": "actions", "elements": [{**_button(), "action_id": "a" * 256}]}],
            "must be less than 256 characters [json-pointer:/blocks/0/elements/0/action_id]",
        ),
        (
            [{**_section(1), "block_id": "b" * 256}],
            "must be less than 256 characters [json-pointer:/blocks/0/block_id]",
        ),
        (
            [{"type": "actions", "elements": [{**_button(), "action_id": f"a{i}"} for i in range(26)]}],
            "no more than 25 items allowed [json-pointer:/blocks/0/elements]",
        ),
        (
            [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
            "must be less than 151 characters [json-pointer:/blocks/0/text/text]",
        ),
        (
            [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
            "no more than 10 items allowed [json-pointer:/blocks/0/elements]",
        ),
        (
            [{**_section(1), "block_id": "same"}, {**_section(1), "block_id": "same"}],
            "duplicate block_id: same [json-pointer:/blocks/1/block_id]",
        ),
        ([{"type": "sektion"}], "unsupported block type: sektion [json-pointer:/blocks/0/type]"),
    ],
)
def test_block_kit_limits_answer_invalid_blocks(slack_web_client: WebClient, blocks: list[Any], expected: str) -> None:
    with pytest.raises(SlackApiError) as info:
        slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="fallback", blocks=blocks)
    assert info.value.response["error"] == "invalid_blocks"
    assert expected in info.value.response["errors"]
    assert f"[ERROR] {expected}" in info.value.response["response_metadata"]["messages"]


def test_block_kit_limits_accept_the_maximum(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    slack_emulator.limits.message_blocks_chars = 1_000_000
    blocks: list[Any] = (
        [_section(3000)] * 40
        + [
            {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10},
            {
                "type": "actions",
                "block_id": "b" * 255,
                "elements": [{**_button("A" * 75, value="v" * 2000), "action_id": f"{i:0>255}"} for i in range(25)],
            },
        ]
        + [{"type": "divider"}] * 7
    )
    assert len(blocks) == 50
    assert slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="max", blocks=blocks)["ok"]


def test_aggregate_block_text_limit_is_configurable(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    blocks = [_section(2500)] * 6  # 15,000 characters
    assert _error(lambda: slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="t", blocks=blocks)) == (
        "msg_blocks_too_long"
    )
    slack_emulator.limits.message_blocks_chars = 20_000
    assert slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="t", blocks=blocks)["ok"]


def test_bodies_json_form_with_json_strings_and_query(slack_emulator: SlackEmulator) -> None:
    token = slack_emulator.bot_token
    blocks = json.dumps([{"type": "section", "text": {"type": "mrkdwn", "text": "from a form"}}])
    form = f"channel={OPS_CHANNEL}&text=fallback&blocks={urllib.parse.quote(blocks)}".encode()
    resp = _raw_post(slack_emulator, "chat.postMessage", form, "application/x-www-form-urlencoded", token)
    assert resp["ok"], resp
    assert resp["message"]["blocks"][0]["text"]["text"] == "from a form"
    body = json.dumps({"channel": OPS_CHANNEL, "text": "from json"}).encode()
    assert _raw_post(slack_emulator, "chat.postMessage", body, "application/json; charset=utf-8", token)["ok"]
    assert _raw_post(slack_emulator, "auth.test", b"", "application/json;charset=utf-8", token)["ok"]
    # The token may also come in the form body (older clients); the journal does not keep it.
    resp = _raw_post(
        slack_emulator, "users.info", f"user={ALICE}&token={token}".encode(), "application/x-www-form-urlencoded", None
    )
    assert resp["user"]["name"] == "alice"
    assert token not in repr(slack_emulator.calls("users.info"))
    assert _raw_post(slack_emulator, "chat.postMessage", b"[1]", "application/json", token)["error"] == "invalid_json"
    assert _raw_post(slack_emulator, "no.such.method", b"", "application/json", token)["error"] == "unknown_method"
    entries = slack_emulator.calls("chat.postMessage")
    assert entries[0].params["blocks"][0]["text"]["text"] == "from a form"
    assert entries[1].params == {"channel": OPS_CHANNEL, "text": "from json"}


def test_directory_reads(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    c = slack_web_client
    user = c.users_info(user=BOB)["user"]
    assert (user["name"], user["real_name"], user["tz"], user["profile"]["email"]) == (
        "bob",
        "Bob Brown",
        "America/New_York",
        "bob@example.com",
    )
    assert _error(lambda: c.users_info(user="U0NOPE")) == "user_not_found"
    channel = c.conversations_info(channel=OPS_CHANNEL)["channel"]
    assert (channel["id"], channel["name"], channel["is_member"]) == (OPS_CHANNEL, "nsstuck-ops", True)
    assert _error(lambda: c.conversations_info(channel="CNOPE")) == "channel_not_found"
    assert c.usergroups_users_list(usergroup=APPROVERS)["users"] == [BOB, CAROL]
    assert _error(lambda: c.usergroups_users_list(usergroup="S0NOPE")) == "no_such_subteam"
    assert c.users_lookupByEmail(email="carol@example.com")["user"]["id"] == CAROL


def test_conversations_members_paginates(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    many = [f"U1{i:07d}" for i in range(7)]
    for uid in many:
        slack_emulator.add_user(uid, uid.lower())
    slack_emulator.channel(OPS_CHANNEL).members.extend(many)
    # The SDK's iterator reuses one response object: read each page while it is current.
    pages = [list(page["members"]) for page in slack_web_client.conversations_members(channel=OPS_CHANNEL, limit=3)]
    assert [len(p) for p in pages] == [3, 3, 3, 2]
    assert [m for p in pages for m in p] == slack_emulator.channel(OPS_CHANNEL).members
    cursors = [e.params.get("cursor") for e in slack_emulator.calls("conversations.members")]
    assert cursors[0] is None
    assert all(cursors[1:])
    assert _error(lambda: slack_web_client.conversations_members(channel=OPS_CHANNEL, cursor="bogus!")) == (
        "invalid_cursor"
    )


def test_files_upload_v2_into_a_thread(slack_emulator: SlackEmulator, slack_web_client: WebClient) -> None:
    parent = slack_web_client.chat_postMessage(channel=OPS_CHANNEL, text="diagnosis")
    report = "line\n" * 5000
    resp = slack_web_client.files_upload_v2(
        channel=OPS_CHANNEL,
        thread_ts=parent["ts"],
        content=report,
        filename="report.txt",
        title="Full report",
        initial_comment="the full report",
    )
    assert resp["file"]["title"] == "Full report"
    (stored,) = slack_emulator.files()
    assert stored.text == report
    assert stored.completed
    assert slack_emulator.thread_text(OPS_CHANNEL, parent["ts"]) == ["the full report\n[file: Full report]"]
    assert [e.method for e in slack_emulator.calls()][-3:] == [
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]
