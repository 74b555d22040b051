"""Every view scoped (issue 19, item 1): a cluster restricted to some channels is not seen from others.

- `/nsstuck history` without a cluster lists only the clusters the channel it is typed in may use (it
  used to list every incident, with links to their threads, from anywhere);
- the App Home shows a person the clusters with no channel list and those whose channels they are a
  member of, private channels included (it used to show every open incident and pending request to
  anyone, in no channel at all); membership is read once a minute per channel, for display only.

Through the running bot, over HTTP and Socket Mode, on three clusters (one emulated cluster behind all
three): prod-eu for #nsstuck-ops, staging for any channel, vault for a private channel.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests._migrated import migrated
from tests.approvals._flow import Flow
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import (
    ALICE,
    APP_TOKEN,
    APPROVERS,
    BOB,
    BOT_TOKEN,
    ENV_TO_CLEAR,
    OPS_CHANNEL,
    SECOND_CHANNEL,
    SIGNING_SECRET,
    populate_workspace,
)
from tests.slack._bot import serve_process

PRIVATE_CHANNEL = "G0PRIVATE1"
DAVE = "U0DDDDDDD"  # in no channel at all
ERIN = "U0EEEEEEE"  # in the private channel only
# namespace -> (cluster, the channel it is diagnosed from)
STUCK = {"ddd": ("prod-eu", OPS_CHANNEL), "eee": ("staging", SECOND_CHANNEL), "fff": ("vault", PRIVATE_CHANNEL)}


@dataclass
class Scoped:
    flow: Flow
    socket: bool
    request_id: int
    threads: dict[str, str]  # namespace -> its thread's ts

    @property
    def slack(self) -> SlackEmulator:
        return self.flow.slack

    def command(self, text: str, *, user: str, channel: str) -> str:
        """What the person who typed it sees (the acknowledgement: text and blocks)."""
        if self.socket:
            ack = self.slack.socket_mode.slash_command("/nsstuck", text, user=user, channel=channel)
            return str(ack.payload)
        delivery = self.flow.bot.driver.slash_command("/nsstuck", text, user=user, channel=channel)
        assert delivery.status == 200
        return delivery.body

    def home(self, user: str) -> tuple[str, str]:
        """Opens the user's Home tab; (what it shows, the view as sent)."""
        before = (self.slack.home_view(user) or {}).get("hash")
        event = self.flow.bot.driver.builder.event_callback(
            {"type": "app_home_opened", "user": user, "channel": "D0" + user[2:], "tab": "home"}
        )
        if self.socket:
            self.slack.socket_mode.event(event)
        else:
            assert self.flow.bot.driver.event(event).status == 200
        view = self.slack.wait_for(
            lambda: ((v := self.slack.home_view(user)) and v.get("hash") != before and v) or None, timeout=10
        )
        return self.slack.render_view(view), str(view)


def _config(tmp_path: Path, kube: Emulator) -> Path:
    kube.write_kubeconfig(tmp_path / "kube.kubeconfig", context="prod")
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n"
        f"  - {{name: prod-eu, kubeconfig: kube.kubeconfig, channels: [{OPS_CHANNEL}], approvers: [{APPROVERS}]}}\n"
        f"  - {{name: staging, kubeconfig: kube.kubeconfig, approvers: [{APPROVERS}]}}\n"
        f"  - {{name: vault, kubeconfig: kube.kubeconfig, channels: [{PRIVATE_CHANNEL}], approvers: [{APPROVERS}]}}\n"
    )
    return config


@contextmanager
def _three_clusters(workdir: Path, *, socket: bool) -> Iterator[Scoped]:
    with pytest.MonkeyPatch.context() as env:
        for name in ENV_TO_CLEAR:
            env.delenv(name, raising=False)
        slack = SlackEmulator(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        populate_workspace(slack)
        slack.add_user(DAVE, "dave")
        slack.add_user(ERIN, "erin")
        slack.add_channel(PRIVATE_CHANNEL, "vault-ops", members=[ERIN, slack.identity.bot_user_id], is_private=True)
        # a big channel: its members come in three pages of 200, bob's on the last
        slack.channel(OPS_CHANNEL).members[:0] = [f"U0FILL{n:04d}" for n in range(450)]
        slack.start()
        kube = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=True)
        kube.start()
        try:
            for namespace in STUCK:
                _namespace(kube, namespace, delete=True)
            database = f"sqlite:///{workdir / 'bot.db'}"
            migrated(database)
            with serve_process(slack, _config(workdir, kube), database, workdir, socket_mode=socket) as running:
                if socket:
                    slack.socket.wait_for_connections(1, timeout=15)
                try:
                    flow = Flow(running, slack, kube, database, namespace="ddd")
                    yield _prepared(flow, socket)
                finally:
                    if socket:
                        slack.socket.drop_all()
        finally:
            kube.stop()
            slack.stop()


def _prepared(flow: Flow, socket: bool) -> Scoped:
    """Each namespace diagnosed from its channel (ALICE, ERIN), and a request filed on prod-eu."""
    scoped = Scoped(flow, socket, 0, {})
    for namespace, (cluster, channel) in STUCK.items():
        user = ERIN if channel == PRIVATE_CHANNEL else ALICE
        assert "On it" in scoped.command(f"{cluster} {namespace}", user=user, channel=channel)
        verdict = flow.slack.wait_for_message(channel, namespace, timeout=30)
        ts = str(verdict["ts"])
        flow.slack.wait_for(lambda c=channel, t=ts: flow.slack.thread(c, t) or None, timeout=20)  # type: ignore[misc]
        scoped.threads[namespace] = ts
    flow.slack.wait_for(
        lambda: len(flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL")) == 3 or None, timeout=20
    )
    flow.slack.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=20, message="no request buttons")
    remedy = flow.remedy_id("remove_finalizer")
    [(ts, button)] = [(ts, b) for ts, b in flow.buttons(flow.thread_ts()) if str(b["value"]).endswith(f":{remedy}")]
    if socket:
        flow.slack.socket_mode.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"])
    else:
        assert flow.bot.driver.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"]).status
    flow.slack.wait_for(lambda: flow.requests() or None, timeout=10, message="no request filed")
    scoped.request_id = int(flow.requests()[0]["id"])
    return scoped


@pytest.fixture(scope="module", params=["http", "socket"])
def scoped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scoped]:
    with _three_clusters(tmp_path_factory.mktemp(f"scoped-{request.param}"), socket=request.param == "socket") as s:
        yield s


def _shows(text: str, *wanted: str) -> None:
    for item in wanted:
        assert item in text, item


def _hides(text: str, *unwanted: str) -> None:
    for item in unwanted:
        assert item not in text, item


def _link(namespace: str, scoped: Scoped) -> str:
    channel = STUCK[namespace][1]
    return f"{channel}/p{scoped.threads[namespace].replace('.', '')}"


def test_history_without_a_cluster_shows_only_the_clusters_of_the_channel(scoped: Scoped) -> None:
    # typed in #platform: only staging (no channel list) may be used there
    seen = scoped.command("history", user=ALICE, channel=SECOND_CHANNEL)
    assert "eee" in seen
    assert _link("eee", scoped) in seen
    _hides(seen, "ddd", "fff", "prod-eu", "vault", _link("ddd", scoped), _link("fff", scoped))
    assert "1 open" in seen  # the summary counts the channel's clusters only
    assert "the clusters of this channel" in seen
    # typed in #nsstuck-ops: prod-eu and staging, not vault
    seen = scoped.command("history", user=ALICE, channel=OPS_CHANNEL)
    _shows(seen, "ddd", "eee", _link("ddd", scoped), "2 open")
    _hides(seen, "fff", "vault")
    # in the private channel: vault and staging
    seen = scoped.command("history", user=ERIN, channel=PRIVATE_CHANNEL)
    _shows(seen, "fff", "eee")
    _hides(seen, "ddd")
    # a named cluster of another channel is refused as a name nobody registered (issue 36)
    assert "Unknown cluster `prod-eu`" in scoped.command("history prod-eu", user=ALICE, channel=SECOND_CHANNEL)


def test_the_home_tab_shows_a_person_only_the_clusters_of_their_channels(scoped: Scoped) -> None:
    members_calls = len(scoped.slack.calls("conversations.members"))
    # in no channel: staging only, and no request (the request is prod-eu's)
    text, view = scoped.home(DAVE)
    assert "eee" in text
    _hides(text, "ddd", "fff", "prod-eu", "vault", f"#{scoped.request_id}", "Changes waiting for approval")
    _hides(view, _link("ddd", scoped), _link("fff", scoped))
    # in the private channel only: vault and staging
    text, view = scoped.home(ERIN)
    _shows(text, "fff", "eee")
    _shows(view, _link("fff", scoped))
    _hides(text, "ddd", "Changes waiting for approval")
    # in #nsstuck-ops (not in the private channel): prod-eu with its pending request, and staging
    text, view = scoped.home(BOB)
    _shows(text, "ddd", "eee", "Changes waiting for approval", f"#{scoped.request_id}")
    _shows(view, _link("ddd", scoped))
    _hides(text, "fff", "vault")
    # bounded: each scoped channel's members read once for the three (kept a minute), page by page
    # (454 members in #nsstuck-ops: 3 pages of 200), the unscoped cluster's none
    calls = scoped.slack.calls("conversations.members")[members_calls:]
    channels = [str(c.params.get("channel")) for c in calls]
    assert channels.count(OPS_CHANNEL) == 3
    assert channels.count(PRIVATE_CHANNEL) == 1
    assert len(channels) == 4
    assert all(str(c.params.get("limit")) == "200" for c in calls)


def test_the_home_tab_shows_nothing_scoped_when_membership_cannot_be_read(
    tmp_path: Path,
) -> None:
    """conversations.members failing (Slack down for that method): the scoped clusters are hidden, the
    unscoped one is shown; the tab is drawn all the same."""
    with _three_clusters(tmp_path, socket=False) as scoped:
        scoped.slack.inject("conversations.members", "internal_error", http_status=500, times=None)
        text, _ = scoped.home(BOB)
        assert "eee" in text
        _hides(text, "ddd", "fff")
        time.sleep(0.2)
        assert "Traceback" not in scoped.flow.bot.log.read_text()
