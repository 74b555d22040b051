"""Issue 36, finding 6: a digest is scoped like a command. A digest that names no cluster covers only
the clusters its channel may use (a cluster kept to other channels by its `channels:` is never in
it), and `nsstuck config check` warns, with the key and its line, where a digest names a cluster its
channel may not use (valid, exit 0, but said). Through the real CLI, against the Kubernetes emulator
and the Slack emulator."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import run_nsstuck
from tests.digests.test_digest_cli import setup_digest
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL, SECOND_CHANNEL

# three names for the one emulated cluster: one kept to the digest's channel, one kept to another
# channel, one open to every channel
CONFIG = (
    "clusters:\n"
    f"  - {{name: ops-eu, kubeconfig: prod.kubeconfig, channels: [{OPS_CHANNEL}]}}\n"
    f"  - {{name: payroll-eu, kubeconfig: prod.kubeconfig, channels: [{SECOND_CHANNEL}]}}\n"
    "  - {name: shared-eu, kubeconfig: prod.kubeconfig}\n"
    "digests:\n"
    f"  - {{channel: {OPS_CHANNEL}, schedule: '0 9 * * *', stuck_after: 30m}}\n"
)


def test_a_digest_without_clusters_covers_only_those_its_channel_may_use(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = setup_digest(tmp_path, kube_emulator, CONFIG)
    dry = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, "--dry-run", "-o", "json", env=env)
    assert dry.returncode == 0, dry.stderr
    sections = [s["cluster"] for s in json.loads(dry.stdout)["sections"]]
    assert sections == ["ops-eu", "shared-eu"]
    # posted: nothing of the cluster kept to the other channel reaches this one
    env.update({"SLACK_BOT_TOKEN": slack_emulator.bot_token, "NSSTUCK_SLACK_API_URL": slack_emulator.api_url})
    posted = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, env=env)
    assert posted.returncode == 0, posted.stderr
    [message] = slack_emulator.channel_messages(OPS_CHANNEL)
    shown = json.dumps(message) + slack_emulator.render(message)
    assert "ops-eu" in shown
    assert "shared-eu" in shown
    assert "payroll-eu" not in shown
    # the other channel's own digest (made by hand) sees its cluster and the open one, not ops-eu
    other = run_nsstuck("digest", "run", "--channel", SECOND_CHANNEL, "--dry-run", "-o", "json", env=env)
    assert other.returncode == 0, other.stderr
    assert [s["cluster"] for s in json.loads(other.stdout)["sections"]] == ["payroll-eu", "shared-eu"]


def test_a_channel_that_may_use_no_cluster_gets_no_digest_by_hand(kube_emulator: Emulator, tmp_path: Path) -> None:
    config = (
        "clusters:\n"
        f"  - {{name: ops-eu, kubeconfig: prod.kubeconfig, channels: [{OPS_CHANNEL}]}}\n"
        f"  - {{name: payroll-eu, kubeconfig: prod.kubeconfig, channels: [{OPS_CHANNEL}]}}\n"
    )
    env = setup_digest(tmp_path, kube_emulator, config)
    done = run_nsstuck("digest", "run", "--channel", SECOND_CHANNEL, "--dry-run", env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr.strip()
        == f"nsstuck: no registered cluster may be used from {SECOND_CHANNEL} (each cluster's channels:)"
    )


def test_config_check_warns_where_a_digest_names_a_cluster_its_channel_may_not_use(tmp_path: Path) -> None:
    (tmp_path / "k").write_text("apiVersion: v1\nkind: Config\n")
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        "clusters:\n"
        f"  - {{name: ops-eu, kubeconfig: k, channels: [{OPS_CHANNEL}]}}\n"
        f"  - {{name: payroll-eu, kubeconfig: k, channels: [{SECOND_CHANNEL}]}}\n"
        "digests:\n"
        f"  - channel: {OPS_CHANNEL}\n"
        "    schedule: '0 9 * * *'\n"
        "    clusters:\n"
        "      - ops-eu\n"
        "      - payroll-eu\n"  # line 9: kept to the second channel
        "  - channel: C0NOBODY1\n"  # line 10: no cluster may be used there
        "    schedule: '0 9 * * *'\n"
        f"  - {{channel: {SECOND_CHANNEL}, schedule: '0 9 * * *'}}\n"  # fine: payroll-eu
    )
    done = run_nsstuck("config", "check", "--config", str(path))
    assert done.returncode == 0, done.stderr  # valid: a warning, not an error
    warnings = done.stderr.strip().splitlines()
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"nsstuck: config warning: {path}: digests[0].clusters[1] (line 9): ")
    assert "payroll-eu" in warnings[0]
    assert OPS_CHANNEL in warnings[0]
    assert warnings[1].startswith(f"nsstuck: config warning: {path}: digests[1] (line 10): ")
    assert "covers none" in warnings[1]
    assert f"digest: {SECOND_CHANNEL} at '0 9 * * *' UTC (payroll-eu: those its channel may use)" in done.stdout
    as_json = json.loads(run_nsstuck("config", "check", "--config", str(path), "-o", "json").stdout)
    assert as_json["valid"] is True
    assert [w.split(": ")[1] for w in as_json["warnings"]] == [
        "digests[0].clusters[1] (line 9)",
        "digests[1] (line 10)",
    ]
    assert [d["covers"] for d in as_json["digests"]] == [["ops-eu", "payroll-eu"], [], ["payroll-eu"]]
