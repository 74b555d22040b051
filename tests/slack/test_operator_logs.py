"""Logs an operator can use (issue 24 §3): NSSTUCK_LOG_FORMAT=json makes every line of `nsstuck serve`'s
output one JSON object, the libraries' lines too, each with the context of the work it belongs to
(cluster, namespace, run id, request id, the Slack user, the job); `serve` says at INFO one line per
command, diagnosis, remediation request, approval, execution and job run."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.domain.refs import ClusterName
from bot.kube.collecting import CollectOptions, Collector
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import Transport
from bot.logs import JsonFormatter, TextFormatter, _ContextFilter, carrying, log_context
from tests.approvals._flow import remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import apply_scenario_once
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL
from tests.slack._bot import running_bot

JSON = dict[str, Any]


def _lines(log: Path) -> list[JSON]:
    """Every line of the bot's output, each of which must be one JSON object with the four fields."""
    records = []
    for number, line in enumerate(log.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {number} of the bot's output is not JSON: {line[:300]!r}") from None
        assert isinstance(record, dict), line
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        records.append(record)
    return records


def _one(records: list[JSON], logger: str, starts: str) -> JSON:
    found = [r for r in records if r["logger"] == logger and str(r["message"]).startswith(starts)]
    assert found, f"no {logger} line starting {starts!r} in:\n" + "\n".join(
        f"{r['logger']}: {r['message']}" for r in records
    )
    return found[0]


def test_a_remediation_through_slack_logs_one_json_line_per_step_with_its_context(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_LOG_FORMAT": "json", "NSSTUCK_LOG_LEVEL": "DEBUG"}
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as flow:
        namespace = flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        assert flow.vote(request["id"], BOB).status == 200
        assert flow.wait_status(request["id"], "applied", "failed", "stale")["status"] == "applied"
        run_id = int(request["diagnosis_id"])
        log = flow.bot.log
    records = _lines(log)
    where = {"cluster": "prod-eu", "namespace": namespace}

    command = _one(records, "bot.slack.listeners.commands", "command /nsstuck (diagnose)")
    assert command.items() >= {**where, "slack_user": ALICE, "level": "INFO"}.items()
    diagnosis = _one(records, "bot.services.answering", "diagnosis: ")
    assert diagnosis.items() >= {**where, "slack_user": ALICE, "run_id": str(run_id)}.items()
    filed = _one(records, "bot.services.remediating", f"remediation request #{request['id']} filed")
    assert filed.items() >= {**where, "slack_user": ALICE, "request_id": str(request["id"])}.items()
    approval = _one(records, "bot.services.remediating", f"approval on request #{request['id']}: execute")
    assert approval.items() >= {**where, "slack_user": BOB, "request_id": str(request["id"])}.items()
    executed = _one(records, "bot.services.remediating", f"execution of request #{request['id']}: applied")
    assert executed.items() >= {"slack_user": BOB, "request_id": str(request["id"])}.items()
    job = _one(records, "bot.scheduler.running", "job remediation-chores ran in")
    assert job["job"] == "remediation-chores"

    # the libraries' lines are JSON too, and those logged inside a step carry its context: slack_sdk's
    # calls while the approval is decided (who BOB is, the approver group's members)
    calls = [r for r in records if r["logger"] == "slack_sdk.web.base_client" and r.get("request_id")]
    assert {r["request_id"] for r in calls} == {str(request["id"])}
    assert [r for r in calls if r.get("slack_user") == BOB], "no slack_sdk line inside the approval"
    assert [r for r in calls if r.get("slack_user") == ALICE], "no slack_sdk line for the request's message"
    # and the report's posts, sent by the pacer's thread for the channel, carry the run's context
    report_posts = [
        r
        for r in records
        if r["logger"] == "slack_sdk.web.base_client"
        and "chat.postMessage" in r["message"]
        and r.get("run_id") == str(run_id)
    ]
    assert report_posts, "no chat.postMessage line with the run's context"
    astray = [r for r in report_posts if not r.items() >= {**where, "slack_user": ALICE}.items()]
    assert not astray, astray
    assert {r["logger"].split(".")[0] for r in records} >= {"bot", "slack_sdk", "slack_bolt", "apscheduler"}
    # Bolt's own lines about a request (routing, middleware, the listener's run, on its listener
    # threads) carry who sent it
    bolt = [r for r in records if r["logger"].startswith("slack_bolt") and r.get("slack_user")]
    assert {r["slack_user"] for r in bolt} >= {ALICE, BOB}, "Bolt's lines carry no sender"
    # the re-check before the change collects on as many threads as its client keeps connections:
    # urllib3 has no connection to throw away (it said so at WARNING dozens of times per execution)
    assert not [r for r in records if "Connection pool is full" in str(r["message"])]
    # a context field is never made up: lines of the start-up carry none
    assert not {"cluster", "request_id", "slack_user"} & _one(records, "bot.slack.server", "nsstuck serving").keys()


def test_serve_logs_at_info_by_default_and_json_holds_every_line(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_LOG_FORMAT": "json", "NSSTUCK_REPOST_SECONDS": "0.2"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
        slack_emulator.wait_for(lambda: "job repost-unposted-reports ran in" in bot.log.read_text() or None, timeout=10)
    records = _lines(bot.log)
    levels = {r["level"] for r in records}
    assert "DEBUG" not in levels, levels
    assert "INFO" in levels, levels
    help_line = _one(records, "bot.slack.listeners.commands", "command /nsstuck (help)")
    assert help_line["slack_user"] == ALICE
    assert "cluster" not in help_line
    _one(records, "bot.scheduler.running", "job repost-unposted-reports ran in")
    # APScheduler's own two lines per run are left out at INFO: nsstuck says one
    assert not [r for r in records if r["logger"].startswith("apscheduler.executors")]


def test_in_socket_mode_bolts_lines_about_an_envelope_carry_its_sender(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_LOG_FORMAT": "json", "NSSTUCK_LOG_LEVEL": "DEBUG"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True, extra_env=env) as bot:
        slack_emulator.socket.wait_for_connections(1, timeout=15)
        ack = slack_emulator.socket_mode.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
        assert "/nsstuck <cluster> <namespace>" in str(ack.payload)
        slack_emulator.socket.drop_all()  # the builtin client's close() waits otherwise
    records = _lines(bot.log)
    bolt = [r for r in records if r["logger"].startswith("slack_bolt") and r.get("slack_user") == ALICE]
    assert bolt, "Bolt's lines about the envelope carry no sender"
    assert _one(records, "bot.slack.listeners.commands", "command /nsstuck (help)")["slack_user"] == ALICE


def test_text_logs_name_the_context_and_json_escapes_what_it_quotes() -> None:
    """The formatters over a real record: the context as fields, a message with quotes and newlines
    kept whole in one line, an exception's traceback in its own field."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(_ContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.operator_logs")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with log_context(cluster="prod-eu", namespace="ns-1", slack_user="U1"):
            carried = carrying(lambda: logger.info('said "%s"\nsecond line', "x"))
        carried()  # outside the block: the context came with the function
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed")
        with log_context(request_id=7):
            handler.setFormatter(TextFormatter())
            logger.warning("plain")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    first, second, third = stream.getvalue().splitlines()
    said = json.loads(first)
    assert said["message"] == 'said "x"\nsecond line'
    assert (said["cluster"], said["namespace"], said["slack_user"]) == ("prod-eu", "ns-1", "U1")
    failed = json.loads(second)
    assert "cluster" not in failed
    assert "ValueError: boom" in failed["exception"]
    assert third.endswith("WARNING tests.operator_logs: plain [request_id=7]")
    with pytest.raises(TypeError, match="unknown log context"), log_context(token="x"):
        pass


def test_lines_logged_on_the_collectors_threads_carry_the_diagnosis_context(
    kube_emulator: Emulator, tmp_path: Path
) -> None:
    """A library's line logged on the collector's pool (urllib3's, when its client keeps fewer
    connections than the collector's threads) carries the context of the diagnosis that made the call."""
    apply_scenario_once(kube_emulator, "seed002-configmap-finalizer")
    target = ClusterTarget(name=ClusterName("prod-eu"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(_ContextFilter())
    handler.setFormatter(JsonFormatter())
    pool_logger = logging.getLogger("urllib3.connectionpool")
    pool_logger.addHandler(handler)
    connection = connect(target, pool_size=1)
    # through the kubernetes client and urllib3 (the path of a configuration the Reader does not serve,
    # bot.kube.requesting): urllib3 logs when its pool is full, the Reader does not log
    connection.reader = None
    try:
        with log_context(cluster="prod-eu", namespace="finalizer-demo", run_id=41):
            Collector(Transport(connection), cluster=target.name, options=CollectOptions(workers=8)).collect(
                "finalizer-demo"
            )
    finally:
        pool_logger.removeHandler(handler)
        connection.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line for line in lines if "Connection pool is full" in line["message"]], "no line from the pool"
    assert {(line.get("cluster"), line.get("namespace"), line.get("run_id")) for line in lines} == {
        ("prod-eu", "finalizer-demo", "41")
    }


@pytest.mark.parametrize(("variable", "value"), [("NSSTUCK_LOG_FORMAT", "yaml"), ("NSSTUCK_LOG_LEVEL", "loud")])
def test_an_unknown_log_setting_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    out, err = io.StringIO(), io.StringIO()
    assert main(["config", "check"], out=out, err=err) == 2
    assert err.getvalue().splitlines() == [
        f"nsstuck: config error: environment: {variable}: {value!r} is not one of "
        + ("text, json" if variable.endswith("FORMAT") else "DEBUG, INFO, WARNING, ERROR")
    ]
    assert out.getvalue() == ""
