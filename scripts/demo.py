"""`make demo`: the real bot against the emulators, and the conversation as a person reads it.

One emulated cluster per seed article (tests/fakes/kubeapi scenarios), the Slack emulator, and
`nsstuck serve` in HTTP mode; a user types `/nsstuck <cluster> <namespace>` for each, and the
channel and thread are printed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from bot.store import migrating
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, populate_workspace

REPO = Path(__file__).resolve().parents[1]
DEMO = [
    ("seed000", "seed000-metrics-missing-endpoints"),
    ("seed001", "seed001-metrics-unreachable"),
    ("seed002", "seed002-configmap-finalizer"),
    ("seed003-kubesphere", "seed003-kubesphere-namespace-finalizer"),
    ("seed003-kiali", "seed003-kiali-orphaned-finalizer"),
    ("seed003-adapter", "seed003-prometheus-adapter-service-not-found"),
]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="nsstuck-demo-"))
    clusters = []
    lines = ["clusters:"]
    for name, scenario in DEMO:
        emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
        apply_scenario(emu, scenario)
        emu.write_kubeconfig(work / f"{name}.kubeconfig", context=name)
        lines.append(f"  - name: {name}\n    kubeconfig: {name}.kubeconfig")
        clusters.append((name, SCENARIOS[scenario].expected.namespace, emu))
    (work / "nsstuck.yaml").write_text("\n".join(lines) + "\n")
    database = f"sqlite:///{work / 'demo.db'}"
    migrating.upgrade(database)
    slack = SlackEmulator().start()
    populate_workspace(slack)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    env.update(
        NSSTUCK_CONFIG=str(work / "nsstuck.yaml"),
        NSSTUCK_DATABASE_URL=database,
        NSSTUCK_HTTP_PORT=str(port),
        NSSTUCK_SLACK_API_URL=slack.api_url,
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_SIGNING_SECRET=slack.signing_secret,
    )
    bot = subprocess.Popen([sys.executable, "-m", "bot", "serve"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        driver = slack.http_driver(f"http://127.0.0.1:{port}/slack/events")
        for name, namespace, _ in clusters:
            print(f"\n{'=' * 100}\nalice in #nsstuck-ops: /nsstuck {name} {namespace}")
            ack = driver.slash_command("/nsstuck", f"{name} {namespace}", user=ALICE, channel=OPS_CHANNEL)
            print(f"  (only alice sees, after {ack.elapsed * 1000:.0f} ms) {ack.body}")
            verdict = slack.wait_for_message(OPS_CHANNEL, namespace, timeout=30)
            print(f"\nnsstuck: {slack.render(verdict)}")
            time.sleep(1.5)
            for reply in slack.thread(OPS_CHANNEL, verdict["ts"]):
                print("\n  | " + slack.render(reply).replace("\n", "\n  | "))
    finally:
        bot.send_signal(signal.SIGTERM)
        bot.wait(timeout=20)
        slack.stop()
        for _, _, emu in clusters:
            emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
