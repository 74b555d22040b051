"""Issue 37 §5, pods the kubelet of a Ready node cannot finish, through the real command line and the real bot.

Each scenario of the library (tests/fakes/kubeapi/scenarios.py, `_kubelet_scenarios`) is built in the
emulator, over HTTP, the way it comes to be, and then diagnosed by `nsstuck diagnose` and by `/nsstuck` in
Slack. Both read the real clock, so the emulator's FakeClock starts as long before the present as the
scenario's build lasts: its last moment is now, and the ages the report gives are the scenario's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests._rows import rows
from tests.approvals._flow import FAST
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, APPROVERS, OPS_CHANNEL
from tests.slack._bot import serve_process

# how much of the emulator's time each build takes (`_start`'s 10 s, 30 s before the delete, then the wait)
BUILD = {
    "pod-nfs-server-gone": timedelta(seconds=40, minutes=40),
    "pod-nfs-server-gone-within-bound": timedelta(seconds=40, minutes=20),
    "pod-csi-no-node-plugin": timedelta(seconds=40, minutes=40),
    "pod-volume-detach-stuck": timedelta(seconds=40, minutes=40),
}


ORDERED = "; it holds the whole namespace (OrderedNamespaceDeletion)"


def _built_until_now(name: str) -> Emulator:
    """A started emulator holding scenario `name`, built so that it ends at the present."""
    emu = Emulator(clock=FakeClock(datetime.now(UTC) - BUILD[name] - timedelta(seconds=2)), seed=0)
    emu.start()
    try:
        apply_scenario(emu, name)
        late = emu.clock.now() - datetime.now(UTC)
        assert late < timedelta(seconds=1), f"the build of {name} lasts longer than BUILD says ({late})"
    except BaseException:
        emu.stop()
        raise
    return emu


@pytest.fixture
def built(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    emu = _built_until_now(request.param)
    try:
        yield emu
    finally:
        emu.stop()


def _diagnose(emu: Emulator, tmp_path: Path, name: str) -> dict[str, Any]:
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_nsstuck("diagnose", SCENARIOS[name].expected.namespace, "--kubeconfig", str(kubeconfig), "--json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["complete"] is True, report["gaps"]
    return report


def _evidence(finding: dict[str, Any]) -> str:
    return "\n".join(finding["evidence"])


def _stood_still(emu: Emulator, namespace: str, pod: str) -> tuple[str, ...]:
    """How long the pod has stood still as a report says it ("34m"): since the end of its grace period, when
    its containers stopped (read from the emulator; the minute may turn between the read and the report)."""
    from tests.fakes.kubeapi.controllers._http import KubeHTTP

    obj = KubeHTTP(emu.url, emu.admin_token).get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    ended = datetime.fromisoformat(obj["metadata"]["deletionTimestamp"].replace("Z", "+00:00"))
    minutes = int((datetime.now(UTC) - ended).total_seconds()) // 60
    return (f"{minutes}m", f"{minutes + 1}m")


@pytest.mark.parametrize("built", ["pod-nfs-server-gone"], indirect=True)
def test_the_cli_names_the_nfs_server_gone_and_ranks_restoring_it_first(built: Emulator, tmp_path: Path) -> None:
    report = _diagnose(built, tmp_path, "pod-nfs-server-gone")
    assert report["cause"] == "pod_not_terminating"
    [finding] = [f for f in report["findings"] if f["blocking"]]
    assert finding["summary"].startswith("the kubelet on Ready node node-2 has not finished pod report-writer: ")
    assert "(NFS server nfs-server.reports.svc.cluster.local does not answer (no ready endpoint))" in finding["summary"]
    assert finding["summary"].endswith(ORDERED)
    no_progress = finding["summary"].split("no progress for ")[1].split(" ")[0]
    assert no_progress in _stood_still(built, "reports", "report-writer"), finding["summary"]
    assert int(no_progress.removesuffix("m")) > 30  # past the bound
    assert [(o["kind"], o["name"]) for o in finding["objects"]] == [("Pod", "report-writer"), ("Node", "node-2")]
    evidence = _evidence(finding)
    # the server's pod went first (OrderedNamespaceDeletion deletes pods before anything else): its Service
    # is still there, and selects nothing
    assert "its Service nfs-server in reports (the namespace being deleted) has no ready endpoint" in evidence, evidence
    assert "no pod in reports matches the service selector app=nfs-server" in evidence
    assert "Deployment nfs-server: 0/1 ready" in evidence
    assert "no kubelet Event (FailedKillPod, FailedUnMount) about these pods" in evidence
    assert "their absence proves nothing" in evidence
    remedies = [
        (r["action"], r["risk"], r["targets"][0]["kind"] if r["targets"] else None) for r in finding["remedies"]
    ]
    assert remedies == [
        ("restore_backend", "none", "Service"),
        ("restore_backend", "low", "Node"),  # restart the kubelet on node-2
        ("force_delete_pod", "high", "Pod"),  # it holds a volume
        ("force_finalize_namespace", "high", "Namespace"),
    ]
    assert finding["remedies"][1]["commands"][0] == "systemctl restart kubelet  # on node node-2"


@pytest.mark.parametrize("built", ["pod-nfs-server-gone-within-bound"], indirect=True)
def test_within_the_bound_the_cli_says_how_long_it_stood_still_and_does_not_call_it_stuck(
    built: Emulator, tmp_path: Path
) -> None:
    report = _diagnose(built, tmp_path, "pod-nfs-server-gone-within-bound")
    assert report["cause"] == "content_deleting"
    assert not [f for f in report["findings"] if f["blocking"]]
    [finding] = report["findings"]
    still = finding["summary"].split("no progress for ")[1].split(";")[0]
    assert still in _stood_still(built, "reports", "report-writer"), finding["summary"]
    assert 10 < int(still.removesuffix("m")) < 30  # past the ten minutes of "still being torn down", within the bound
    assert finding["summary"].endswith(f"no progress for {still}; look at the kubelet on node node-2" + ORDERED)
    assert "NFS share of server nfs-server.reports.svc.cluster.local" in _evidence(finding)
    assert "past 30m without progress it is not being finished (pod_not_terminating)" in _evidence(finding)
    assert [r["action"] for r in finding["remedies"]] == ["investigate", "force_delete_pod"]


@pytest.mark.parametrize("built", ["pod-csi-no-node-plugin"], indirect=True)
def test_the_cli_names_a_csi_driver_without_its_node_plugin(built: Emulator, tmp_path: Path) -> None:
    report = _diagnose(built, tmp_path, "pod-csi-no-node-plugin")
    assert report["cause"] == "pod_not_terminating"
    [finding] = [f for f in report["findings"] if f["blocking"]]
    assert "(CSI driver ebs.csi.aws.com has no node plugin on node node-2)" in finding["summary"]
    assert "CSINode node-2 lists efs.csi.aws.com, not ebs.csi.aws.com" in _evidence(finding)
    first = finding["remedies"][0]
    assert (first["action"], first["targets"][0]["kind"], first["targets"][0]["name"]) == (
        "restore_backend",
        "CSIDriver",
        "ebs.csi.aws.com",
    )
    force = next(r for r in finding["remedies"] if r["action"] == "force_delete_pod")
    assert force["risk"] == "high"
    assert "StatefulSet postgres recreates postgres-0" in force["leaves_behind"][0]


@pytest.mark.parametrize("built", ["pod-volume-detach-stuck"], indirect=True)
def test_the_cli_names_a_volume_attachment_stuck_detaching(built: Emulator, tmp_path: Path) -> None:
    report = _diagnose(built, tmp_path, "pod-volume-detach-stuck")
    assert report["cause"] == "pod_not_terminating"
    [finding] = [f for f in report["findings"] if f["blocking"]]
    assert "has been stuck detaching for 40m" in finding["summary"]
    assert "ebs.csi.aws.com has not finished the detach" in _evidence(finding)
    assert finding["remedies"][0]["targets"][0]["kind"] == "VolumeAttachment"


# in Slack: the verdict's words, and what its thread says (the report's findings)
IN_SLACK = {
    "pod-nfs-server-gone": (
        "`pod_not_terminating`",
        ("NFS server nfs-server.reports.svc.cluster.local", "no progress for", "Restart the kubelet on node node-2"),
    ),
    "pod-nfs-server-gone-within-bound": ("not stuck yet", ("no progress for", "NFS share of server")),
    "pod-csi-no-node-plugin": (
        "`pod_not_terminating`",
        ("CSI driver ebs.csi.aws.com has no node plugin on node node-2", "Bring back the node plugin"),
    ),
    "pod-volume-detach-stuck": ("`pod_not_terminating`", ("stuck detaching", "finish detaching volume")),
}


def test_the_bot_says_the_same_in_slack(slack_emulator: SlackEmulator, tmp_path: Path) -> None:
    """One bot, a cluster registered for each scenario (each its own emulator): `/nsstuck <cluster> <ns>`."""
    emulators: dict[str, Emulator] = {}
    try:
        lines = ["clusters:"]
        for index, name in enumerate(IN_SLACK):
            emu = emulators[name] = _built_until_now(name)
            emu.write_kubeconfig(tmp_path / f"k{index}.kubeconfig", context=f"k{index}")
            lines += [
                f"  - name: kubelet-{index}",
                f"    kubeconfig: k{index}.kubeconfig",
                f"    channels: [{OPS_CHANNEL}]",
                f"    approvers: [{APPROVERS}]",
                "    required_approvals: 1",
                "    remediation: true",
            ]
        config = tmp_path / "nsstuck.yaml"
        config.write_text("\n".join(lines) + "\n")
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        migrated(database)
        with serve_process(slack_emulator, config, database, tmp_path, extra_env=FAST) as bot:
            for index, (name, (verdict, thread)) in enumerate(IN_SLACK.items()):
                cluster, namespace = f"kubelet-{index}", SCENARIOS[name].expected.namespace
                delivery = bot.driver.slash_command(
                    "/nsstuck", f"{cluster} {namespace}", user=ALICE, channel=OPS_CHANNEL
                )
                assert delivery.status == 200

                def answered(cluster: str = cluster) -> dict[str, Any] | None:
                    for message in slack_emulator.channel_messages(OPS_CHANNEL):
                        if f"*{cluster}*" in slack_emulator.render(message):
                            return message
                    return None

                message = slack_emulator.wait_for(answered, timeout=60, message=f"no verdict for {name}")
                said = slack_emulator.render(message)
                assert verdict in said, (name, said)

                def threaded(ts: str = str(message["ts"]), words: str = thread[0]) -> str | None:
                    text = "\n".join(slack_emulator.thread_text(OPS_CHANNEL, ts))
                    return text if words in text else None

                text = slack_emulator.wait_for(threaded, timeout=30, message=f"no {thread[0]!r} for {name}")
                for words in thread[1:]:
                    assert words in text, (name, text)
                [row] = rows(
                    database,
                    "SELECT report FROM diagnoses WHERE cluster = :c ORDER BY id DESC LIMIT 1",
                    c=cluster,
                )
                report = json.loads(row["report"]) if isinstance(row["report"], str) else row["report"]
                assert report["cause"] == SCENARIOS[name].expected.causes[0], name
    finally:
        for emu in emulators.values():
            emu.stop()


@pytest.mark.parametrize("built", ["pod-nfs-server-gone"], indirect=True)
def test_a_refused_read_of_the_volumes_is_a_named_gap_and_no_backend_is_guessed(
    built: Emulator, tmp_path: Path
) -> None:
    built.knobs.inject_fault(r"^GET /api/v1/persistentvolumes$", 403)
    kubeconfig = built.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_nsstuck("diagnose", "reports", "--kubeconfig", str(kubeconfig), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["complete"] is False
    assert [(g["what"], g["reason"]) for g in report["gaps"]] == [("list persistentvolumes", "forbidden")]
    [finding] = [f for f in report["findings"] if f["blocking"]]
    assert finding["cause"] == "pod_not_terminating"  # the pod stood still, whatever its volumes need
    assert "NFS" not in finding["summary"]
    assert (
        "what its volumes need could not all be read, so no backend is judged there: list persistentvolumes: forbidden"
        in _evidence(finding)
    )
    actions = [r["action"] for r in finding["remedies"]]
    assert actions[:2] == ["investigate", "restore_backend"]  # the kubelet's log, then its restart
    assert "force_finalize_namespace" not in actions  # never on incomplete evidence


@pytest.mark.parametrize("built", ["pod-csi-no-node-plugin"], indirect=True)
def test_a_refused_read_of_the_nodes_csinode_is_a_named_gap_and_no_driver_is_blamed(
    built: Emulator, tmp_path: Path
) -> None:
    """The CSINode of the pod's node refused (403, not the 404 of a node where no plugin ever registered):
    a gap that names it, and the driver is not said to lack its node plugin on that evidence."""
    built.knobs.inject_fault(r"^GET /apis/storage.k8s.io/v1/csinodes/node-2$", 403)
    kubeconfig = built.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_nsstuck("diagnose", "billing", "--kubeconfig", str(kubeconfig), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["complete"] is False
    assert [(g["what"], g["reason"]) for g in report["gaps"]] == [("get csinode node-2", "forbidden")]
    [finding] = [f for f in report["findings"] if f["blocking"]]
    assert finding["cause"] == "pod_not_terminating"
    assert "no node plugin" not in finding["summary"]
    assert "force_finalize_namespace" not in [r["action"] for r in finding["remedies"]]
