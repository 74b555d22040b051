"""Benchmark: fifty concurrent /nsstuck commands, acknowledgement latency and time to the verdict.

    make bench            (or: PYTHONPATH=. .venv/bin/python -m bench.slack)

The real `nsstuck serve` (HTTP mode) against the Slack emulator, which enforces chat.postMessage's
one message per second per channel, and the Kubernetes emulator with 20 ms per request. Fifty
commands for fifty stuck namespaces are sent at once over ten channels. Targets: p99 ack under
100 ms (Slack allows 3,000 ms), every verdict delivered.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from bench._proc import cpu_seconds, cpu_ticks, stolen_share
from bench._report import finish, percentile
from bot.store import migrating
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, populate_workspace
from tests.slack._bot import serve_process

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--channels", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="nsstuck-slack-bench-"))
    # the cluster runs in a process of its own, so that its load does not distort the measurement
    kube = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.kubeapi", "--kubeconfig", str(work / "bench.kubeconfig"),
         "--latency-ms", str(args.latency_ms)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert kube.stdout is not None
    url = kube.stdout.readline().split()[-1]
    kube.stdout.readline()
    token = yaml.safe_load((work / "bench.kubeconfig").read_text())["users"][0]["user"]["token"]
    http = KubeHTTP(url, token)
    names = [f"team-{i:03d}" for i in range(args.commands)]
    for name in names:
        http.post("/api/v1/namespaces", {"metadata": {"name": name}})
        http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "held", "finalizers": ["x.io/y"]}})
        http.delete(f"/api/v1/namespaces/{name}")
    # the namespace controller (real clock) marks the content for deletion within a few seconds
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = http.get(f"/api/v1/namespaces/{names[-1]}/configmaps/held")
        if held.get("metadata", {}).get("deletionTimestamp"):
            break
        time.sleep(0.5)
    (work / "nsstuck.yaml").write_text("clusters:\n  - name: bench\n    kubeconfig: bench.kubeconfig\n")
    database = f"sqlite:///{work / 'bench.db'}"
    migrating.upgrade(database)

    slack = SlackEmulator(post_message_burst=1).start()
    populate_workspace(slack)
    channels = [f"C0BENCH{i:02d}" for i in range(args.channels)]
    for channel in channels:
        slack.add_channel(channel, channel.lower(), members=[ALICE, slack.identity.bot_user_id])
    try:
        with serve_process(slack, work / "nsstuck.yaml", database, work) as bot:
            asks = [(name, channels[i % len(channels)]) for i, name in enumerate(names)]
            started = time.time()
            cpu_before, ticks_before = cpu_seconds(bot.process.pid), cpu_ticks()
            with ThreadPoolExecutor(max_workers=len(asks)) as pool:
                deliveries = list(
                    pool.map(
                        lambda a: bot.driver.slash_command("/nsstuck", f"bench {a[0]}", user=ALICE, channel=a[1]), asks
                    )
                )

            def verdict_times() -> dict[str, float] | None:
                found: dict[str, float] = {}
                for call in slack.calls("chat.postMessage"):
                    text = str(call.params.get("text", ""))
                    if call.status == 200 and not call.params.get("thread_ts") and ": stuck" in text:
                        found[text.split(":", maxsplit=1)[0].rsplit("/", maxsplit=1)[-1]] = call.time
                return found if len(found) >= len(names) else None

            times = slack.wait_for(verdict_times, timeout=600, message="not every verdict arrived")
            bot_cpu, stolen = cpu_seconds(bot.process.pid) - cpu_before, stolen_share(ticks_before, cpu_ticks())
    finally:
        slack.stop()
        kube.terminate()
        kube.wait(timeout=20)

    acks = [d.elapsed * 1000 for d in deliveries]
    to_verdict = [times[name] - started for name in names if name in times]
    figures = {
        "commands": args.commands,
        "channels": args.channels,
        "latency_ms": args.latency_ms,
        "ack_p50_ms": round(statistics.median(acks), 1),
        "ack_p99_ms": round(percentile(acks, 99), 1),
        "ack_max_ms": round(max(acks), 1),
        "verdict_p50_s": round(statistics.median(to_verdict), 2),
        "verdict_max_s": round(max(to_verdict), 2),
        "verdicts_delivered": len(to_verdict),
        "statuses": sorted({d.status for d in deliveries}),
        # the work behind the figures, which the host's load does not stretch as it does latency
        "bot_cpu_ms_per_command": round(bot_cpu * 1000 / args.commands, 1),
        "cpu_stolen_by_host": round(stolen, 3),
    }
    checks = [
        (f"ack p99 {figures['ack_p99_ms']} ms", figures["ack_p99_ms"] < 100, "< 100 ms"),
        (f"{len(to_verdict)} of {len(names)} verdicts delivered", len(to_verdict) == len(names), "all"),
        ("every command acknowledged with 200", figures["statuses"] == [200], "all 200"),
    ]
    print(f"{args.commands} concurrent /nsstuck commands over {args.channels} channels, cluster latency "
          f"{args.latency_ms:g} ms")  # fmt: skip
    print(
        f"  ack:        p50 {figures['ack_p50_ms']} ms, p99 {figures['ack_p99_ms']} ms, max {figures['ack_max_ms']} ms"
    )
    limit = "Slack allows 1 post/s/channel"
    print(f"  to verdict: p50 {figures['verdict_p50_s']} s, max {figures['verdict_max_s']} s ({limit})")
    print(f"  bot CPU:    {figures['bot_cpu_ms_per_command']} ms per command, to its verdict")
    print(f"  noise:      {stolen:.0%} of the machine's CPU time taken by its host (past ~10% latency means little)")
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
