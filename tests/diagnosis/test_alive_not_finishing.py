"""Issue 37 §1-2, "alive is not finishing": a live controller (the Kiali operator, Ready) whose objects stood
still past the bound, through the real CLI (in this process) and the real bot (HTTP mode, its own process),
against the Kubernetes emulator serving the operator's pod log.

One cluster holds four terminating namespaces, each with a Kiali CR that keeps kiali.io/finalizer:
- kiali-failing, deleted 3 h ago: the operator's log names the CR in repeated errors (a 401 from an API it
  calls, with a bearer token and a URL with user info in the line), and one line saying only that an Event
  was refused in the terminating namespace: `cleanup_failing`, the failure quoted, the credentials redacted
  in the report and absent from the bot's database;
- kiali-refused, deleted 3 h ago: the log quotes NamespaceLifecycle refusing the operator's own write:
  `finalizer_deadlock`;
- kiali-silent, deleted 3 h ago: the log names the CR nowhere: a blocking `unknown` that says so, with the
  command that reads the log;
- kiali-recent, deleted 10 minutes ago: within the bound, `content_deleting`, with the time it stood still.

Then the read role loses `get pods/log`: the report names the gap and does not guess.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis.context import Context
from bot.diagnosis.engine import diagnose
from bot.domain.refs import ClusterName
from bot.kube.collecting import CollectOptions, Collector
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import Transport
from bot.services.diagnosing import searching, with_controller_logs
from tests._cli import run_nsstuck
from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, _kiali_cr, _kiali_crd, _start, run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL

TOKEN = "eyJhbGciOiJSUzI1NiJ9.canaryPayloadLive37.canarySignature37"
PASSWORD = "hunter2-live37-canary"
STUCK_FOR = timedelta(hours=3)
RECENT = timedelta(minutes=10)


def _error(ns: str, at: int) -> str:
    return (
        f'{{"level":"error","ts":{at},"msg":"Reconciler error","Kiali":{{"name":"kiali","namespace":"{ns}"}},'
        f'"error":"failed to remove the Kiali resources of {ns}/kiali: Get \\"https://kiali:{PASSWORD}@auth.example.com'
        f'/api\\": 401 Unauthorized (Authorization: Bearer {TOKEN})"}}'
    )


def _refused(ns: str, at: int) -> str:
    return (
        f'{{"level":"error","ts":{at},"msg":"Reconciler error","Kiali":{{"name":"kiali","namespace":"{ns}"}},'
        f'"error":"configmaps \\"kiali-cleanup\\" is forbidden: unable to create new content in namespace {ns} '
        'because it is being terminated"}'
    )


def _event_refused(ns: str) -> str:
    return (
        f'Server rejected event \'&v1.Event{{ObjectMeta:{{Name:"kiali.17a", Namespace:"{ns}"}}, '
        f'Reason:"Reconciling"}}\': \'events "kiali.17a" is forbidden: unable to create new content in '
        f"namespace {ns} because it is being terminated' (will not retry!)"
    )


def _operator_pod(api: Api) -> str:
    pods = api.http.get("/api/v1/namespaces/kiali-operator/pods")["items"]
    assert pods, "the operator's Deployment has no pod"
    return str(pods[0]["metadata"]["name"])


def _build(kube: Emulator, started: datetime) -> None:
    api = _start(kube)
    _kiali_crd(api)
    api.namespace("kiali-operator")
    api.deployment(
        "kiali-operator",
        "kiali-operator",
        node="node-1",
        image="quay.io/kiali/kiali-operator:v2.17.0",
        labels={"app.kubernetes.io/name": "kiali-operator"},
    )
    for ns in ("kiali-failing", "kiali-refused", "kiali-silent", "kiali-recent"):
        api.namespace(ns)
        _kiali_cr(api, ns)
    run_for(kube, 30)
    for ns in ("kiali-failing", "kiali-refused", "kiali-silent"):
        api.delete_namespace(ns)
    run_for(kube, 30)
    deleted = kube.clock.now()
    kube.clock.advance((STUCK_FOR - RECENT).total_seconds() + 60)
    kube.settle()
    api.delete_namespace("kiali-recent")
    run_for(kube, 30)
    kube.clock.advance(RECENT.total_seconds() - 30)
    kube.settle()
    hour = 3600
    lines = [
        (deleted + timedelta(minutes=5), "starting reconcile of Kiali kiali-silent-other/kiali"),
        (deleted + timedelta(minutes=10), _error("kiali-failing", 1)),
        (deleted + timedelta(minutes=11), _event_refused("kiali-failing")),
        (deleted + timedelta(minutes=12), _refused("kiali-refused", 2)),
        (deleted + timedelta(seconds=hour), _error("kiali-failing", 3)),
        (deleted + timedelta(seconds=hour + 60), _refused("kiali-refused", 4)),
        (deleted + timedelta(seconds=2 * hour), _error("kiali-failing", 5)),
    ]
    kube.pod_logs.set("kiali-operator", _operator_pod(api), lines)
    assert abs((kube.clock.now() - started - STUCK_FOR).total_seconds()) < 240


@pytest.fixture(scope="module")
def kube() -> Iterator[Emulator]:
    # the bot and the CLI read the real clock: the emulator's ends at the present, the deletions 3 h before
    started = datetime.now(UTC) - STUCK_FOR - timedelta(minutes=2)  # the deletions, a minute after the start
    with Emulator(clock=FakeClock(started), seed=0) as emulator:
        _build(emulator, started)
        yield emulator


@pytest.fixture(scope="module")
def kubeconfig(kube: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("alive") / "kubeconfig"
    kube.write_kubeconfig(path)
    return path


def _report(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _first_blocking(report: dict[str, Any]) -> dict[str, Any]:
    return next(f for f in report["findings"] if f["blocking"])


def test_a_failure_in_the_controllers_log_is_cleanup_failing_redacted(kubeconfig: Path) -> None:
    report = _report(kubeconfig, "kiali-failing")
    assert report["cause"] == "cleanup_failing"
    finding = _first_blocking(report)
    assert finding["controller"]["state"] == "alive"
    assert finding["progress"]["progressing"] is False
    assert finding["progress"]["text"].startswith("no progress for 3h")
    said = json.dumps(finding)
    assert "401 Unauthorized" in said
    # the Event refused in the terminating namespace proves nothing: not a deadlock, and said so
    assert "only say its Events were refused" in said
    # the credentials of the line are not in the report
    assert TOKEN not in json.dumps(report)
    assert "canaryPayloadLive37" not in json.dumps(report)
    assert PASSWORD not in json.dumps(report)
    assert "[REDACTED]" in said
    # fix the cause first, with the command that reads the log since the deletion began; the finalizer later
    first, *rest = finding["remedies"]
    assert first["action"] == "investigate"
    assert any(c.startswith("kubectl -n kiali-operator logs deployment/kiali-operator") for c in first["commands"])
    assert any("--since=" in c for c in first["commands"])
    assert [r["action"] for r in rest][:1] == ["remove_finalizer"]


def test_the_namespaces_refusal_in_the_log_is_a_finalizer_deadlock(kubeconfig: Path) -> None:
    report = _report(kubeconfig, "kiali-refused")
    assert report["cause"] == "finalizer_deadlock"
    finding = _first_blocking(report)
    assert "unable to create new content in namespace kiali-refused" in json.dumps(finding["evidence"])
    assert finding["remedies"][0]["action"] == "investigate"


def test_a_live_controller_with_nothing_to_say_is_a_blocking_unknown(kubeconfig: Path) -> None:
    report = _report(kubeconfig, "kiali-silent")
    assert report["cause"] == "unknown"
    finding = _first_blocking(report)
    assert "a live controller (kiali-operator) has not finished for 3h" in finding["summary"]
    assert "nothing nsstuck can read says why" in finding["summary"]
    assert "names none of these objects" in json.dumps(finding["evidence"])
    assert any("logs deployment/kiali-operator" in c for c in finding["remedies"][0]["commands"])


def test_within_the_bound_it_is_content_deleting_with_the_time_it_stood_still(kubeconfig: Path) -> None:
    report = _report(kubeconfig, "kiali-recent")
    assert report["cause"] == "content_deleting"
    finding = report["findings"][0]
    assert finding["blocking"] is False
    assert finding["progress"]["progressing"] is True
    assert re.match(r"no change for (9|10|11)m", finding["progress"]["text"])  # 10m, give or take the test's time
    assert "within the 30m bound" in finding["progress"]["text"]
    # a lower bound makes the same namespace past it
    done = run_nsstuck(
        "diagnose",
        "kiali-recent",
        "--kubeconfig",
        str(kubeconfig),
        "-o",
        "json",
        env={"NSSTUCK_NO_PROGRESS_MINUTES": "5"},
    )
    assert json.loads(done.stdout)["cause"] != "content_deleting"


def test_a_forbidden_log_read_is_a_named_gap(kube: Emulator, kubeconfig: Path) -> None:
    rule = kube.knobs.forbid("pods/log", verbs=("get",))
    try:
        report = _report(kubeconfig, "kiali-failing")
    finally:
        kube.knobs.forbid_rules.remove(rule)
    assert report["complete"] is False
    assert any(
        g["what"] == "read logs of deployment/kiali-operator in kiali-operator" and g["reason"] == "forbidden"
        for g in report["gaps"]
    )
    finding = _first_blocking(report)
    assert "could not be read: forbidden" in json.dumps(finding["evidence"])
    offered = {r["action"] for f in report["findings"] for r in f["remedies"]}
    assert "force_finalize_namespace" not in offered


def test_a_cluster_whose_controller_logs_are_off_is_not_read(kube: Emulator, tmp_path: Path) -> None:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        f"clusters:\n  - name: quiet\n    kubeconfig: {kubeconfig}\n    evidence:\n      controller_logs: false\n"
    )
    kube.journal.clear()
    done = run_nsstuck(
        "diagnose", "kiali-failing", "--cluster", "quiet", "-o", "json", env={"NSSTUCK_CONFIG": str(config)}
    )
    assert done.returncode == 0, done.stderr
    assert not [line for line in kube.journal.lines() if "/log" in line]  # not asked for
    report = json.loads(done.stdout)
    finding = _first_blocking(report)
    assert "evidence.controller_logs is false" in json.dumps(finding["evidence"])
    # the object's status reports no failure, and the log was not read: nothing says why, nothing is guessed
    assert report["cause"] == "unknown"
    # a bad value is refused with a short message
    config.write_text(
        f"clusters:\n  - name: quiet\n    kubeconfig: {kubeconfig}\n    evidence:\n      controller_logs: sometimes\n"
    )
    bad = run_nsstuck("config", "check", env={"NSSTUCK_CONFIG": str(config)})
    assert bad.returncode != 0
    assert "controller_logs" in bad.stderr + bad.stdout


# --- the bot ----------------------------------------------------------------------------------------


def _ask(flow: Flow, namespace: str) -> tuple[str, str]:
    """/nsstuck prod-eu <namespace>: the verdict in the channel and its thread, rendered."""
    slack = flow.slack
    before = {m["ts"] for m in slack.channel_messages(OPS_CHANNEL)}
    delivery = flow.bot.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200

    def answered() -> dict[str, Any] | None:
        new = [m for m in slack.channel_messages(OPS_CHANNEL) if m["ts"] not in before]
        return next((m for m in new if f"*{namespace}*" in slack.render(m)), None)

    verdict = slack.wait_for(answered, timeout=30)
    replies = slack.wait_for(lambda: slack.thread(OPS_CHANNEL, str(verdict["ts"])) or None, timeout=20)
    return slack.render(verdict), "\n".join(slack.render(m) for m in replies)


def _stored(database: str) -> str:
    """Every value of every table of the bot's SQLite database, compressed snapshots decompressed."""
    texts = []
    with sqlite3.connect(database.removeprefix("sqlite:///")) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        try:
                            texts.append(zlib.decompress(value).decode())
                        except zlib.error:
                            texts.append(value.decode("utf-8", "replace"))
                    else:
                        texts.append(str(value))
    return "\n".join(texts)


@pytest.mark.slow
def test_the_bot_says_each_verdict_with_its_progress_and_keeps_no_credential(
    kube: Emulator, slack_emulator: SlackEmulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube, tmp_path) as flow:
        line, thread = _ask(flow, "kiali-failing")
        assert "`cleanup_failing`" in line
        assert "*Progress:* no progress for 3h" in line
        assert "401 Unauthorized" in thread
        assert "[REDACTED]" in thread
        assert TOKEN not in thread
        assert PASSWORD not in thread
        line, _ = _ask(flow, "kiali-refused")
        assert "`finalizer_deadlock`" in line
        line, _ = _ask(flow, "kiali-recent")
        assert "not stuck yet" in line
        assert "*Progress:* no change for" in line
        stored = _stored(flow.database)
    assert "cleanup_failing" in stored
    assert "[REDACTED]" in stored  # the quoted lines are kept, redacted
    assert TOKEN not in stored
    assert "canaryPayloadLive37" not in stored
    assert PASSWORD not in stored


@pytest.mark.parametrize(
    ("namespace", "logs_readable"),
    [("kiali-failing", True), ("kiali-silent", True), ("kiali-recent", True), ("kiali-failing", False)],
)
def test_the_rules_read_the_judgements_whose_logs_to_read_made(
    kube: Emulator, kubeconfig: Path, namespace: str, logs_readable: bool
) -> None:
    """Each controller is judged once per diagnosis, its objects' progress read once: choosing whose logs to
    read does it, and the rules read the same, carried to the snapshot with the logs; the diagnosis is the one
    judging afresh gives. A log read that leaves a gap (evidence to a judgement) has the controllers judged
    again."""
    options = searching(CollectOptions())
    target = ClusterTarget(name=ClusterName("emulated"), kubeconfig=kubeconfig)
    rule = None if logs_readable else kube.knobs.forbid("pods/log", verbs=("get",))
    connection = connect(target, pool_size=options.workers)
    try:
        transport = Transport(connection, call_timeout=options.call_timeout)
        snapshot = Collector(transport, cluster=target.name, options=options).collect(namespace)
        looked = Context(snapshot)
        deadline = time.monotonic() + options.deadline
        with_logs = with_controller_logs(transport, target, snapshot, options, deadline=deadline, context=looked)
    finally:
        connection.close()
        if rule is not None:
            kube.knobs.forbid_rules.remove(rule)
    judged = dict(looked.judgements)
    assert list(judged) == ["kiali.io/finalizer"]  # the one finalizer, judged to choose whose logs to read
    assert bool(with_logs.controller_logs) is (namespace != "kiali-recent")  # read past the bound only
    assert (with_logs.gaps == snapshot.gaps) is logs_readable
    carried = looked.carried_to(with_logs)
    # the progress of the objects (every managedFields entry read) too, where whose logs to read needed it
    assert list(looked.progress) == ["kiali.io/finalizer"]
    assert carried.progress["kiali.io/finalizer"] is looked.progress["kiali.io/finalizer"]
    if logs_readable:
        assert all(carried.judgements[f] is judgement for f, judgement in judged.items())
    else:
        assert carried.judgements == {}
    assert diagnose(with_logs, context=looked) == diagnose(with_logs)
    # a snapshot other than this one with its logs gets a context of its own
    other = replace(with_logs, namespace_object=dict(with_logs.namespace_object or {}))
    assert looked.carried_to(other).judgements == {}
