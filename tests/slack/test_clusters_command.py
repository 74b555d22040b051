"""`/nsstuck clusters` (issue 24 §1) through the real bot process (`nsstuck serve`, HTTP mode): the
clusters the channel may use, each checked as `nsstuck clusters check` checks it, the summary sent
to the caller only (through the command's response_url), never a credential of a kubeconfig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, running_bot


@pytest.fixture
def bot(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Running]:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as running:
        yield running


def test_clusters_checks_the_clusters_of_the_channel(bot: Running) -> None:
    # prod-eu may be used from the ops channel only; `unreachable` (no channel list) from any
    delivery = bot.driver.slash_command("/nsstuck", "clusters", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    assert delivery.elapsed < 3.0
    assert "`prod-eu`" in delivery.body
    assert "`unreachable`" in delivery.body
    post = bot.slack.wait_for(lambda: next(iter(bot.slack.webhook_posts()), None), timeout=30)
    assert "Clusters check: a cluster is unreachable" in post.raw
    assert "prod-eu: ok" in post.raw
    assert "aggregated discovery no" in post.raw
    assert "unreachable: unreachable: http://127.0.0.1:1: cannot connect" in post.raw
    assert "kube-secret-token-777" not in post.raw
    assert bot.slack.calls("chat.postMessage") == []  # only the caller sees it


def test_clusters_shows_only_what_the_channel_may_use(bot: Running) -> None:
    delivery = bot.driver.slash_command("/nsstuck", "clusters", user=ALICE, channel=SECOND_CHANNEL)
    assert delivery.status == 200
    assert "`unreachable`" in delivery.body
    assert "prod-eu" not in delivery.body
    post = bot.slack.wait_for(lambda: next(iter(bot.slack.webhook_posts()), None), timeout=30)
    assert "prod-eu" not in post.raw
    assert "unreachable: unreachable" in post.raw
