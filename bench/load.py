"""Benchmark: 200 /nsstuck commands in one minute over 20 clusters, with approvals clicked meanwhile.

    make bench            (or: PYTHONPATH=. .venv/bin/python -m bench.load [--database postgresql])

The real `nsstuck serve` (HTTP mode) against the Slack emulator, which enforces chat.postMessage's
one message per second per channel, and 20 emulated clusters served over TLS by emulator processes
of their own, with 50 ms added to every request of the bot. Each cluster holds one namespace stuck
the way a scenario of the emulator's library has it (bench/_load_fleet.py: ten scenarios of seven
causes, each on two clusters) and has a channel of its own.

Open loop: command i is sent at i x 60 s / 200 whether or not the earlier ones were answered, by
eight users, round robin over the clusters. Meanwhile, on 14 of the clusters (seven kinds of change),
at times spread over the minute, a user clicks the first Request button of a report there and,
once the request is in the thread, three approvers click Approve at the same moment (two approvals
are required): requests are filed, approved and executed while the commands flow.

Measured in the same run:

- the baseline: the same bot, idle: commands sent one at a time, each once the one before was
  posted; /healthz round trips (the HTTP floor); the bot's RSS right after start-up;
- the acknowledgement time of every command and click (the bot's HTTP answer to the signed
  request): p50, p95, p99, max, and the ratios to the baseline;
- that nothing is lost: every command's verdict (in the channel, or in the incident's thread) and
  its report in the incident's thread, counted in the Slack emulator; every run and incident in
  the database, every run marked posted; every approved request executed exactly once (its audit
  entries, its one outcome line in the thread), every Approve click counted or answered privately,
  and the audit trail intact;
- the bot's RSS every second over the minute of load, summed over its processes (VmRSS of
  /proc/PID/status of the bot, its diagnosis workers and their fork server): at its start, middle and
  end, and the slope over its second half;
- for the reader: the time from each command to its verdict in Slack, and the CPU used over the
  minute by the bot, the emulators, this process and every other process on the machine (when
  other work takes a good part of the machine, the figures are noisy).

Targets: ack p99 < 100 ms (commands and clicks alike); nothing lost; memory steady: the RSS grows over
the second half of the minute by at most half what it grew over the first half, or by less than 5 MB;
memory bounded: under 400 MB at the end of the minute, the bot and its workers together.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import yaml
from sqlalchemy import create_engine, text

from bench._emulators import emulated_clusters
from bench._load_fleet import namespace_of, remediable
from bench._proc import cpu_seconds, io_stalled_seconds, machine_cpu, tree_cpu_seconds, tree_memory_mb, tree_rss_mb
from bench._report import Check, finish, percentile
from bot.store import migrating
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery
from tests.slack._bot import Running, serve_process

REPO = Path(__file__).resolve().parents[1]
USERS = tuple(f"U0LOADU{i:02d}" for i in range(8))  # who send commands and file requests
APPROVERS = tuple(f"U0LOADA{i:02d}" for i in range(6))
GROUP = "S0LOADAPP"
ASKED_BY = re.compile(r"asked by <@(U[A-Z0-9]+)>")
REQUEST_ID = re.compile(r"Remediation request #([0-9]+)")
MEMORY_ALLOWANCE_MB = 5.0
MEMORY_LIMIT_MB = 400.0  # the bot with its diagnosis workers, RSS summed over the processes

T = TypeVar("T")


def channel(k: int) -> str:
    return f"C0LOAD{k:03d}"


def cluster(k: int) -> str:
    return f"cluster-{k:02d}"


def spread(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p95": round(percentile(values, 95), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def poll(predicate: Callable[[], T | None], *, timeout: float, what: str, period: float = 0.25) -> T:
    """Evaluate `predicate` every `period` seconds until it is truthy (a light touch: this process
    shares the machine with the bot)."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(period)


def write_config(work: Path, kubeconfigs: list[Path], *, required: int) -> Path:
    config = {
        "clusters": [
            {
                "name": cluster(k),
                "kubeconfig": str(path),
                "channels": [channel(k)],
                "approvers": [GROUP],
                "required_approvals": required,
                "remediation": True,
            }
            for k, path in enumerate(kubeconfigs)
        ]
    }
    path = work / "nsstuck.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def workspace(clusters: int) -> SlackEmulator:
    """The Slack emulator, with Slack's pace for chat.postMessage (one a second per channel, no burst)."""
    slack = SlackEmulator(post_message_burst=1)
    for user in (*USERS, *APPROVERS):
        slack.add_user(user, user.lower())
    slack.add_usergroup(GROUP, "load-approvers", list(APPROVERS), name="Load approvers")
    for k in range(clusters):
        slack.add_channel(channel(k), f"load-{k:02d}", members=[*USERS, *APPROVERS, slack.identity.bot_user_id])
    return slack.start()


@contextmanager
def database(kind: str, work: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{work / 'nsstuck.db'}"
        return
    from bench.history import postgres_server
    from tests.pgdatabase import temporary_database

    with postgres_server() as server, temporary_database(server, prefix="bench_load_") as url:
        yield url


# -- the bot's memory ---------------------------------------------------------------------------------


class RssSampler:
    """The RSS of a process once a second, from a thread of its own: (monotonic time, MB); and with it the
    CPU time of the benchmark's own processes (`ours`, seconds) and of the whole machine (busy, all ticks)."""

    def __init__(self, pid: int, ours: Callable[[], float], period: float = 1.0) -> None:
        self.pid = pid
        self.ours = ours
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self.cpu: list[tuple[float, float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        next_at = time.monotonic()
        while True:
            try:
                now, mb, ours = time.monotonic(), tree_rss_mb(self.pid), self.ours()
            except (OSError, RuntimeError):
                return
            self.samples.append((now, mb))
            self.cpu.append((now, ours, *machine_cpu()))
            next_at += self.period
            if self._stop.wait(max(0.0, next_at - time.monotonic())):
                return

    def at(self, when: float) -> float:
        """The sample nearest to `when`."""
        return min(self.samples, key=lambda s: abs(s[0] - when))[1]

    def others_cores(self, start: float, end: float) -> list[float]:
        """Per second in [start, end]: the cores used by processes not of this benchmark (noise)."""
        out = []
        for (t0, ours0, busy0, all0), (t1, ours1, busy1, all1) in itertools.pairwise(self.cpu):
            if start - 0.5 <= t0 and t1 <= end + 0.5 and all1 > all0:
                machine = (busy1 - busy0) / (all1 - all0) * (os.cpu_count() or 1)
                out.append(max(0.0, machine - (ours1 - ours0) / (t1 - t0)))
        return out

    def slope_mb_per_min(self, start: float, end: float) -> float:
        """Least-squares slope of the samples in [start, end]."""
        points = [(t, mb) for t, mb in self.samples if start - 0.5 <= t <= end + 0.5]
        if len(points) < 2:
            return 0.0
        mean_t = statistics.fmean(t for t, _ in points)
        mean_mb = statistics.fmean(mb for _, mb in points)
        var = sum((t - mean_t) ** 2 for t, _ in points)
        cov = sum((t - mean_t) * (mb - mean_mb) for t, mb in points)
        return cov / var * 60 if var else 0.0


# -- what Slack shows ---------------------------------------------------------------------------------


@dataclass
class SlackView:
    """What the channels and threads hold, per cluster, as the benchmark counts it."""

    verdicts: Counter[tuple[int, str]] = field(default_factory=Counter)  # (cluster, asked by)
    verdict_times: dict[tuple[int, str], list[float]] = field(default_factory=dict)
    expecting_report: Counter[int] = field(default_factory=Counter)  # verdicts of a terminating namespace
    reports: Counter[int] = field(default_factory=Counter)  # first parts of reports, in a thread
    report_threads: dict[int, set[str]] = field(default_factory=dict)
    outcome_lines: Counter[int] = field(default_factory=Counter)  # "Remediation #ID: ..." per request
    ephemerals: Counter[tuple[int, str]] = field(default_factory=Counter)  # private answers, of the approvers

    def delivered(self, expected: Counter[tuple[int, str]]) -> bool:
        return all(self.verdicts[key] >= n for key, n in expected.items()) and all(
            self.reports[k] >= n for k, n in self.expecting_report.items()
        )


def look(slack: SlackEmulator, clusters: int) -> SlackView:
    view = SlackView()
    for k in range(clusters):
        prefix, report = f"{cluster(k)}/{namespace_of(k)}: ", f"Diagnosis of {cluster(k)}/{namespace_of(k)}"
        for top in slack.channel_messages(channel(k)):
            for message in (top, *slack.thread(channel(k), str(top["ts"]))):
                said = str(message.get("text") or "")
                if said.startswith(prefix):
                    asked = ASKED_BY.search(json.dumps(message.get("blocks") or []))
                    key = (k, asked.group(1) if asked else "")
                    view.verdicts[key] += 1
                    view.verdict_times.setdefault(key, []).append(float(message["ts"]))
                    if ": stuck (" in said or ": Terminating for " in said:
                        view.expecting_report[k] += 1
                elif message.get("thread_ts") and (said == report or said.startswith(f"{report}, part 1 of ")):
                    view.reports[k] += 1
                    view.report_threads.setdefault(k, set()).add(str(message["thread_ts"]))
                elif message.get("thread_ts") and (found := re.match(r"Remediation #([0-9]+): ", said)):
                    view.outcome_lines[int(found.group(1))] += 1
    return view


# -- the load -------------------------------------------------------------------------------------------


@dataclass
class Sent:
    kind: str  # "command", "request" (a Request button) or "approve"
    cluster: int
    user: str
    delivery: Delivery
    at: float  # wall-clock time it was sent
    late: float | None = None  # seconds after its planned time (open loop); None: not planned (the baseline)

    @property
    def ms(self) -> float:
        return self.delivery.elapsed * 1000

    @property
    def acknowledged(self) -> bool:
        if self.kind == "command":
            return self.delivery.status == 200 and "On it" in self.delivery.body
        return self.delivery.status == 200


@dataclass
class Remediation:
    cluster: int
    clicks: list[Sent] = field(default_factory=list)
    request_id: int | None = None
    approved_at: float | None = None  # when the approvals were sent (monotonic)
    done_after: float | None = None  # seconds from the approvals to the outcome line in the thread
    error: str | None = None


class Load:
    def __init__(self, bot: Running, slack: SlackEmulator, clusters: int) -> None:
        self.bot = bot
        self.slack = slack
        self.clusters = clusters
        self.sent: list[Sent] = []
        self.expected: Counter[tuple[int, str]] = Counter()  # commands acknowledged, per (cluster, user)
        self._lock = threading.Lock()

    def command(self, k: int, user: str, *, planned: float | None = None) -> Sent:
        at, started = time.time(), time.monotonic()
        delivery = self.bot.driver.slash_command("/nsstuck", f"{cluster(k)} {namespace_of(k)}", user=user,
                                                 channel=channel(k))  # fmt: skip
        sent = Sent("command", k, user, delivery, at, None if planned is None else started - planned)
        with self._lock:
            self.sent.append(sent)
            if sent.acknowledged:
                self.expected[(k, user)] += 1
        return sent

    def click(
        self, kind: str, k: int, user: str, payload: dict[str, Any], *, barrier: threading.Barrier | None
    ) -> Sent:
        driver = self.bot.driver
        body = urlencode({"payload": json.dumps(payload)})
        request = driver.sign(body, "application/x-www-form-urlencoded", payload=payload, kind="interactive")
        if barrier is not None:
            barrier.wait()
        at = time.time()
        sent = Sent(kind, k, user, driver.send(request), at)
        with self._lock:
            self.sent.append(sent)
        return sent

    def remediate(self, k: int, requester: str, approvers: list[str], outcome: Remediation) -> None:
        """Click the first Request button of the cluster's report, then Approve from every approver at once."""
        slack, ch = self.slack, channel(k)
        try:

            def button() -> tuple[str, str, str] | None:
                for top in slack.channel_messages(ch):
                    for message in slack.thread(ch, str(top["ts"])):
                        for block in message.get("blocks") or ():
                            for element in block.get("elements") or () if block.get("type") == "actions" else ():
                                if str(element.get("action_id", "")).startswith("nsstuck_request_remedy"):
                                    return str(message["ts"]), str(block["block_id"]), str(element["action_id"])
                return None

            ts, block_id, action_id = poll(button, timeout=90, what=f"no Request button on {cluster(k)}")
            payload = slack.payloads.block_actions(ch, ts, action_id, user=requester, block_id=block_id)
            outcome.clicks.append(self.click("request", k, requester, payload, barrier=None))

            def request_message() -> tuple[int, str, str] | None:
                for top in slack.channel_messages(ch):
                    for message in slack.thread(ch, str(top["ts"])):
                        found = REQUEST_ID.match(str(message.get("text") or ""))
                        if found and "nsstuck_approve" in json.dumps(message.get("blocks") or []):
                            return int(found.group(1)), str(message["ts"]), str(message["thread_ts"])
                return None

            request_id, ts, thread = poll(request_message, timeout=60, what=f"no request message on {cluster(k)}")
            outcome.request_id = request_id
            payloads = [slack.payloads.block_actions(ch, ts, "nsstuck_approve", user=a) for a in approvers]
            barrier = threading.Barrier(len(approvers))
            outcome.approved_at = time.monotonic()
            with ThreadPoolExecutor(max_workers=len(approvers)) as pool:
                clicks = pool.map(lambda ap: self.click("approve", k, ap[0], ap[1], barrier=barrier),
                                  zip(approvers, payloads, strict=True))  # fmt: skip
                outcome.clicks.extend(clicks)

            def outcome_line() -> bool:
                said = (str(m.get("text") or "") for m in slack.thread(ch, thread))
                return any(s.startswith(f"Remediation #{request_id}: ") for s in said)

            poll(outcome_line, timeout=120, what=f"no outcome of request #{request_id}")
            outcome.done_after = time.monotonic() - outcome.approved_at
        except Exception as e:  # reported as a miss, with what was waited for
            outcome.error = f"{type(e).__name__}: {e}"


# -- one run --------------------------------------------------------------------------------------------


@dataclass
class Options:
    clusters: int = 20
    commands: int = 200
    seconds: float = 60.0
    latency_ms: float = 50.0
    processes: int = 2
    baseline: int = 10
    remediations: int | None = None  # default: every cluster whose report offers a change
    required: int = 2
    database: str = "sqlite"


@dataclass
class Result:
    figures: dict[str, Any]
    bookkeeping: list[Check]  # nothing lost: what the smoke test asserts
    targets: list[Check]  # timing and memory: what only the benchmark checks
    lines: list[str]


def measure(options: Options, work: Path) -> Result:
    remediated = [k for k in range(options.clusters) if remediable(k)][: options.remediations]
    with (
        emulated_clusters(
            options.clusters,
            processes=options.processes,
            latency_ms=options.latency_ms,
            work=work,
            build="bench._load_fleet:build_cluster",
        ) as (kubeconfigs, emulators),
        database(options.database, work) as url,
    ):
        config = write_config(work, kubeconfigs, required=options.required)
        migrating.upgrade(url)
        slack = workspace(options.clusters)
        try:
            with serve_process(slack, config, url, work) as bot:
                pid = bot.process.pid
                sampler = RssSampler(
                    pid, lambda: tree_cpu_seconds(pid) + sum(map(cpu_seconds, emulators)) + time.process_time()
                )
                sampler.start()
                try:
                    figures, load, outcomes, window = drive(
                        options, bot=bot, slack=slack, sampler=sampler, remediated=remediated, emulators=emulators
                    )
                finally:
                    sampler.stop()
            view = look(slack, options.clusters)
            for outcome in outcomes:
                for click in outcome.clicks:
                    key = (outcome.cluster, click.user)
                    view.ephemerals[key] = len(slack.ephemerals(channel(outcome.cluster), click.user))
        finally:
            slack.stop()
        stored = read_database(url)
    return judge(
        options, figures=figures, load=load, outcomes=outcomes, view=view, stored=stored, sampler=sampler, window=window
    )


def drive(
    options: Options,
    *,
    bot: Running,
    slack: SlackEmulator,
    sampler: RssSampler,
    remediated: list[int],
    emulators: list[int],
) -> tuple[dict[str, Any], Load, list[Remediation], tuple[float, float]]:
    load = Load(bot, slack, options.clusters)
    figures: dict[str, Any] = {}

    # the baseline: /healthz round trips, then commands one at a time on an idle bot
    health = []
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(50):
        started = time.perf_counter()
        with opener.open(f"{bot.url}/healthz", timeout=5) as response:
            response.read()
        health.append((time.perf_counter() - started) * 1000)
    figures["healthz_ms"] = spread(health)
    idle: list[Sent] = []
    for j in range(options.baseline):
        idle.append(load.command(j % options.clusters, USERS[j % len(USERS)]))
        poll(lambda: look(slack, options.clusters).delivered(load.expected), timeout=60, what="baseline not posted")
    figures["baseline_ack_ms"] = spread([s.ms for s in idle])

    # the load: commands at their planned times, remediation flows started over the minute
    plan: list[tuple[float, int]] = [(i * options.seconds / options.commands, i) for i in range(options.commands)]
    first, last = 0.1 * options.seconds, 0.7 * options.seconds
    starts = [first + r * (last - first) / max(1, len(remediated) - 1) for r in range(len(remediated))]
    outcomes = [Remediation(k) for k in remediated]
    flows: list[threading.Thread] = []
    events = sorted([(t, "command", i) for t, i in plan] + [(t, "remediation", r) for r, t in enumerate(starts)])
    pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="load")
    # the bot's CPU is its own and its workers' (the processes under it)
    pids = {"bot": [bot.process.pid], "emulators": emulators}
    cpu_of = {"bot": tree_cpu_seconds, "emulators": cpu_seconds}
    cpu_before = {name: sum(cpu_of[name](pid) for pid in group) for name, group in pids.items()}
    here_before, machine_before, io_before = time.process_time(), machine_cpu(), io_stalled_seconds()
    begin = time.monotonic()
    for t, kind, i in events:
        delay = begin + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if kind == "command":
            k, user = i % options.clusters, USERS[i % len(USERS)]
            pool.submit(load.command, k, user, planned=begin + t)
        else:
            k = outcomes[i].cluster
            requester = USERS[(i + 3) % len(USERS)]
            approvers = [APPROVERS[(i + a) % len(APPROVERS)] for a in range(options.required + 1)]
            flow = threading.Thread(target=load.remediate, args=(k, requester, approvers, outcomes[i]), daemon=True)
            flow.start()
            flows.append(flow)
    time.sleep(max(0.0, begin + options.seconds - time.monotonic()))
    window = (begin, begin + options.seconds)
    # CPU over the load, in cores: ours, and the whole machine's (other work on it makes the figures noisy)
    figures["cpu_cores"] = {
        name: round((sum(cpu_of[name](pid) for pid in group) - cpu_before[name]) / options.seconds, 2)
        for name, group in pids.items()
    }
    figures["cpu_cores"]["harness"] = round((time.process_time() - here_before) / options.seconds, 2)
    busy, every = (after - before for after, before in zip(machine_cpu(), machine_before, strict=True))
    figures["cpu_cores"]["machine"] = round(busy / every * (os.cpu_count() or 1), 2)
    figures["cpus"] = os.cpu_count()
    io_after = io_stalled_seconds()
    figures["io_stalled_s"] = None if io_before is None or io_after is None else round(io_after - io_before, 2)
    pool.shutdown(wait=True)
    for flow in flows:
        flow.join(timeout=180)
    with suppress(TimeoutError):  # judged afterwards, from what did arrive
        poll(lambda: look(slack, options.clusters).delivered(load.expected), timeout=180, what="not all posted")
    figures["drained_after_s"] = round(time.monotonic() - window[1], 1)
    figures["rss_after_drain_mb"] = round(sampler.samples[-1][1], 1)
    _, pss, processes = tree_memory_mb(bot.process.pid)
    figures["pss_after_drain_mb"], figures["bot_processes"] = round(pss, 1), processes
    return figures, load, outcomes, window


def read_database(url: str) -> dict[str, Any]:
    from bot.services.auditing import verify
    from bot.store.database import Database

    engine = create_engine(url)
    try:
        with engine.connect() as connection:

            def rows(sql: str) -> list[dict[str, Any]]:
                return [dict(row._mapping) for row in connection.execute(text(sql))]

            stored: dict[str, Any] = {
                "runs": rows(
                    "SELECT cluster, namespace, requested_by, incident_id, state, posted_at FROM diagnoses "
                    "WHERE trigger = 'slack'"
                ),
                "incidents": rows("SELECT id, cluster, namespace, slack_channel, slack_thread_ts FROM incidents"),
                "requests": rows(
                    "SELECT id, cluster, action, status, status_reason, required_approvals FROM remediation_requests"
                ),
                "audit": rows("SELECT request_id, event, actor FROM audit_entries WHERE request_id IS NOT NULL"),
            }
    finally:
        engine.dispose()
    db = Database(url)
    try:
        stored["audit_verify"] = verify(db).lines()
    finally:
        db.dispose()
    return stored


def judge(
    options: Options,
    *,
    figures: dict[str, Any],
    load: Load,
    outcomes: list[Remediation],
    view: SlackView,
    stored: dict[str, Any],
    sampler: RssSampler,
    window: tuple[float, float],
) -> Result:
    n = options.clusters
    index = {cluster(k): k for k in range(n)}
    commands = [s for s in load.sent if s.kind == "command"]
    under_load = [s for s in commands if s.late is not None]
    clicks = [s for s in load.sent if s.kind != "command"]
    figures.update(
        {
            "clusters": n,
            "commands": options.commands,
            "seconds": options.seconds,
            "latency_ms": options.latency_ms,
            "database": options.database,
            "command_ack_ms": spread([s.ms for s in under_load]),
            "click_ack_ms": spread([s.ms for s in clicks]) if clicks else None,
            "request_click_ack_ms": spread([s.ms for s in clicks if s.kind == "request"]) if clicks else None,
            "approve_click_ack_ms": spread([s.ms for s in clicks if s.kind == "approve"]) if clicks else None,
            "commands_sent_late_max_ms": round(max(s.late or 0.0 for s in under_load) * 1000, 1),
        }
    )
    base = figures["baseline_ack_ms"]
    figures["ratio_p50_to_baseline_p50"] = round(figures["command_ack_ms"]["p50"] / base["p50"], 2)
    figures["ratio_p99_to_baseline_max"] = round(figures["command_ack_ms"]["p99"] / base["max"], 2)

    # time to the verdict: the verdicts of one (cluster, user) in order, against the commands in order
    waits: list[tuple[float, float]] = []  # (sent at, seconds to the verdict)
    for key, times in view.verdict_times.items():
        sent_at = sorted(s.at for s in commands if (s.cluster, s.user) == key and s.acknowledged)
        waits += [(s, v - s) for s, v in zip(sent_at, sorted(times), strict=False)]
    figures["to_verdict_s"] = spread([w for _, w in waits])
    loaded = sorted(w for w in waits if w[0] >= min(s.at for s in under_load))
    tenth = max(1, len(loaded) // 10)
    figures["to_verdict_first_tenth_p50_s"] = round(statistics.median(w for _, w in loaded[:tenth]), 1)
    figures["to_verdict_last_tenth_p50_s"] = round(statistics.median(w for _, w in loaded[-tenth:]), 1)

    # nothing lost
    acknowledged = sum(s.acknowledged for s in commands)
    runs = stored["runs"]
    run_keys = Counter((index[r["cluster"]], r["requested_by"]) for r in runs)
    verdicts_ok = all(view.verdicts[key] == count for key, count in load.expected.items()) and sum(
        view.verdicts.values()
    ) == sum(load.expected.values())
    terminating = Counter(index[r["cluster"]] for r in runs if r["state"] == "terminating")
    incidents = stored["incidents"]
    threads = {index[i["cluster"]]: i["slack_thread_ts"] for i in incidents}
    reports_ok = all(view.reports[k] == terminating[k] for k in range(n)) and all(
        view.report_threads.get(k, set()) <= {threads.get(k)} for k in range(n)
    )
    unposted = sum(1 for r in runs if r["posted_at"] is None)
    without_incident = sum(1 for r in runs if r["state"] == "terminating" and r["incident_id"] is None)
    incidents_ok = (
        len(incidents) == n
        and {(i["cluster"], i["namespace"]) for i in incidents} == {(cluster(k), namespace_of(k)) for k in range(n)}
        and all(i["slack_thread_ts"] for i in incidents)
    )
    events: dict[int, Counter[str]] = {}
    for entry in stored["audit"]:
        events.setdefault(int(entry["request_id"]), Counter())[str(entry["event"])] += 1
    once = {"backed_up": 1, "dry_run": 1, "execution_started": 1, "applied": 1}
    requests = stored["requests"]
    executed_once = [
        r
        for r in requests
        if r["status"] == "applied"
        and all(events.get(r["id"], Counter())[e] == c for e, c in once.items())
        and events[r["id"]]["approved"] == r["required_approvals"]
        and events[r["id"]]["failed"] == 0
        and view.outcome_lines[r["id"]] == 1
    ]
    filed = [o for o in outcomes if o.request_id is not None]
    # every Approve click counted as an approval, or answered privately (the change is being made, or made)
    approvals = [(o, c) for o in outcomes for c in o.clicks if c.kind == "approve"]
    counted = {(int(e["request_id"]), str(e["actor"])) for e in stored["audit"] if e["event"] == "approved"}
    answered = sum(
        1 for o, c in approvals if (o.request_id, c.user) in counted or view.ephemerals[(o.cluster, c.user)] > 0
    )
    figures.update(
        {
            "commands_acknowledged": acknowledged,
            "verdicts_in_slack": sum(view.verdicts.values()),
            "reports_in_threads": sum(view.reports.values()),
            "runs_in_database": len(runs),
            "runs_unposted": unposted,
            "incidents": len(incidents),
            "requests_filed": len(requests),
            "requests_executed_once": len(executed_once),
            "requests": [
                {
                    "id": r["id"],
                    "cluster": r["cluster"],
                    "action": r["action"],
                    "status": r["status"],
                    "reason": r["status_reason"],
                    "audit": dict(events.get(r["id"], Counter())),
                }
                for r in requests
            ],
            "remediation_errors": [f"{cluster(o.cluster)}: {o.error}" for o in outcomes if o.error],
            "approval_to_outcome_s": spread([o.done_after for o in outcomes if o.done_after is not None])
            if any(o.done_after is not None for o in outcomes)
            else None,
            "audit_verify": stored["audit_verify"],
        }
    )
    total = len(load.sent)
    expected_runs = sum(load.expected.values())
    bookkeeping: list[Check] = [
        (f"{acknowledged} of {len(commands)} commands acknowledged", acknowledged == len(commands), "all"),
        (
            f"{sum(s.acknowledged for s in clicks)} of {len(clicks)} clicks acknowledged",
            all(s.acknowledged for s in clicks),
            "all",
        ),
        (
            f"{sum(view.verdicts.values())} verdicts in Slack for {expected_runs} commands, each for its asker",
            verdicts_ok,
            "one each",
        ),
        (
            f"{sum(view.reports.values())} reports in the incidents' threads for {sum(terminating.values())} runs "
            "on a terminating namespace",
            reports_ok,
            "one each",
        ),
        (
            f"{len(runs)} runs in the database for {expected_runs} commands, {unposted} not marked posted, "
            f"{without_incident} without their incident",
            run_keys == load.expected and unposted == 0 and without_incident == 0,
            "all, posted",
        ),
        (f"{len(incidents)} incidents, one per stuck namespace, each with its thread", incidents_ok, f"{n}"),
        (
            f"{len(executed_once)} of {len(outcomes)} approved requests executed exactly once "
            f"({len(filed)} filed through Slack)",
            len(executed_once) == len(outcomes) == len(requests) and not figures["remediation_errors"],
            "all",
        ),
        (
            f"{answered} of {len(approvals)} Approve clicks counted as approvals or answered privately",
            answered == len(approvals),
            "all",
        ),
        (stored["audit_verify"][0], stored["audit_verify"][0].startswith("audit trail intact"), "intact"),
        (
            f"{total} requests sent to the bot, none failed to connect",
            all(s.delivery.error is None for s in load.sent),
            "none",
        ),
    ]

    # memory over the minute of load
    begin, end = window
    middle = (begin + end) / 2
    start_mb, mid_mb, end_mb = sampler.at(begin), sampler.at(middle), sampler.at(end)
    first_half, second_half = mid_mb - start_mb, end_mb - mid_mb
    allowance = max(first_half / 2, MEMORY_ALLOWANCE_MB)
    figures.update(
        {
            "rss_after_startup_mb": round(sampler.samples[0][1], 1),
            "rss_load_start_mb": round(start_mb, 1),
            "rss_load_mid_mb": round(mid_mb, 1),
            "rss_load_end_mb": round(end_mb, 1),
            "rss_growth_first_half_mb": round(first_half, 1),
            "rss_growth_second_half_mb": round(second_half, 1),
            "rss_slope_second_half_mb_per_min": round(sampler.slope_mb_per_min(middle, end), 2),
            "rss_end_to_startup_ratio": round(end_mb / sampler.samples[0][1], 2),
            "rss_samples": [[round(t - begin, 1), round(mb, 1)] for t, mb in sampler.samples],
            "other_processes_cores_per_second": [round(c, 2) for c in sampler.others_cores(begin, end)],
        }
    )
    cmd, click = figures["command_ack_ms"], figures["click_ack_ms"]
    targets: list[Check] = [
        (f"command ack p99 {cmd['p99']} ms", cmd["p99"] < 100, "< 100 ms"),
        *([(f"click ack p99 {click['p99']} ms", click["p99"] < 100, "< 100 ms")] if click else []),
        (
            f"memory steady: RSS {second_half:+.1f} MB over the second half of the load, "
            f"{first_half:+.1f} MB over the first",
            second_half <= allowance,
            f"second half <= max(first half / 2, {MEMORY_ALLOWANCE_MB:g} MB)",
        ),
        (
            f"memory bounded: RSS {end_mb:.0f} MB at the end of the load, the bot and its workers together",
            end_mb < MEMORY_LIMIT_MB,
            f"< {MEMORY_LIMIT_MB:g} MB",
        ),
    ]

    lines = [
        f"{options.commands} /nsstuck commands in {options.seconds:g} s (open loop) over {n} clusters with "
        f"{options.latency_ms:g} ms per request, {len(USERS)} users; {len(outcomes)} remediation requests, "
        f"{options.required + 1} approvers clicking at once ({options.required} required); {options.database}",
        f"  baseline (idle, one at a time): command ack p50 {base['p50']} ms, max {base['max']} ms "
        f"({base['n']} commands); /healthz p50 {figures['healthz_ms']['p50']} ms",
        f"  commands under load: ack p50 {cmd['p50']} ms, p95 {cmd['p95']} ms, p99 {cmd['p99']} ms, "
        f"max {cmd['max']} ms ({figures['ratio_p50_to_baseline_p50']}x the idle p50; p99 "
        f"{figures['ratio_p99_to_baseline_max']}x the idle max)",
    ]
    if click:
        lines.append(
            f"  clicks under load ({click['n']}): ack p50 {click['p50']} ms, p95 {click['p95']} ms, "
            f"p99 {click['p99']} ms, max {click['max']} ms (Request: p50 {figures['request_click_ack_ms']['p50']} ms, "
            f"max {figures['request_click_ack_ms']['max']} ms; Approve, {options.required + 1} at once: p50 "
            f"{figures['approve_click_ack_ms']['p50']} ms, max {figures['approve_click_ack_ms']['max']} ms)"
        )
    verdict = figures["to_verdict_s"]
    lines += [
        f"  open loop kept: commands sent at most {figures['commands_sent_late_max_ms']} ms after their planned time",
        f"  verdict after the command: p50 {verdict['p50']:.1f} s, p95 {verdict['p95']:.1f} s, "
        f"max {verdict['max']:.1f} s (p50 {figures['to_verdict_first_tenth_p50_s']} s for the first tenth of the "
        f"commands, {figures['to_verdict_last_tenth_p50_s']} s for the last); everything posted "
        f"{figures['drained_after_s']} s after the last command",
    ]
    if figures["approval_to_outcome_s"]:
        done = figures["approval_to_outcome_s"]
        lines.append(f"  approvals to the outcome in the thread: p50 {done['p50']:.1f} s, max {done['max']:.1f} s")
    lines.append(
        f"  RSS: {figures['rss_after_startup_mb']:.0f} MB after start-up, {start_mb:.0f} / {mid_mb:.0f} / {end_mb:.0f} "
        f"MB at the start / middle / end of the load ({figures['rss_end_to_startup_ratio']}x start-up); "
        f"slope over the second half {figures['rss_slope_second_half_mb_per_min']:+.1f} MB/min; "
        f"{figures['rss_after_drain_mb']:.0f} MB once drained (summed over the bot's {figures['bot_processes']} "
        f"processes, its workers' shared pages counted in each; PSS {figures['pss_after_drain_mb']:.0f} MB)"
    )
    cpu, others = figures["cpu_cores"], figures["other_processes_cores_per_second"] or [0.0]
    lines.append(
        f"  CPU over the load, in cores: the bot {cpu['bot']}, the emulated clusters {cpu['emulators']}, this "
        f"process (Slack emulator, senders) {cpu['harness']}; the whole machine {cpu['machine']} of {figures['cpus']}; "
        f"other processes {statistics.fmean(others):.2f} on average, {max(others):.2f} at most "
        f"({sum(c >= 0.5 for c in others)} s at 0.5 or more: the figures are noisy then)"
        + (
            f"; every task stalled on I/O for {figures['io_stalled_s']} s of it (database commits wait then)"
            if figures["io_stalled_s"] is not None
            else ""
        )
    )
    for error in figures["remediation_errors"]:
        lines.append(f"  problem: {error}")
    return Result(figures, bookkeeping, targets, lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0, help="over which the commands are spread")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="added to every request to a cluster")
    parser.add_argument("--server-processes", type=int, default=2, help="emulator processes serving the clusters")
    parser.add_argument("--baseline", type=int, default=10, help="commands sent one at a time on the idle bot")
    parser.add_argument("--remediations", type=int, help="requests filed and approved (default: one per cluster "
                        "whose report offers a change)")  # fmt: skip
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (the bot's log)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    options = Options(
        clusters=args.clusters,
        commands=args.commands,
        seconds=args.seconds,
        latency_ms=args.latency_ms,
        processes=args.server_processes,
        baseline=args.baseline,
        remediations=args.remediations,
        database=args.database,
    )
    work = Path(tempfile.mkdtemp(prefix="nsstuck-bench-load-"))
    with nullcontext() if args.keep else _removed(work):
        started = time.monotonic()
        result = measure(options, work)
        for line in result.lines:
            print(line)
        print(f"  (the whole benchmark took {time.monotonic() - started:.0f} s; the work directory: {work})")
    return finish(result.figures, result.targets + result.bookkeeping, args.json)


@contextmanager
def _removed(path: Path) -> Iterator[None]:
    import shutil

    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
