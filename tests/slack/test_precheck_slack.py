"""Issue 27 in Slack: `/nsstuck <cluster> <namespace>` on an Active namespace, through the running bot
(HTTP mode) against the Slack emulator and the Kubernetes emulator. One line in the channel says what
deleting it now would meet; the predicted reasons go in its thread, without a Request button although
the cluster takes remediation requests; no incident is opened."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL


@pytest.fixture
def flow(slack_emulator: SlackEmulator, tmp_path: Path) -> Iterator[Flow]:
    # the bot reads the real clock: the emulator's stands at the present (kube-controller-manager's Lease fresh)
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as kube:
        apply_scenario(kube, "healthy-active")  # metrics-server up; namespace shop with an ordinary app
        http = KubeHTTP(kube.url, kube.admin_token)
        http.post("/api/v1/namespaces", {"metadata": {"name": "preview-123"}})
        http.post(
            "/api/v1/namespaces/preview-123/configmaps",
            {"metadata": {"name": "leftover", "finalizers": ["kubernetes"]}},
        )
        kube.settle()
        with remediation_bot(slack_emulator, kube, tmp_path) as running:
            yield running


def _ask(flow: Flow, namespace: str) -> dict[str, object]:
    """/nsstuck prod-eu <namespace>; the new message it gets in the channel."""
    slack = flow.slack
    before = {m["ts"] for m in slack.channel_messages(OPS_CHANNEL)}
    delivery = flow.bot.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200

    def answered() -> dict[str, object] | None:
        new = [m for m in slack.channel_messages(OPS_CHANNEL) if m["ts"] not in before]
        return next((m for m in new if f"*{namespace}*" in slack.render(m)), None)

    return slack.wait_for(answered, timeout=30)


def test_an_active_namespace_gets_one_line_and_the_reasons_in_its_thread(flow: Flow, tmp_path: Path) -> None:
    slack = flow.slack
    verdict = _ask(flow, "preview-123")
    line = slack.render(verdict)
    assert "is Active; *deleting it now would get stuck*: `orphaned_finalizer`" in line
    assert "details in the thread" in line
    assert [b["type"] for b in verdict["blocks"]] == ["section", "context"]  # type: ignore[index]
    replies = slack.wait_for(lambda: slack.thread(OPS_CHANNEL, str(verdict["ts"])) or None, timeout=20)
    thread = "\n".join(slack.render(m) for m in replies)
    assert "If it were deleted now" in thread
    assert "orphaned_finalizer" in thread
    assert "would block" in thread
    assert "configmaps/leftover" in thread
    assert "Before the delete: Remove kubernetes from configmaps/leftover" in thread
    # nothing is deleted yet: no Request button, although prod-eu takes remediation requests
    assert not [b for m in replies for b in m.get("blocks") or () if b.get("type") == "actions"]

    clear = _ask(flow, "shop")
    assert "is Active; deleting it now: nothing would hold it" in slack.render(clear)
    # the answers of one channel are posted in order: once a later one is in, shop's thread would be too
    _ask(flow, "preview-123")
    assert slack.thread(OPS_CHANNEL, str(clear["ts"])) == []
    top = [m for m in slack.channel_messages(OPS_CHANNEL) if "preview-123" in slack.render(m)]
    assert len(top) == 2  # asked twice, answered twice in the channel: a prediction has no incident thread

    with sqlite3.connect(tmp_path / "bot.db") as db:
        incidents = db.execute("SELECT count(*) FROM incidents").fetchone()[0]
        runs = db.execute("SELECT namespace, state FROM diagnoses ORDER BY id").fetchall()
    assert incidents == 0
    assert runs == [("preview-123", "active"), ("shop", "active"), ("preview-123", "active")]
