"""Diagnoses run in worker processes of the running bot (issue 26): what happens when one dies, hangs,
or when more commands come at once than the queue takes.

Driven through the real bot (`nsstuck serve`, HTTP mode) against both emulators. Which worker runs
which diagnosis is read from the bot's DEBUG log ("diagnosis of CLUSTER/NS on worker pid N"); the
worker is then killed (SIGKILL, as the OOM killer does) or stopped (SIGSTOP: a process that no longer
makes progress, whatever the reason) while its diagnosis waits for a slow cluster.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request
from contextlib import suppress
from pathlib import Path

from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, CAROL, OPS_CHANNEL
from tests.slack._bot import Running, running_bot

DEBUG = {"NSSTUCK_LOG_LEVEL": "DEBUG", "NSSTUCK_DIAGNOSIS_WORKERS": "2"}


def _worker_of(bot: Running, namespace: str, *, timeout: float = 20) -> int:
    """The pid of the worker the bot handed the diagnosis of `namespace` to (from its log)."""
    pattern = re.compile(rf"diagnosis of prod-eu/{re.escape(namespace)} on worker pid ([0-9]+)")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(bot.log.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no worker took the diagnosis of {namespace}:\n{bot.log.read_text()[-3000:]}")


def _told(bot: Running, namespace: str, *, timeout: float = 30) -> str:
    """What the asker of `namespace` was told through the command's response_url."""

    def found() -> str | None:
        return next((p.raw for p in bot.slack.webhook_posts() if f"`{namespace}`" in p.raw), None)

    return str(bot.slack.wait_for(found, timeout=timeout, message=f"the asker of {namespace} was not told"))


def _verdict(bot: Running, namespace: str, *, timeout: float = 30) -> str:
    """The verdict's text in the channel ("prod-eu/NS: stuck (cause), ...", "prod-eu/NS: not found")."""

    def found() -> str | None:
        said = (str(m.get("text") or "") for m in bot.slack.channel_messages(OPS_CHANNEL))
        return next((text for text in said if text.startswith(f"prod-eu/{namespace}: ")), None)

    return str(bot.slack.wait_for(found, timeout=timeout, message=f"no verdict on {namespace}"))


def _metrics(bot: Running) -> str:
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        return str(response.read().decode())


def _healthy(bot: Running) -> bool:
    with urllib.request.urlopen(bot.url + "/healthz", timeout=5) as response:
        return bool(response.status == 200)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state != "Z"
    return True


def test_a_worker_killed_mid_diagnosis_fails_only_its_command_and_is_replaced(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "victim", delete=True)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=DEBUG) as bot:
        # the victim's diagnosis waits 3 s for its namespace: long enough to be killed in the middle
        slow = kube_emulator.knobs.latency(3000, match=r"^GET /api/v1/namespaces/victim$")
        assert "On it" in bot.driver.slash_command("/nsstuck", "prod-eu victim", user=ALICE, channel=OPS_CHANNEL).body
        victim = _worker_of(bot, "victim")
        assert "On it" in bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=BOB, channel=OPS_CHANNEL).body
        os.kill(victim, signal.SIGKILL)

        told = _told(bot, "victim")
        assert "Could not diagnose `victim` on `prod-eu`" in told
        assert "was killed by SIGKILL before it finished" in told
        assert "try again" in told
        # the other command was diagnosed, on the other worker, and posted
        assert "stuck" in _verdict(bot, "ddd")
        assert not any("`ddd`" in p.raw for p in bot.slack.webhook_posts())

        # replaced: asked again, the victim is diagnosed (by the replacement or the other worker)
        kube_emulator.knobs.latency_rules.remove(slow)
        bot.driver.slash_command("/nsstuck", "prod-eu victim", user=CAROL, channel=OPS_CHANNEL)
        assert "stuck" in _verdict(bot, "victim")
        metrics = _metrics(bot)
        assert 'nsstuck_workers_replaced_total{reason="died"} 1.0' in metrics
        assert 'nsstuck_worker_jobs_total{kind="diagnose",outcome="died"} 1.0' in metrics
        assert "nsstuck_workers_alive 2.0" in metrics
        # what the workers counted reached the bot's /metrics (relayed with each answer)
        assert re.search(r'^nsstuck_worker_cpu_seconds_total\{kind="diagnose"\} [0-9.]+', metrics, re.MULTILINE)
        assert _healthy(bot)
        log = bot.log.read_text()
        assert f"worker pid {victim} was killed by SIGKILL during diagnosis of prod-eu/victim" in log
        assert not _alive(victim)
        # the workers log to the bot's stderr, each line with the context of the command it serves
        assert re.search(
            r"diagnose job done in worker pid [0-9]+: .*\[slack_user=U0BBBBBBB cluster=prod-eu namespace=ddd\]", log
        )


def test_a_worker_hung_past_the_deadline_is_stopped_and_its_asker_told(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    # a diagnosis collects for 2 s; with a 1 s credential timeout, a 2 s call timeout and the 5 s grace,
    # a worker still at it after 10 s is taken for hung
    env = {**DEBUG, "NSSTUCK_DIAGNOSIS_DEADLINE_SECONDS": "2", "NSSTUCK_CREDENTIAL_TIMEOUT_SECONDS": "1"}
    _namespace(kube_emulator, "frozen", delete=True)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        kube_emulator.knobs.latency(1500, match=r"^GET /api/v1/namespaces/frozen$")
        sent = time.monotonic()
        bot.driver.slash_command("/nsstuck", "prod-eu frozen", user=ALICE, channel=OPS_CHANNEL)
        frozen = _worker_of(bot, "frozen")
        os.kill(frozen, signal.SIGSTOP)  # it makes no progress any more, and never answers
        try:
            # meanwhile the other worker answers another command
            bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=BOB, channel=OPS_CHANNEL)
            assert "stuck" in _verdict(bot, "ddd")
            told = _told(bot, "frozen", timeout=40)
            waited = time.monotonic() - sent
        finally:
            with suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGCONT)
        assert "Could not diagnose `frozen` on `prod-eu`" in told
        assert "did not finish within 10s and was stopped; try again" in told
        assert 9 <= waited < 30, waited
        metrics = _metrics(bot)
        assert 'nsstuck_workers_replaced_total{reason="hung"} 1.0' in metrics
        assert 'nsstuck_worker_jobs_total{kind="diagnose",outcome="hung"} 1.0' in metrics
        deadline = time.monotonic() + 10
        while _alive(frozen) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(frozen), "the hung worker was not killed"
        # replaced: two workers again, and a new ask is answered
        bot.driver.slash_command("/nsstuck", "prod-eu frozen", user=CAROL, channel=OPS_CHANNEL)
        assert "stuck" in _verdict(bot, "frozen", timeout=40)
        assert "nsstuck_workers_alive 2.0" in _metrics(bot)
        assert _healthy(bot)


def test_a_burst_larger_than_the_queue_tells_the_extra_callers_to_try_again(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    # one worker, two diagnoses may wait for it: of eight commands sent at the same instant, three or two
    # are taken (depending on whether the first has reached the worker when the others arrive)
    env = {"NSSTUCK_DIAGNOSIS_WORKERS": "1", "NSSTUCK_DIAGNOSIS_QUEUE": "2"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        kube_emulator.knobs.latency(1000, match=r"^GET /api/v1/namespaces/burst-")
        start = threading.Barrier(8)
        bodies: dict[int, str] = {}

        def send(i: int) -> None:
            start.wait()
            delivery = bot.driver.slash_command("/nsstuck", f"prod-eu burst-{i}", user=ALICE, channel=OPS_CHANNEL)
            assert delivery.status == 200
            assert delivery.elapsed < 3.0
            bodies[i] = delivery.body

        senders = [threading.Thread(target=send, args=(i,)) for i in range(8)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(timeout=30)
        assert len(bodies) == 8
        taken = sorted(i for i, body in bodies.items() if "On it" in body)
        refused = sorted(i for i, body in bodies.items() if "Too many diagnoses are waiting right now" in body)
        assert len(taken) in (2, 3), bodies
        assert len(taken) + len(refused) == 8, bodies
        assert all("try again in a minute" in bodies[i] for i in refused)
        metrics = _metrics(bot)
        assert f'nsstuck_slash_commands_refused_total{{reason="queue_full"}} {len(refused)}.0' in metrics
        # each taken command gets its verdict (the namespaces do not exist), the refused ones nothing
        for i in taken:
            assert _verdict(bot, f"burst-{i}").endswith(": not found")
        time.sleep(1.0)
        posted = " ".join(str(m.get("text")) for m in bot.slack.channel_messages(OPS_CHANNEL))
        assert not any(f"prod-eu/burst-{i}:" in posted for i in refused)


def test_a_worker_keeps_its_cluster_client_between_diagnoses_until_the_kubeconfig_changes(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env={"NSSTUCK_DIAGNOSIS_WORKERS": "1"}) as bot:
        asked = 0

        def diagnosed(user: str, answers: int) -> set[str]:
            """The connections (their client ends) one more diagnosis of ddd came over (its answer posted)."""
            nonlocal asked
            kube_emulator.journal.clear()
            bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=user, channel=OPS_CHANNEL)
            bot.slack.wait_for(
                lambda: (
                    len([c for c in bot.slack.calls("chat.postMessage") if "prod-eu/ddd: " in str(c.params)]) >= answers
                    or None
                ),
                timeout=30,
            )
            entries = kube_emulator.journal.entries()
            asked += len(entries)
            return {entry.peer for entry in entries}

        first = diagnosed(ALICE, 1)
        assert first
        # the same worker, the same kept client: it asks over connections the first diagnosis opened
        # (how many calls run at once varies, so it may open a few more; a fresh client would use only new ones)
        second = diagnosed(BOB, 2)
        assert second & first
        # the kubeconfig changed (a rotated credential written in place): the client is given up, and
        # none of its connections is used again
        kubeconfig = tmp_path / "prod.kubeconfig"
        kubeconfig.write_text(kubeconfig.read_text() + "\n")
        third = diagnosed(CAROL, 3)
        assert third
        assert not third & (first | second)
        # the workers' requests are counted in the bot's /metrics (relayed with their answers), each under its
        # outcome (a 404 of an API the cluster does not serve, OLM's, is one too)
        counted = re.findall(
            r'^nsstuck_kube_requests_total\{cluster="prod-eu",outcome="[a-z_]+"\} (\S+)$', _metrics(bot), re.M
        )
        assert counted
        assert sum(float(n) for n in counted) == asked


def test_a_worker_holding_too_much_memory_after_a_job_is_replaced(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    # any worker holds more than 1 MB: each is replaced after its job, and the next job runs on a fresh one
    env = {**DEBUG, "NSSTUCK_DIAGNOSIS_WORKERS": "1", "NSSTUCK_WORKER_MAX_RSS_MB": "1"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        first = _worker_of(bot, "ddd")
        assert "stuck" in _verdict(bot, "ddd")
        bot.driver.slash_command("/nsstuck", "prod-eu gone", user=BOB, channel=OPS_CHANNEL)
        assert _verdict(bot, "gone").endswith(": not found")
        second = _worker_of(bot, "gone")
        assert second != first
        log = bot.log.read_text()
        assert re.search(
            rf"worker pid {first} holds [0-9]+ MB after the diagnosis of prod-eu/ddd \(more than 1 MB\)", log
        )
        metrics = _metrics(bot)
        assert re.search(r'^nsstuck_workers_replaced_total\{reason="memory"\} [12]\.0$', metrics, re.MULTILINE)
        assert "nsstuck_workers_alive 1.0" in metrics
        assert not _alive(first)
