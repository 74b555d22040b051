"""Benchmark: acknowledging /nsstuck commands, one at a time and fifty at once, in the same run.

    make bench            (or: PYTHONPATH=. .venv/bin/python -m bench.slack)

The real `nsstuck serve` (HTTP mode, its diagnosis worker processes started) against the Slack
emulator, which keeps Slack's pace for chat.postMessage (one message per second per channel), and the
Kubernetes emulator in a process of its own (at the lower scheduling priority the bot's diagnosis
workers run at: it stands for a remote API server), with 20 ms added to every request. The bot's
per-user and per-channel command limits are raised for the run. In the same run:

- idle: commands sent one at a time, each once the verdict of the one before was posted (10 stuck
  namespaces): the acknowledgement of a command on an idle bot, the baseline;
- burst: 50 commands sent at the same instant over 10 channels, for 50 other stuck namespaces.

Each acknowledgement (the bot's HTTP answer to the signed command) is split by what the bot says of it
(its Server-Timing header): recording the request against replays (a database write), handling it
(Bolt and the listener, up to the acknowledgement), and the rest, waiting (for a free server thread,
the interpreter, the network). Also: every verdict delivered and when, the bot's CPU per command (the
bot and its workers), their memory after the run, and the share of the machine's CPU its host took
(steal). Targets: burst p99 under 100 ms and within 5x the idle p50 (Slack allows 3,000 ms); every
verdict delivered. With more than 10% steal, the latency targets print "not measured".
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from bench._proc import cpu_seconds, cpu_ticks, machine_cpu, stolen_share, tree_cpu_seconds, tree_memory_mb
from bench._report import Check, finish, percentile
from bot.store import migrating
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery
from tests.fakes.slackapi.pytest_plugin import ALICE, populate_workspace
from tests.slack._bot import Running, serve_process

REPO = Path(__file__).resolve().parents[1]
STEAL_LIMIT = 0.10
TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


def spread(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


def split(deliveries: list[Delivery]) -> dict[str, dict[str, float]]:
    """Each acknowledgement's time in its parts: recording the replay, handling, and the rest (waiting)."""
    parts: dict[str, list[float]] = {"replay": [], "handle": [], "waiting": []}
    for delivery in deliveries:
        said = {k: float(v) for k, v in TIMING.findall(delivery.headers.get("Server-Timing", ""))}
        replay, handle = said.get("replay", 0.0), said.get("handle", 0.0)
        parts["replay"].append(replay)
        parts["handle"].append(handle)
        parts["waiting"].append(max(0.0, delivery.elapsed * 1000 - replay - handle))
    return {name: spread(values) for name, values in parts.items()}


def stuck_namespaces(http: KubeHTTP, names: list[str]) -> None:
    for name in names:
        http.post("/api/v1/namespaces", {"metadata": {"name": name}})
        http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "held", "finalizers": ["x.io/y"]}})
        http.delete(f"/api/v1/namespaces/{name}")
    # the namespace controller (real clock) marks the content for deletion within a few seconds
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = http.get(f"/api/v1/namespaces/{names[-1]}/configmaps/held")
        if held.get("metadata", {}).get("deletionTimestamp"):
            return
        time.sleep(0.5)


def verdicts(slack: SlackEmulator) -> dict[str, float]:
    """namespace -> when its verdict was posted (the first one)."""
    found: dict[str, float] = {}
    for call in slack.calls("chat.postMessage"):
        text = str(call.params.get("text", ""))
        if call.status == 200 and not call.params.get("thread_ts") and ": stuck" in text:
            found.setdefault(text.split(":", maxsplit=1)[0].rsplit("/", maxsplit=1)[-1], call.time)
    return found


def posted(slack: SlackEmulator, namespace: str) -> bool | None:
    return namespace in verdicts(slack) or None


def metric(bot: Running, name: str) -> float:
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commands", type=int, default=50, help="sent at once in the burst")
    parser.add_argument("--channels", type=int, default=10)
    parser.add_argument("--idle", type=int, default=10, help="sent one at a time first")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--workers", type=int, help="NSSTUCK_DIAGNOSIS_WORKERS (default: the bot's own choice)")
    parser.add_argument("--http-threads", type=int, help="NSSTUCK_HTTP_THREADS (default: the bot's default)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="nsstuck-slack-bench-"))
    # the cluster runs in a process of its own, so that its load does not distort the measurement
    kube = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.kubeapi", "--kubeconfig", str(work / "bench.kubeconfig"),
         "--latency-ms", str(args.latency_ms)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    # the cluster stands for a remote API server, which takes no CPU of the bot's machine: its emulator
    # runs at the workers' lower priority, so that the bot's threads are not queued behind it either
    os.setpriority(os.PRIO_PROCESS, kube.pid, 10)
    assert kube.stdout is not None
    url = kube.stdout.readline().split()[-1]
    kube.stdout.readline()
    token = yaml.safe_load((work / "bench.kubeconfig").read_text())["users"][0]["user"]["token"]
    idle_names = [f"idle-{i:03d}" for i in range(args.idle)]
    burst_names = [f"team-{i:03d}" for i in range(args.commands)]
    stuck_namespaces(KubeHTTP(url, token), idle_names + burst_names)
    (work / "nsstuck.yaml").write_text("clusters:\n  - name: bench\n    kubeconfig: bench.kubeconfig\n")
    database = f"sqlite:///{work / 'bench.db'}"
    migrating.upgrade(database)

    slack = SlackEmulator(post_message_burst=1).start()
    populate_workspace(slack)
    channels = [f"C0BENCH{i:02d}" for i in range(args.channels)]
    for channel in channels:
        slack.add_channel(channel, channel.lower(), members=[ALICE, slack.identity.bot_user_id])
    env = {"NSSTUCK_DIAGNOSIS_WORKERS": str(args.workers)} if args.workers else {}
    if args.http_threads:
        env["NSSTUCK_HTTP_THREADS"] = str(args.http_threads)
    figures: dict[str, Any] = {"commands": args.commands, "channels": args.channels, "latency_ms": args.latency_ms}
    try:
        with serve_process(slack, work / "nsstuck.yaml", database, work, extra_env=env) as bot:
            pid = bot.process.pid
            started = time.monotonic()
            while metric(bot, "nsstuck_workers_alive") < (args.workers or 2) and time.monotonic() - started < 30:
                time.sleep(0.1)  # the workers start in the background: measured once they are up
            figures["workers"] = int(metric(bot, "nsstuck_workers_alive"))
            ticks, cpu_before = cpu_ticks(), tree_cpu_seconds(pid)
            ours_before = cpu_before + cpu_seconds(kube.pid) + time.process_time()
            machine_before, clock_before = machine_cpu(), time.monotonic()

            idle: list[Delivery] = []
            for i, name in enumerate(idle_names):
                idle.append(bot.driver.slash_command("/nsstuck", f"bench {name}", user=ALICE,
                                                     channel=channels[i % len(channels)]))  # fmt: skip
                slack.wait_for(partial(posted, slack, name), timeout=60, message=f"no verdict on {name}")

            barrier = threading.Barrier(len(burst_names))
            burst: list[Delivery | None] = [None] * len(burst_names)

            def send(i: int) -> None:
                barrier.wait()
                burst[i] = bot.driver.slash_command(
                    "/nsstuck", f"bench {burst_names[i]}", user=ALICE, channel=channels[i % len(channels)]
                )

            senders = [threading.Thread(target=send, args=(i,)) for i in range(len(burst_names))]
            sent_at = time.time()
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
            times = slack.wait_for(
                lambda: found if all(n in (found := verdicts(slack)) for n in burst_names) else None,
                timeout=600,
                message="not every verdict arrived",
            )
            stolen = stolen_share(ticks, cpu_ticks())
            bot_cpu = tree_cpu_seconds(pid) - cpu_before
            # what other processes of the machine took meanwhile (other work on it makes latency noisy)
            ours = tree_cpu_seconds(pid) + cpu_seconds(kube.pid) + time.process_time() - ours_before
            busy, every = (after - before for after, before in zip(machine_cpu(), machine_before, strict=True))
            seconds = time.monotonic() - clock_before
            others = max(0.0, busy / every * (os.cpu_count() or 1) - ours / seconds) if every else 0.0
            rss, pss, processes = tree_memory_mb(pid)
    finally:
        slack.stop()
        kube.terminate()
        kube.wait(timeout=20)

    done = [d for d in burst if d is not None]
    idle_ms = [d.elapsed * 1000 for d in idle]
    burst_ms = [d.elapsed * 1000 for d in done]
    to_verdict = [times[name] - sent_at for name in burst_names if name in times]
    figures.update(
        {
            "idle_ack_ms": spread(idle_ms),
            "burst_ack_ms": spread(burst_ms),
            "idle_split_ms": split(idle),
            "burst_split_ms": split(done),
            "burst_p99_to_idle_p50": round(percentile(burst_ms, 99) / statistics.median(idle_ms), 2),
            "burst_verdict_p50_s": round(statistics.median(to_verdict), 2),
            "burst_verdict_max_s": round(max(to_verdict), 2),
            "verdicts_delivered": len(to_verdict) + len(idle),
            "statuses": sorted({d.status for d in [*idle, *done]}),
            # the work behind the figures (the bot and its workers), which the host's load does not
            # stretch as it does latency
            "bot_cpu_ms_per_command": round(bot_cpu * 1000 / (len(idle) + len(done)), 1),
            "bot_rss_mb_after": round(rss, 1),
            "bot_pss_mb_after": round(pss, 1),
            "bot_processes": processes,
            "cpu_stolen_by_host": round(stolen, 3),
            "other_processes_cores": round(others, 2),
        }
    )
    burst_p99, idle_p50 = figures["burst_ack_ms"]["p99"], figures["idle_ack_ms"]["p50"]
    timing: list[Check] = [
        (f"burst ack p99 {burst_p99} ms", burst_p99 < 100, "< 100 ms"),
        (f"burst ack p99 {figures['burst_p99_to_idle_p50']}x the idle p50", burst_p99 <= 5 * idle_p50, "<= 5x"),
    ]
    checks: list[Check] = [
        (
            f"{figures['verdicts_delivered']} of {len(idle) + len(burst_names)} verdicts delivered",
            figures["verdicts_delivered"] == len(idle) + len(burst_names),
            "all",
        ),
        ("every command acknowledged with 200", figures["statuses"] == [200], "all 200"),
    ]
    print(f"/nsstuck acknowledgements, {figures['workers']} diagnosis workers, cluster latency {args.latency_ms:g} ms")
    for name, key, count in (("idle", "idle", len(idle)), ("burst", "burst", len(done))):
        ack, parts = figures[f"{key}_ack_ms"], figures[f"{key}_split_ms"]
        what = "one at a time" if key == "idle" else f"all at once over {args.channels} channels"
        print(f"  {name} ({count} commands, {what}): ack p50 {ack['p50']} ms, p99 {ack['p99']} ms, max {ack['max']} ms")
        print(
            f"    recording the replay p50 {parts['replay']['p50']} ms, p99 {parts['replay']['p99']} ms; "
            f"handling p50 {parts['handle']['p50']} ms, p99 {parts['handle']['p99']} ms; "
            f"waiting p50 {parts['waiting']['p50']} ms, p99 {parts['waiting']['p99']} ms"
        )
    verdict_p50, verdict_max = figures["burst_verdict_p50_s"], figures["burst_verdict_max_s"]
    print(f"  burst to verdict: p50 {verdict_p50} s, max {verdict_max} s (Slack allows 1 post/s/channel)")
    print(f"  bot CPU (bot and workers): {figures['bot_cpu_ms_per_command']} ms per command, to its verdict")
    print(f"  bot memory after the run: RSS {rss:.0f} MB summed over its {processes} processes (PSS {pss:.0f} MB)")
    print(
        f"  noise: {stolen:.1%} of the machine's CPU time was taken by its host (steal); other processes of the "
        f"machine used {others:.2f} of its {os.cpu_count()} cores meanwhile"
    )
    if stolen <= STEAL_LIMIT:
        checks = timing + checks
    else:
        for text, _, goal in timing:
            print(f"  not measured: {text} (target {goal}): the host took {stolen:.0%} of the CPU")
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
