"""`make demo`: the real bot against the emulators, and the conversation as a person reads it.

One emulated cluster per seed article (tests/fakes/kubeapi scenarios), the Slack emulator, and
`nsstuck serve` in HTTP mode; a user types `/nsstuck <cluster> <namespace>` for each, and the
channel and thread are printed.
"""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.store import migrating
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import HttpDriver
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, populate_workspace
from tests.slack._bot import serve_process

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
    try:
        with serve_process(slack, work / "nsstuck.yaml", database, work) as bot:
            converse(slack, bot.driver, [(name, namespace) for name, namespace, _ in clusters])
    finally:
        slack.stop()
        for _, _, emu in clusters:
            emu.stop()
    return 0


def converse(slack: SlackEmulator, driver: HttpDriver, asks: list[tuple[str, str]]) -> None:
    """Type each command as alice and print what the channel and the thread show."""
    for cluster, namespace in asks:
        print(f"\n{'=' * 100}\nalice in #nsstuck-ops: /nsstuck {cluster} {namespace}")
        ack = driver.slash_command("/nsstuck", f"{cluster} {namespace}", user=ALICE, channel=OPS_CHANNEL)
        print(f"  (only alice sees, after {ack.elapsed * 1000:.0f} ms) {ack.body}")
        verdict = slack.wait_for_message(OPS_CHANNEL, namespace, timeout=30)
        print(f"\nnsstuck: {slack.render(verdict)}")
        slack.wait_for(lambda v=verdict: slack.thread(OPS_CHANNEL, v["ts"]) or None, timeout=30)
        time.sleep(1.5)  # let every part of a long report arrive
        for reply in slack.thread(OPS_CHANNEL, verdict["ts"]):
            print("\n  | " + slack.render(reply).replace("\n", "\n  | "))


if __name__ == "__main__":
    raise SystemExit(main())
