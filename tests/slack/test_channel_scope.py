"""Issue 36, finding 6: what a channel is told about clusters stays within what it may use. A cluster
name `/nsstuck` does not know is answered with the clusters the asking channel may use, and the
closest of those only: a cluster kept to other channels (`channels:`) is neither listed nor suggested.
Through the real bot process, over HTTP and over Socket Mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._migrated import migrated
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, serve_process


def _ask(bot: Running, text: str, channel: str, *, socket: bool) -> str:
    """The bot's answer to `/nsstuck <text>` in `channel` (the acknowledgement, seen by the caller only)."""
    if socket:
        return str(bot.slack.socket_mode.slash_command("/nsstuck", text, user=ALICE, channel=channel).payload)
    delivery = bot.driver.slash_command("/nsstuck", text, user=ALICE, channel=channel)
    assert delivery.status == 200
    return str(delivery.body)


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_an_unknown_cluster_is_answered_with_the_clusters_this_channel_may_use_only(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, transport: str
) -> None:
    socket = transport == "socket"
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n"
        f"  - {{name: ops-eu, kubeconfig: prod.kubeconfig, channels: [{OPS_CHANNEL}]}}\n"
        f"  - {{name: payroll-eu, kubeconfig: prod.kubeconfig, channels: [{SECOND_CHANNEL}]}}\n"
        "  - {name: shared-eu, kubeconfig: prod.kubeconfig}\n"
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    migrated(database)
    with serve_process(slack_emulator, config, database, tmp_path, socket_mode=socket) as bot:
        if socket:
            slack_emulator.socket.wait_for_connections(1, timeout=15)
        try:
            # a typo of the cluster kept to the other channel, asked here: not named, not suggested
            here = _ask(bot, "payrol-eu kube-system", OPS_CHANNEL, socket=socket)
            assert "Unknown cluster `payrol-eu`." in here
            assert "Clusters you can name here: `ops-eu`, `shared-eu`." in here
            assert "payroll" not in here
            # for history too
            history = _ask(bot, "history payroll-e", OPS_CHANNEL, socket=socket)
            assert "Clusters you can name here: `ops-eu`, `shared-eu`." in history
            assert "payroll-eu" not in history
            # the other channel may use it: there it is listed and suggested, and ops-eu is not
            there = _ask(bot, "payrol-eu kube-system", SECOND_CHANNEL, socket=socket)
            assert "Did you mean `payroll-eu`?" in there
            assert "Clusters you can name here: `payroll-eu`, `shared-eu`." in there
            assert "ops-eu" not in there
        finally:
            if socket:
                slack_emulator.socket.drop_all()  # the builtin client's close() waits otherwise
