"""Incidents followed to the end through the real bot: resolution in the thread, and nothing lost
when Slack is down."""

from __future__ import annotations

import time
from pathlib import Path

from tests._rows import rows
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import running_bot

FAST = {"NSSTUCK_FOLLOW_UP_SECONDS": "1", "NSSTUCK_REPOST_SECONDS": "1"}


def _incidents(tmp_path: Path) -> list[tuple[str, str | None]]:
    found = rows(f"sqlite:///{tmp_path / 'bot.db'}", "SELECT status, resolved_at FROM incidents")
    return [(r["status"], r["resolved_at"]) for r in found]


def test_a_resolved_namespace_is_announced_once_in_its_thread(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FAST) as bot:
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        verdict = slack_emulator.wait_for_message(OPS_CHANNEL, "stuck", timeout=20)
        slack_emulator.wait_for(lambda: slack_emulator.thread(OPS_CHANNEL, verdict["ts"]) or None, timeout=10)

        # someone fixes it: the finalizer goes, the namespace controller finishes
        KubeHTTP(kube_emulator.url, kube_emulator.admin_token).patch(
            "/api/v1/namespaces/ddd/configmaps/mymap", {"metadata": {"finalizers": None}}
        )
        for _ in range(5):
            kube_emulator.clock.advance(30)  # type: ignore[attr-defined]
            kube_emulator.settle()

        def resolution() -> list[str] | None:
            notes = [slack_emulator.render(m) for m in slack_emulator.thread(OPS_CHANNEL, verdict["ts"])]
            found = [n for n in notes if "is gone: resolved after" in n]
            return found or None

        notes = slack_emulator.wait_for(resolution, timeout=20)
        time.sleep(3)  # a few more follow-ups run: the resolution is not announced again
        assert len(resolution() or []) == 1, notes
        assert "`ddd` is gone: resolved after" in notes[0]
    [(status, resolved_at)] = _incidents(tmp_path)
    assert status == "resolved"
    assert resolved_at is not None


def test_a_report_that_could_not_be_posted_arrives_later_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    slack_emulator.inject("chat.postMessage", "fatal_error", times=3)  # Slack is failing for a while
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FAST) as bot:
        delivery = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        assert delivery.status == 200
        verdict = slack_emulator.wait_for_message(OPS_CHANNEL, "stuck", timeout=30)
        thread = slack_emulator.wait_for(lambda: slack_emulator.thread(OPS_CHANNEL, verdict["ts"]) or None, timeout=20)
        assert "configmaps/mymap" in "\n".join(slack_emulator.render(m) for m in thread)
        time.sleep(2.5)  # more outbox passes: nothing is posted again
        top = [m for m in slack_emulator.channel_messages(OPS_CHANNEL) if "stuck" in slack_emulator.render(m)]
        assert len(top) == 1
        failed = [c for c in slack_emulator.calls("chat.postMessage") if not c.ok]
        assert len(failed) == 3


def test_the_home_tab_lists_open_incidents_with_links_to_their_threads(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as bot:
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        verdict = slack_emulator.wait_for_message(OPS_CHANNEL, "stuck", timeout=20)
        # the thread is attached to the incident right after the verdict is posted; its replies follow
        slack_emulator.wait_for(lambda: slack_emulator.thread(OPS_CHANNEL, verdict["ts"]) or None, timeout=10)
        opened = {"type": "app_home_opened", "user": ALICE, "channel": "D0ALICE01", "tab": "home"}
        delivery = bot.driver.event(bot.driver.builder.event_callback(opened))
        assert delivery.status == 200
        home = slack_emulator.wait_for(lambda: slack_emulator.home_view(ALICE), timeout=10)
        text = slack_emulator.render_view(home)
        assert "prod-eu" in text
        assert "ddd" in text
        assert "`orphaned_finalizer`" in text
        assert f"/archives/{OPS_CHANNEL}/p{verdict['ts'].replace('.', '')}" in str(home)
