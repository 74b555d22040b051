"""Modals and the App Home: trigger_id lifetime, view limits, hashes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.fakes.slackapi import FakeClock, SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, make_web_client, populate_workspace

MODAL: dict[str, Any] = {
    "type": "modal",
    "callback_id": "force-finalize",
    "title": {"type": "plain_text", "text": "Force finalize"},
    "submit": {"type": "plain_text", "text": "Do it"},
    "close": {"type": "plain_text", "text": "Cancel"},
    "private_metadata": '{"ns":"shop"}',
    "blocks": [
        {
            "type": "input",
            "block_id": "reason",
            "label": {"type": "plain_text", "text": "Why?"},
            "element": {"type": "plain_text_input", "action_id": "text"},
        }
    ],
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def emu(slack_env: None, clock: FakeClock) -> Iterator[SlackEmulator]:
    with populate_workspace(SlackEmulator(clock=clock)) as emulator:
        yield emulator


@pytest.fixture
def client(emu: SlackEmulator) -> WebClient:
    return make_web_client(emu)  # type: ignore[no-any-return]


def _error(call: Any) -> str:
    with pytest.raises(SlackApiError) as info:
        call()
    return str(info.value.response["error"])


def test_trigger_ids_live_three_seconds_and_work_once(emu: SlackEmulator, client: WebClient, clock: FakeClock) -> None:
    trigger = emu.issue_trigger(ALICE)
    clock.advance(2.9)
    view = client.views_open(trigger_id=trigger, view=MODAL)["view"]
    assert view["id"].startswith("V")
    assert view["callback_id"] == "force-finalize"
    assert view["root_view_id"] == view["id"]
    assert view["state"] == {"values": {}}
    assert [v["id"] for v in emu.modal_stack(ALICE)] == [view["id"]]
    assert emu.render_view(emu.modal_stack(ALICE)[0]) == "Force finalize\nWhy?: [plain_text_input]\n[Cancel] [Do it]"
    assert _error(lambda: client.views_open(trigger_id=trigger, view=MODAL)) == "exchanged_trigger_id"
    late = emu.issue_trigger(ALICE)
    clock.advance(3.01)
    assert _error(lambda: client.views_open(trigger_id=late, view=MODAL)) == "expired_trigger_id"
    assert _error(lambda: client.views_open(trigger_id="1.2.3", view=MODAL)) == "invalid_trigger_id"


def test_view_limits_answer_invalid_arguments(emu: SlackEmulator, client: WebClient) -> None:
    bad = {**MODAL, "title": {"type": "plain_text", "text": "t" * 25}}
    with pytest.raises(SlackApiError) as info:
        client.views_open(trigger_id=emu.issue_trigger(ALICE), view=bad)
    assert info.value.response["error"] == "invalid_arguments"
    assert info.value.response["response_metadata"]["messages"] == [
        "[ERROR] must be less than 25 characters [json-pointer:/view/title/text]"
    ]
    too_many = {**MODAL, "blocks": [{"type": "divider"}] * 101}
    with pytest.raises(SlackApiError) as info:
        client.views_open(trigger_id=emu.issue_trigger(ALICE), view=too_many)
    assert (
        "no more than 100 items allowed [json-pointer:/view/blocks]"
        in info.value.response["response_metadata"]["messages"][0]
    )
    assert emu.modal_stack(ALICE) == []
    ok = {**MODAL, "blocks": [{"type": "divider"}] * 100}
    assert client.views_open(trigger_id=emu.issue_trigger(ALICE), view=ok)["ok"]


def test_push_update_and_hash_conflict(emu: SlackEmulator, client: WebClient) -> None:
    root = client.views_open(trigger_id=emu.issue_trigger(BOB), view=MODAL)["view"]
    pushed = client.views_push(trigger_id=emu.issue_trigger(BOB), view={**MODAL, "callback_id": "second"})["view"]
    assert pushed["previous_view_id"] == root["id"]
    assert pushed["root_view_id"] == root["id"]
    client.views_push(trigger_id=emu.issue_trigger(BOB), view=MODAL)
    assert _error(lambda: client.views_push(trigger_id=emu.issue_trigger(BOB), view=MODAL)) == "push_limit_reached"
    new_title = {**MODAL, "title": {"type": "plain_text", "text": "Updated"}}
    updated = client.views_update(view_id=root["id"], hash=root["hash"], view=new_title)["view"]
    assert updated["id"] == root["id"]
    assert updated["hash"] != root["hash"]
    assert updated["title"]["text"] == "Updated"
    assert emu.modal_stack(BOB)[0]["title"]["text"] == "Updated"
    assert _error(lambda: client.views_update(view_id=root["id"], hash="stale.hash", view=MODAL)) == "hash_conflict"
    assert _error(lambda: client.views_update(view_id="V0NOPE", view=MODAL)) == "not_found"


def test_app_home_is_published_per_user(emu: SlackEmulator, client: WebClient) -> None:
    home = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*3* stuck namespaces"}}]}
    client.views_publish(user_id=ALICE, view=home)
    view = emu.home_view(ALICE)
    assert view is not None
    assert emu.render_view(view) == "*3* stuck namespaces"
    assert emu.home_view(BOB) is None
    assert _error(lambda: client.views_publish(user_id=ALICE, view=MODAL)) == "invalid_arguments"
    assert _error(lambda: client.views_publish(user_id="U0NOPE", view=home)) == "user_not_found"
    again = client.views_publish(user_id=ALICE, view={**home, "blocks": [{"type": "divider"}]})["view"]
    assert again["id"] == view["id"]
    assert emu.render_view(emu.home_view(ALICE) or {}) == "---"
