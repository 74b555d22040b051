"""One real bot (`nsstuck serve`, HTTP mode) for the whole package, with a diagnosis on record whose
report carries remediation buttons, and one request filed and waiting for approval: garbage sent at
it has something to break. `Hostile` says what changed since a baseline: database rows, messages in
channels, Web API calls, and the bot's log."""

from __future__ import annotations

import sqlite3
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.slack.ids import APPROVE, REJECT
from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery, SignedRequest
from tests.fakes.slackapi.pytest_plugin import (
    ALICE,
    APP_TOKEN,
    BOT_TOKEN,
    ENV_TO_CLEAR,
    OPS_CHANNEL,
    SECOND_CHANNEL,
    SIGNING_SECRET,
    populate_workspace,
)

JSON = dict[str, Any]
TABLES = ("incidents", "diagnoses", "remediation_requests", "remediation_votes", "audit_entries", "backups")
# what the bot does in Slack that others see (an ephemeral answer to the sender is allowed)
VISIBLE = ("chat.postMessage", "chat.update", "chat.delete", "files.completeUploadExternal", "views.publish")
MAX_REPLY = 4000  # the longest legitimate reply: the history of a command, as JSON with blocks
MAX_MESSAGE = 400  # an answer to bad input


@dataclass
class Baseline:
    rows: dict[str, int]
    calls: dict[str, int]
    messages: int
    log_size: int
    told: int


@dataclass
class Hostile:
    """A running bot and what it has done. The diagnosis and the request are there for the HTTP bot."""

    flow: Flow
    report_ts: str = ""  # the report message with the remedies' buttons
    request_button: JSON = field(default_factory=dict)  # a remedy's button without a request yet
    request_id: int = 0  # the request waiting for approval, filed by alice
    request_ts: str = ""  # its message, with the Approve and Reject buttons
    # a real click's payload on each button: the remedy's, approve and reject
    clicks: dict[str, JSON] = field(default_factory=dict, repr=False)
    signs_of_failure: tuple[str, ...] = (
        "Traceback",
        "unhandled error",
        "Failed to run",
        "status: 500",
        "RecursionError",
        "on_error invoked",
    )
    initial: Baseline = field(init=False, repr=False)
    sent: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.initial = self.baseline()

    @property
    def slack(self) -> SlackEmulator:
        return self.flow.slack

    @property
    def log(self) -> Path:
        return self.flow.bot.log

    def rows(self) -> dict[str, int]:
        path = self.flow.database.removeprefix("sqlite:///")
        with sqlite3.connect(path, timeout=30) as connection:
            return {t: int(connection.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}

    def told(self) -> list[str]:
        """Every text the bot sent to one person (ephemerals, response_url answers), in order."""
        texts = [str(c.params.get("text") or "") for c in self.slack.calls("chat.postEphemeral")]
        texts += [p.raw for p in self.slack.webhook_posts()]
        return texts

    def baseline(self) -> Baseline:
        return Baseline(
            rows=self.rows(),
            calls={m: len(self.slack.calls(m)) for m in VISIBLE},
            messages=self.messages(),
            log_size=self.log.stat().st_size,
            told=len(self.told()),
        )

    def messages(self) -> int:
        return sum(len(self.slack.channel_messages(c)) for c in (OPS_CHANNEL, SECOND_CHANNEL))

    def send(self, request: SignedRequest) -> Delivery:
        self.sent.append(request.body[:300])
        return self.flow.bot.driver.send(request)

    def assert_harmless(self, delivery: Delivery, before: Baseline) -> None:
        """No server error, a short answer if any, nothing recorded, nothing shown, nothing in the log
        that says something broke."""
        assert delivery.error is None, delivery.error
        assert delivery.status < 500, (delivery.status, delivery.body[:300])
        assert len(delivery.body) <= MAX_REPLY, delivery.body[:300]
        assert self.rows() == before.rows, (self.rows(), before.rows, self.sent[-3:])
        assert {m: len(self.slack.calls(m)) for m in VISIBLE} == before.calls
        assert self.messages() == before.messages
        for text in self.told()[before.told :]:
            assert len(text) <= MAX_MESSAGE + 100, text[:300]  # the JSON around the message
        self.assert_log_clean(before.log_size)

    def assert_log_clean(self, since: int = 0) -> None:
        with self.log.open("rb") as log:
            log.seek(since)
            text = log.read().decode("utf-8", "replace")
        for sign in self.signs_of_failure:
            assert sign not in text, text[-3000:]

    def assert_up(self) -> None:
        with urllib.request.urlopen(self.flow.bot.url + "/healthz", timeout=5) as response:
            assert response.status == 200


@contextmanager
def emulators() -> Iterator[tuple[SlackEmulator, Emulator]]:
    """The Slack and Kubernetes emulators, started for a module or the package (with the environment of
    the tests' own fixtures cleared), and stopped at the end."""
    with pytest.MonkeyPatch.context() as env:
        for name in ENV_TO_CLEAR:
            env.delenv(name, raising=False)
        slack = SlackEmulator(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        populate_workspace(slack)
        slack.start()
        kube = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0, controllers=True)
        kube.start()
        try:
            yield slack, kube
        finally:
            kube.stop()
            slack.stop()


@contextmanager
def bot_under_attack(workdir: Path, *, socket_mode: bool = False) -> Iterator[Flow]:
    """The Slack and Kubernetes emulators and a remediation bot on them (HTTP or Socket Mode)."""
    with emulators() as (slack, kube), remediation_bot(slack, kube, workdir, socket_mode=socket_mode) as flow:
        yield flow


@pytest.fixture(scope="package")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    with bot_under_attack(tmp_path_factory.mktemp("hostile")) as flow:
        yield _prepared(flow)


def _prepared(flow: Flow) -> Hostile:
    """A diagnosis with its buttons in the thread, and a request filed for its first remedy (by alice)."""
    flow.scenario("seed002-configmap-finalizer")
    flow.diagnose()
    buttons = flow.buttons(flow.thread_ts())
    flow.request("remove_finalizer")
    [request] = flow.requests()
    message = flow.request_message(int(request["id"]))
    remedy = flow.remedy_id("remove_finalizer")
    # the garbage aimed at a remedy's button takes another remedy's, one without a request yet, so
    # that a click let through by mistake would show as a new request
    others = [(ts, b) for ts, b in buttons if not str(b["value"]).endswith(f":{remedy}")]
    report_ts, button = (others or buttons)[0]
    builder = flow.bot.driver.builder
    clicks = {
        "remedy": builder.block_actions(OPS_CHANNEL, report_ts, button["action_id"], user=ALICE),
        **{a: builder.block_actions(OPS_CHANNEL, str(message["ts"]), a, user=ALICE) for a in (APPROVE, REJECT)},
    }
    time.sleep(0.5)  # the request's message, its audit entry and the thread settle
    return Hostile(flow, report_ts, button, int(request["id"]), str(message["ts"]), clicks)
