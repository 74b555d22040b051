"""Nothing waits without bound on a cluster's credentials, and approved changes wait for no diagnosis
(issue 18, item 1).

- An exec credential plugin that hangs is killed (with the processes it started) after the credential
  timeout; before, `nsstuck diagnose --timeout 2` waited the plugin's 25 s, and in the bot a hung plugin
  held the cluster's connect lock and a diagnosis worker for as long.
- An approved change runs on a pool of its own: before, it was queued behind the diagnoses.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL
from tests.slack._bot import serve_process

# writes its own pid and its child's, then hangs (as a plugin waiting for a browser login would); a shell,
# not Python: an interpreter's start (with coverage's) on a loaded machine took longer than the 2 s
# the plugin is given, so it was killed before it had written anything
HUNG_PLUGIN = 'sleep 60 & echo "$$ $!" >> "$1"; sleep 25'


def _hung_kubeconfig(kube: Emulator, tmp_path: Path) -> tuple[Path, Path]:
    """A kubeconfig for the emulator whose user's credentials come from the hung plugin; and the file
    the plugin writes its pids to."""
    pids = tmp_path / "plugin.pids"
    path = kube.write_kubeconfig(tmp_path / "hung.kubeconfig", context="hung")
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "/bin/sh",
            "args": ["-c", HUNG_PLUGIN, "hung-plugin", str(pids)],
            "interactiveMode": "Never",
        }
    }
    path.write_text(yaml.safe_dump(config))
    return path, pids


def _alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped yet counts as dead: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _plugin_pids(pids: Path) -> list[int]:
    return [int(pid) for line in pids.read_text().splitlines() for pid in line.split()] if pids.exists() else []


def test_a_hung_credential_plugin_is_killed_within_the_diagnose_timeout(
    kube_emulator: Emulator, tmp_path: Path
) -> None:
    kubeconfig, pids = _hung_kubeconfig(kube_emulator, tmp_path)
    # run_nsstuck gives the process 60 s; the plugin alone would take 25 s, and a diagnosis 2
    done = run_nsstuck("diagnose", "default", "--kubeconfig", str(kubeconfig), "--timeout", "2")
    assert done.returncode == 3, done.stderr  # the cluster cannot be used (contract: exit 3)
    assert done.stderr.strip().splitlines() == [
        "nsstuck: cluster 'hung' cannot be used now: "
        "its exec credential plugin did not answer within 2s and was stopped"
    ]
    started = _plugin_pids(pids)
    assert len(started) == 2, "the plugin and its child both ran"
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in started if _alive(pid)], "the plugin, or a process it started, lives on"


@pytest.mark.slow
def test_a_hung_plugin_holds_neither_the_bot_nor_other_clusters(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    _, pids = _hung_kubeconfig(kube_emulator, tmp_path)
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n"
        "  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n"
        "  - name: hung\n    kubeconfig: hung.kubeconfig\n"
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    migrated(database)
    env = {"NSSTUCK_CREDENTIAL_TIMEOUT_SECONDS": "2"}
    with serve_process(slack_emulator, config, database, tmp_path, extra_env=env) as bot:
        # more commands on the hung cluster than there are diagnosis workers, then one elsewhere
        for i in range(6):
            delivery = bot.driver.slash_command("/nsstuck", f"hung team-{i}", user=ALICE, channel=OPS_CHANNEL)
            assert delivery.status == 200
        assert bot.driver.slash_command("/nsstuck", "prod-eu default", user=ALICE, channel=OPS_CHANNEL).status == 200

        def said(text: str) -> list[str]:
            """What the bot said, in the channel or to the caller (an error goes to the response_url)."""
            rendered = [slack_emulator.render(m) for m in slack_emulator.channel_messages(OPS_CHANNEL)]
            rendered += [post.raw for post in slack_emulator.webhook_posts()]
            return [r for r in rendered if text in r]

        # each one is answered, in about the credential timeout, not the plugin's 25 s each in turn
        slack_emulator.wait_for(lambda: said("default") or None, timeout=20, message="prod-eu was not answered")
        answered = slack_emulator.wait_for(
            lambda: (found := said("plugin did not answer within 2s")) and len(found) >= 6 and found,
            timeout=20,
            message=f"the commands on the hung cluster were not all answered: {said('hung')}",
        )
        assert all("hung" in text for text in answered)
    assert not [pid for pid in _plugin_pids(pids) if _alive(pid)], "a plugin, or a process it started, lives on"


@pytest.mark.slow
def test_an_approved_change_is_not_queued_behind_diagnoses(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    # three workers, as the default on two cores: six 8-second diagnoses must not drain one by one
    workers = {"NSSTUCK_DIAGNOSIS_WORKERS": "3"}
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=workers) as flow:
        request_id = flow.requested("seed002-configmap-finalizer", "remove_finalizer")
        # every diagnosis worker busy for 8 s on a slow namespace, with more waiting
        kube_emulator.knobs.latency(8000, match="^GET /api/v1/namespaces/slow-")
        for i in range(6):
            delivery = flow.bot.driver.slash_command("/nsstuck", f"prod-eu slow-{i}", user=ALICE, channel=OPS_CHANNEL)
            assert delivery.status == 200
        assert flow.vote(request_id, BOB).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=30)
        answered = _answers(flow)
        assert row["status"] == "applied", row["status_reason"]
        assert answered == [], f"the change waited for diagnoses: {answered} were answered before it"


def _answers(flow: Flow) -> list[str]:
    """The slow namespaces answered so far."""
    rendered = [flow.slack.render(m) for m in flow.slack.channel_messages(OPS_CHANNEL)]
    return sorted({f"slow-{i}" for i in range(6) for text in rendered if f"slow-{i}*" in text})


def test_the_plugin_helpers_see_processes() -> None:
    assert _alive(os.getpid())
    assert not _alive(2**22 + 1)  # above pid_max on Linux
