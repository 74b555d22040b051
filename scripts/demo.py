"""`make demo`: the real bot against the emulators, and the conversation as a person reads it.

One emulated cluster per seed article (tests/fakes/kubeapi scenarios), the Slack emulator, and
`nsstuck serve` in HTTP mode; a user types `/nsstuck <cluster> <namespace>` for each, and the
channel and thread are printed. Then a remediation on seed002, the one cluster with approvers:
alice requests the first remedy, her own approval is refused, bob approves, and the thread shows the
change and its verified outcome.

    PYTHONPATH=. .venv/bin/python scripts/demo.py [--scenario-states DIR]

Each cluster is built from its scenario (`apply_scenario_once`); with `--scenario-states`, a state a test
run saved in DIR (tests/fakes/kubeapi/state_files.py) is restored instead of built again, as the test of
the demo does with its run's folder (`tests/demo/test_demo.py`).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.store import migrating
from tests.approvals._flow import Flow
from tests.fakes.kubeapi import Emulator, FakeClock, state_files
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario_once, run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import HttpDriver
from tests.fakes.slackapi.pytest_plugin import ALICE, APPROVERS, BOB, OPS_CHANNEL, populate_workspace
from tests.slack._bot import serve_process

DEMO = [
    ("seed000", "seed000-metrics-missing-endpoints"),
    ("seed001", "seed001-metrics-unreachable"),
    ("seed002", "seed002-configmap-finalizer"),
    ("seed003-kubesphere", "seed003-kubesphere-namespace-finalizer"),
    ("seed003-kiali", "seed003-kiali-orphaned-finalizer"),
    ("seed003-adapter", "seed003-prometheus-adapter-service-not-found"),
]
# the cluster whose first remedy is requested and approved after the conversation, and that remedy
REMEDIATE = ("seed002", "remove_finalizer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the real bot against the emulators: the demo conversation")
    parser.add_argument("--scenario-states", type=Path, help="a test run's folder of saved scenario states")
    args = parser.parse_args(argv)
    if args.scenario_states is not None:
        state_files.share_states_in(args.scenario_states)
    work = Path(tempfile.mkdtemp(prefix="nsstuck-demo-"))
    clusters = []
    lines = ["clusters:"]
    for name, scenario in DEMO:
        emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0).start()
        apply_scenario_once(emu, scenario)
        emu.write_kubeconfig(work / f"{name}.kubeconfig", context=name)
        lines.append(f"  - name: {name}\n    kubeconfig: {name}.kubeconfig")
        if name == REMEDIATE[0]:
            lines.append(f"    approvers: [{APPROVERS}]\n    required_approvals: 1")
        clusters.append((name, SCENARIOS[scenario].expected.namespace, emu))
    (work / "nsstuck.yaml").write_text("\n".join(lines) + "\n")
    database = f"sqlite:///{work / 'demo.db'}"
    migrating.upgrade(database)
    slack = SlackEmulator().start()
    populate_workspace(slack)
    try:
        with serve_process(slack, work / "nsstuck.yaml", database, work) as bot:
            converse(slack, bot.driver, [(name, namespace) for name, namespace, _ in clusters])
            [(namespace, emu)] = [(ns, emu) for name, ns, emu in clusters if name == REMEDIATE[0]]
            remediate(Flow(bot, slack, emu, database, namespace), REMEDIATE[0], REMEDIATE[1])
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


def remediate(flow: Flow, cluster: str, action: str) -> None:
    """alice requests `action` in the thread of the namespace's report and approves it herself (refused),
    bob approves; the cluster runs on until the namespace is gone, and the thread is printed."""
    print(f"\n{'=' * 100}\nalice in the thread of {cluster} / {flow.namespace}: clicks Request fix 1")
    request = flow.request(action)
    print("\n  | " + flow.slack.render(request).replace("\n", "\n  | "))
    request_id = int(flow.requests()[-1]["id"])

    print(f"\nalice clicks Approve on request #{request_id}")
    flow.vote(request_id, ALICE)
    print(f"  (only alice sees) {flow.ephemeral(ALICE, 'asked for this change')}")

    print(f"\nbob clicks Approve on request #{request_id}")
    flow.vote(request_id, BOB)
    flow.wait_status(request_id, "applied", "failed", "stale")
    run_for(flow.kube, 60)  # the namespace controller finishes what the change let it finish
    flow.wait_thread(f"after remediation #{request_id}", timeout=60)  # the follow-up's verdict, whichever
    thread = flow.slack.thread(OPS_CHANNEL, flow.thread_ts())
    print("\nthe thread, from the request on:")
    for reply in thread[[m["ts"] for m in thread].index(request["ts"]) :]:
        print("\n  | " + flow.slack.render(reply).replace("\n", "\n  | "))


if __name__ == "__main__":
    raise SystemExit(main())
