"""Two `nsstuck serve` processes on one PostgreSQL database, a moved clock (NSSTUCK_CLOCK_FILE), and
the Slack emulator: each scheduled digest is posted once, by whichever replica claims it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests._migrated import migrated
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL
from tests.slack._bot import serve_process


def _digests(slack: SlackEmulator) -> list[str]:
    return [slack.render(m) for m in slack.channel_messages(OPS_CHANNEL) if "Stuck namespaces" in slack.render(m)]


@pytest.mark.postgres
def test_two_replicas_post_each_digest_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, postgres_url: str
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n"
        "digests:\n"
        f"  - channel: {OPS_CHANNEL}\n    schedule: '0 9 * * 1-5'\n    timezone: Europe/Berlin\n    stuck_after: 30m\n"
    )
    clock = tmp_path / "now"
    clock.write_text("2026-11-23T07:59:50Z\n")  # a Monday, ten seconds before 09:00 in Berlin
    migrated(postgres_url)
    env = {"NSSTUCK_CLOCK_FILE": str(clock), "NSSTUCK_DIGEST_TICK_SECONDS": "0.3", "NSSTUCK_REPOST_SECONDS": "60"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        serve_process(slack_emulator, config, postgres_url, tmp_path / "a", extra_env=env),
        serve_process(slack_emulator, config, postgres_url, tmp_path / "b", extra_env=env),
    ):
        time.sleep(1.5)
        assert _digests(slack_emulator) == []  # not yet 09:00
        clock.write_text("2026-11-23T08:00:01Z\n")
        slack_emulator.wait_for(lambda: _digests(slack_emulator) or None, timeout=20)
        time.sleep(2)  # both replicas tick several more times
        [first] = _digests(slack_emulator)
        assert "Newly stuck since the last digest" in first
        assert "ddd" in first

        clock.write_text("2026-11-24T08:00:02Z\n")  # the next morning
        slack_emulator.wait_for(lambda: len(_digests(slack_emulator)) == 2 or None, timeout=20)
        time.sleep(2)
        digests = _digests(slack_emulator)
        assert len(digests) == 2
        assert "Still stuck" in digests[1]
