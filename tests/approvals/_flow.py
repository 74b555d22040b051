"""Driving remediation through the real bot: a diagnosis in Slack, a remedy's button, approvals,
and what the cluster, the thread and the audit trail show afterwards."""

from __future__ import annotations

import errno
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bot.store import migrating
from tests._migrated import migrated
from tests._rows import rows
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery
from tests.fakes.slackapi.pytest_plugin import (
    ALICE,
    APP_TOKEN,
    APPROVERS,
    BOT_TOKEN,
    OPS_CHANNEL,
    SIGNING_SECRET,
    populate_workspace,
)
from tests.pgdatabase import Roles
from tests.slack._bot import Running, serve_process

T = TypeVar("T")

JSON = dict[str, Any]
# how a thread message quotes the audit entry that recorded what it says
AUDIT_MARK = re.compile(r"audit #(\d+) · `([0-9a-f]{12})`")
KUBE_EPOCH = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)  # the `kube_emulator` fixture's clock
FAST = {"NSSTUCK_REPOST_SECONDS": "1", "NSSTUCK_FOLLOW_UP_SECONDS": "3600"}


def write_config(
    tmp_path: Path,
    kube: Emulator,
    *,
    approvers: tuple[str, ...] = (APPROVERS,),
    required: int = 1,
    remediation: bool = True,
    cluster_extra: str = "",
    allow_external_users: bool = False,
) -> Path:
    kube.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    listed = ", ".join(approvers)
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n"
        "  - name: prod-eu\n"
        "    kubeconfig: prod.kubeconfig\n"
        f"    channels: [{OPS_CHANNEL}]\n"
        f"    approvers: [{listed}]\n"
        f"    required_approvals: {required}\n"
        f"    remediation: {'true' if remediation else 'false'}\n"
        + ("    allow_external_users: true\n" if allow_external_users else "")
        + cluster_extra
    )
    return config


@dataclass
class Flow:
    """One test's view of the bot. On a bot shared by a module's tests (`SharedBot`), the rows the tests
    before it left are not its own: it sees the incidents, diagnoses, requests and audit entries made
    after it began (the `since_*` marks: the highest id there was)."""

    bot: Running
    slack: SlackEmulator
    kube: Emulator
    database: str
    namespace: str = ""
    since_incident: int = 0
    since_diagnosis: int = 0
    since_request: int = 0
    since_audit: int = 0

    # -- the cluster ---------------------------------------------------------------------------
    def scenario(self, name: str) -> str:
        scenario = apply_scenario(self.kube, name)
        self.namespace = scenario.expected.namespace
        return self.namespace

    # -- Slack ---------------------------------------------------------------------------------
    def diagnose(self, user: str = ALICE) -> str:
        """/nsstuck prod-eu <namespace>; returns the verdict's ts once the report with its buttons is in."""
        delivery = self.bot.driver.slash_command(
            "/nsstuck", f"prod-eu {self.namespace}", user=user, channel=OPS_CHANNEL
        )
        assert delivery.status == 200
        before = {m["ts"] for m in self.slack.channel_messages(OPS_CHANNEL)}

        def verdict() -> JSON | None:
            for message in self.slack.channel_messages(OPS_CHANNEL):
                if message["ts"] not in before and self.namespace in self.slack.render(message):
                    return message
            return None

        found = self.slack.wait_for(verdict, timeout=30, message="no verdict")
        self.slack.wait_for(lambda: self.buttons(found["ts"]) or None, timeout=20, message="no request buttons")
        return str(found["ts"])

    def thread_ts(self) -> str:
        return str(self.incident()["slack_thread_ts"])

    def buttons(self, thread_ts: str) -> list[tuple[str, JSON]]:
        """(message ts, button) for every request button in the thread."""
        out = []
        for message in self.slack.thread(OPS_CHANNEL, thread_ts):
            for block in message.get("blocks") or ():
                for element in block.get("elements") or ():
                    if isinstance(element, dict) and str(element.get("action_id")).startswith("nsstuck_request_remedy"):
                        out.append((str(message["ts"]), element))
        return out

    def remedy_id(self, action: str) -> str:
        report = self.latest_report()
        for finding in report["findings"]:
            for remedy in finding["remedies"]:
                if remedy["action"] == action:
                    return str(remedy["id"])
        raise AssertionError(
            f"no {action} remedy in {[r['action'] for f in report['findings'] for r in f['remedies']]}"
        )

    def click_request(self, action: str, *, user: str = ALICE) -> Delivery:
        remedy = self.remedy_id(action)
        thread = self.thread_ts()
        for ts, button in self.buttons(thread):
            if str(button["value"]).endswith(f":{remedy}"):
                return self.bot.driver.click(OPS_CHANNEL, ts, button["action_id"], user=user, value=button["value"])
        raise AssertionError(f"no button for {action} in the thread")

    def request(self, action: str, *, user: str = ALICE) -> JSON:
        """Click the remedy's button and wait for the request message; returns it."""
        count = len(self.requests())
        assert self.click_request(action, user=user).status == 200
        self.slack.wait_for(lambda: len(self.requests()) > count or None, timeout=10, message="no request filed")
        request = self.requests()[-1]
        return self.request_message(int(request["id"]))

    def requested(self, scenario: str, action: str) -> int:
        """The scenario applied and diagnosed, and a request filed for its `action` remedy: its id."""
        self.scenario(scenario)
        self.diagnose()
        self.request(action)
        return int(self.requests()[-1]["id"])

    def request_message(self, request_id: int, timeout: float = 10) -> JSON:
        def find() -> JSON | None:
            for message in self.slack.thread(OPS_CHANNEL, self.thread_ts()):
                if f"Remediation request #{request_id}*" in self.slack.render(message) or (
                    f"Remediation request #{request_id} " in str(message.get("text"))
                ):
                    return message
            return None

        return self.slack.wait_for(find, timeout=timeout, message=f"no message for request #{request_id}")

    def vote(self, request_id: int, user: str, *, approve: bool = True) -> Delivery:
        message = self.request_message(request_id)
        action = "nsstuck_approve" if approve else "nsstuck_reject"
        return self.bot.driver.click(OPS_CHANNEL, str(message["ts"]), action, user=user)

    def ephemeral(self, user: str, contains: str, timeout: float = 10) -> str:
        message = self.slack.wait_for_ephemeral(OPS_CHANNEL, user, contains, timeout=timeout)
        return self.slack.render(message)

    def thread_text(self) -> str:
        return "\n".join(self.slack.render(m) for m in self.slack.thread(OPS_CHANNEL, self.thread_ts()))

    def wait_thread(self, contains: str, timeout: float = 20) -> str:
        self.slack.wait_for(lambda: contains in self.thread_text() or None, timeout=timeout, message=f"no {contains!r}")
        return self.thread_text()

    def audit_mark(self, said: str, timeout: float = 20) -> tuple[int, str]:
        """The audit entry (seq, the first 12 hex digits of its hash) that the thread message saying
        `said` quotes ("audit #123 · `3f2a9c1b0d4e`")."""

        def find() -> tuple[int, str] | None:
            for message in self.slack.thread(OPS_CHANNEL, self.thread_ts()):
                said_here = str(message.get("text"))
                found = AUDIT_MARK.search(said_here) if said in said_here else None
                if found:
                    return int(found.group(1)), found.group(2)
            return None

        return self.slack.wait_for(find, timeout=timeout, message=f"no message quoting an audit entry says {said!r}")

    def quoted_entry(self, said: str, request_id: int, event: str) -> tuple[int, str]:
        """`audit_mark`, checked against the database: the request's `event` entry, with that hash."""
        seq, short = self.audit_mark(said)
        [row] = self.query("SELECT event, request_id, hash FROM audit_entries WHERE seq = :seq", seq=seq)
        assert (row["event"], row["request_id"]) == (event, request_id), (said, row)
        assert str(row["hash"]).startswith(short), (said, row["hash"], short)
        return seq, short

    def wait_status(self, request_id: int, *statuses: str, timeout: float = 20) -> JSON:
        def settled() -> JSON | None:
            row = self.request_row(request_id)
            return row if row["status"] in statuses else None

        return self.slack.wait_for(settled, timeout=timeout, message=f"request {request_id} never {statuses}")

    # -- the database --------------------------------------------------------------------------
    def query(self, sql: str, **params: Any) -> list[JSON]:
        return rows(self.database, sql, **params)

    def latest_report(self) -> JSON:
        [row] = self.query(
            "SELECT report FROM diagnoses WHERE namespace = :ns AND id > :since ORDER BY id DESC LIMIT 1",
            ns=self.namespace,
            since=self.since_diagnosis,
        )
        report = row["report"]
        return json.loads(report) if isinstance(report, str) else dict(report)

    def incident(self) -> JSON:
        [row] = self.query(
            "SELECT * FROM incidents WHERE namespace = :ns AND id > :since",
            ns=self.namespace,
            since=self.since_incident,
        )
        return row

    def requests(self) -> list[JSON]:
        return self.query("SELECT * FROM remediation_requests WHERE id > :since ORDER BY id", since=self.since_request)

    def request_row(self, request_id: int) -> JSON:
        [row] = self.query("SELECT * FROM remediation_requests WHERE id = :id", id=request_id)
        return row

    def audit(self, request_id: int | None = None) -> list[str]:
        if request_id is None:
            rows = self.query("SELECT event FROM audit_entries WHERE seq > :since ORDER BY seq", since=self.since_audit)
        else:
            rows = self.query("SELECT event FROM audit_entries WHERE request_id = :id ORDER BY seq", id=request_id)
        return [str(r["event"]) for r in rows]


@contextmanager
def remediation_bot(
    slack: SlackEmulator,
    kube: Emulator,
    tmp_path: Path,
    *,
    database: str | None = None,
    approvers: tuple[str, ...] = (APPROVERS,),
    required: int = 1,
    remediation: bool = True,
    extra_env: dict[str, str] | None = None,
    socket_mode: bool = False,
    cluster_extra: str = "",
    allow_external_users: bool = False,
    roles: Roles | None = None,
) -> Iterator[Flow]:
    """The bot on `database` (default: SQLite in tmp_path), migrated first; with `roles`, migrated by the
    migration role and run as the runtime role (`database` is then theirs)."""
    config = write_config(
        tmp_path,
        kube,
        approvers=approvers,
        required=required,
        remediation=remediation,
        cluster_extra=cluster_extra,
        allow_external_users=allow_external_users,
    )
    if roles is not None:
        database = roles.runtime
        migrating.upgrade(roles.migration, variable=migrating.MIGRATION_URL, runtime_role=roles.runtime_role)
    else:
        database = database or f"sqlite:///{tmp_path / 'bot.db'}"
        migrated(database)
    env = {**FAST, **(extra_env or {})}
    with serve_process(slack, config, database, tmp_path, extra_env=env, socket_mode=socket_mode) as running:
        if socket_mode:
            slack.socket.wait_for_connections(1, timeout=15)
        try:
            yield Flow(running, slack, kube, database)
        finally:
            if socket_mode:
                slack.socket.drop_all()  # the builtin client's close() waits otherwise


def _slack(port: int = 0) -> SlackEmulator:
    """A Slack workspace as the `slack_emulator` fixture makes it (on `port`, where one is given)."""
    slack = SlackEmulator(signing_secret=SIGNING_SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN, port=port)
    populate_workspace(slack)
    return slack.start()


def _cluster(seed: int = 0, port: int = 0, tls_port: int = 0) -> Emulator:
    """A cluster as the `kube_emulator` fixture makes it (on these ports, where they are given)."""
    kube = Emulator(clock=FakeClock(KUBE_EPOCH), seed=seed, controllers=True, port=port, tls_port=tls_port)
    try:
        return kube.start()
    except BaseException:  # one of its two listeners may have started: stopped, not left running
        kube.stop()
        raise


def _again(start: Callable[[], T]) -> T:
    """`start()`, tried again for a few seconds while its port is in use: another process that binds port 0
    may hold, for a moment, the port an emulator just let go of and must have again."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return start()
        except OSError as e:
            if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


@dataclass
class SharedBot:
    """One bot for the tests of a module that would each start it with the same configuration (a start
    costs about 1.2 CPU-seconds, 1.75 with coverage). Each test still has a Slack workspace and a cluster
    of its own: `lane` starts both afresh on the ports the bot was given (the cluster with its own seed,
    so its objects have UIDs of their own: a namespace of the same name is a new incident), and its
    `Flow` sees only the rows made after it began. The bot process and its database are what is shared."""

    running: Running
    database: str
    workdir: Path
    slack: SlackEmulator
    kube: Emulator
    tests: int = 0

    @contextmanager
    def lane(self) -> Iterator[Flow]:
        index, self.tests = self.tests, self.tests + 1
        if index:  # the first test has the emulators the bot started with
            slack_port, kube_ports = _port(self.slack.api_url), (_port(self.kube.url), _port(self.kube.https_url))
            self.slack.stop()
            self.kube.stop()
            self.slack = _again(lambda: _slack(slack_port))  # the bot was started with its URL
            try:
                self.kube = _cluster(index, *kube_ports)
            except OSError as e:  # another process took one of the ports meanwhile (it binds port 0)
                if e.errno != errno.EADDRINUSE:
                    raise
                self.kube = _cluster(index)  # the kubeconfig written below gives the bot the new ports
            # a new file: the bot's kept connection to the cluster is given up (bot/kube/connecting.py)
            self.kube.write_kubeconfig(self.workdir / "prod.kubeconfig", context="prod")
        marks = {
            table: int(rows(self.database, f"SELECT COALESCE(MAX({key}), 0) AS n FROM {table}")[0]["n"])
            for table, key in _MARKED.items()
        }
        running = replace(
            self.running, driver=self.slack.http_driver(f"{self.running.url}/slack/events"), slack=self.slack
        )
        yield Flow(
            running,
            self.slack,
            self.kube,
            self.database,
            since_incident=marks["incidents"],
            since_diagnosis=marks["diagnoses"],
            since_request=marks["remediation_requests"],
            since_audit=marks["audit_entries"],
        )
        assert self.running.process.poll() is None, f"the shared bot exited:\n{self.running.log.read_text()}"


_MARKED = {"incidents": "id", "diagnoses": "id", "remediation_requests": "id", "audit_entries": "seq"}


@contextmanager
def shared_remediation_bot(workdir: Path, *, required: int = 1, database: str | None = None) -> Iterator[SharedBot]:
    """`remediation_bot` in HTTP mode with its defaults but `required` and `database` (SQLite in `workdir`
    by default), for a module's tests to share through `SharedBot.lane`; the last emulators are stopped
    after the bot."""
    shared: SharedBot | None = None
    slack, kube = _slack(), _cluster()
    try:
        with remediation_bot(slack, kube, workdir, required=required, database=database) as flow:
            shared = SharedBot(flow.bot, flow.database, workdir, slack, kube)
            yield shared
    finally:
        if shared is not None:
            slack, kube = shared.slack, shared.kube
        slack.stop()
        kube.stop()


__all__ = ["SCENARIOS", "Flow", "SharedBot", "remediation_bot", "shared_remediation_bot"]
