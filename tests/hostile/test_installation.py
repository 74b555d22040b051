"""This workspace, this app (issue 19, item 2): a request signed with our secret but for another app,
or from another workspace or organisation, is refused and runs nothing; for an organisation-wide
install any workspace of our organisation is served. Through the running bot, HTTP and Socket Mode.

A signed request from elsewhere is not far-fetched: an app installed in several workspaces has one
signing secret for all of them.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import Running, running_bot


def _command(bot: Running, **changed: str) -> tuple[int, str]:
    fields = dict(bot.driver.builder.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL))
    fields.update(changed)
    delivery = bot.driver.post_form(fields, kind="command")
    return delivery.status, delivery.body


def _nothing_ran(bot: Running) -> None:
    time.sleep(1.5)
    assert bot.slack.calls("chat.postMessage") == []
    assert "refused a request for" in bot.log.read_text()


def test_a_command_for_another_app_or_workspace_is_refused(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as bot:
        assert _command(bot, api_app_id="A0OTHERAPP") == (403, "")
        assert _command(bot, api_app_id="") == (403, "")
        assert _command(bot, team_id="T0OTHER") == (403, "")
        # an event for another app: no App Home is drawn
        event = bot.driver.builder.event_callback({"type": "app_home_opened", "user": ALICE, "tab": "home"})
        event["api_app_id"] = "A0OTHERAPP"
        assert bot.driver.post_json(event).status == 403
        _nothing_ran(bot)
        assert bot.slack.calls("views.publish") == []
        # ours is served
        status, body = _command(bot)
        assert status == 200
        assert "On it" in body


def test_socket_mode_refuses_them_too(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True) as bot:
        slack_emulator.socket.wait_for_connections(1, timeout=15)
        try:
            builder = bot.driver.builder
            foreign = dict(builder.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL))
            foreign["api_app_id"] = "A0OTHERAPP"
            refused = bot.slack.socket_mode._send("slash_commands", foreign, 5)
            ours = bot.slack.socket_mode.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        finally:
            slack_emulator.socket.drop_all()
        assert "On it" not in str(refused.payload or "")
        assert "On it" in str((ours.payload or {}).get("text"))


def test_an_organisation_wide_install_serves_any_workspace_of_the_organisation(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    slack_emulator.identity.enterprise_id = "E0ORG"
    slack_emulator.identity.is_enterprise_install = True
    with running_bot(slack_emulator, kube_emulator, tmp_path) as bot:
        # another workspace of our organisation: served
        status, body = _command(bot, team_id="T0SISTER", enterprise_id="E0ORG", is_enterprise_install="true")
        assert status == 200
        assert "On it" in body
        # the same workspace id under another organisation: refused
        assert _command(bot, team_id="T0SISTER", enterprise_id="E0OTHER", is_enterprise_install="true") == (403, "")
        assert _command(bot, team_id="T0SISTER") == (403, "")
