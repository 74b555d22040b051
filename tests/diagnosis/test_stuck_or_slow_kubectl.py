"""Issue 23 §3 scenarios diagnosed over HTTP, with the real kubectl showing the same state: the
kube-controller-manager Lease, the VolumeAttachments, the kubelet's Events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from bot.domain.findings import Action, Cause, Diagnosis, Risk
from bot.domain.refs import parse_time
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from tests.emulator._scenario_support import fresh_scenario, kubectl, kubectl_available
from tests.fakes.kubeapi import Emulator

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not kubectl_available(), reason="/usr/bin/kubectl is not installed"),
]


@dataclass
class Case:
    emu: Emulator
    diagnosis: Diagnosis
    tmp: Path

    def kubectl(self, *args: str) -> str:
        result = kubectl(self.emu, self.tmp, *args)
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    emu, scenario = fresh_scenario(request.param)
    try:
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        diagnosis = diagnose_namespace(
            ClusterTarget(name="emulated", kubeconfig=kubeconfig),
            scenario.expected.namespace,
            options=CollectOptions(deadline=10, call_timeout=3),
            clock=emu.clock.now,
        ).diagnosis
        yield Case(emu, diagnosis, tmp_path)
    finally:
        emu.stop()


def _evidence(diagnosis: Diagnosis) -> list[str]:
    return [e for f in diagnosis.findings for e in f.evidence]


@pytest.mark.parametrize("case", ["controller-manager-down"], indirect=True)
def test_a_lapsed_lease_as_kubectl_shows_it_is_the_controller_not_running(case: Case) -> None:
    row = case.kubectl("get", "lease", "kube-controller-manager", "-n", "kube-system", "--no-headers").split()
    lease = json.loads(case.kubectl("get", "lease", "kube-controller-manager", "-n", "kube-system", "-o", "json"))
    holder = lease["spec"]["holderIdentity"]
    assert row[:2] == ["kube-controller-manager", holder]
    renewed = parse_time(lease["spec"]["renewTime"])
    assert renewed is not None
    assert case.emu.clock.now() - renewed > timedelta(seconds=lease["spec"]["leaseDurationSeconds"])
    assert case.diagnosis.cause is Cause.UNKNOWN
    finding = case.diagnosis.findings[0]
    assert finding.summary.startswith("the namespace controller is not running")
    assert f"by {holder}, longer than its 15s duration" in finding.evidence[0]
    assert finding.remedies[0].action is Action.RESTORE_CONTROLLER


@pytest.mark.parametrize("case", ["namespace-controller-not-yet"], indirect=True)
def test_a_fresh_lease_as_kubectl_shows_it_is_a_namespace_not_yet_reached(case: Case) -> None:
    lease = json.loads(case.kubectl("get", "lease", "kube-controller-manager", "-n", "kube-system", "-o", "json"))
    assert parse_time(lease["spec"]["renewTime"]) == case.emu.clock.now().replace(microsecond=0)
    namespace = json.loads(case.kubectl("get", "namespace", "review-881", "-o", "json"))
    assert namespace["status"] == {"phase": "Terminating"}  # no conditions
    assert case.diagnosis.cause is Cause.CONTENT_DELETING
    assert "has not got to this namespace yet" in case.diagnosis.findings[0].summary
    assert not any(f.blocking for f in case.diagnosis.findings)


@pytest.mark.parametrize("case", ["namespace-controller-unseen"], indirect=True)
def test_no_lease_as_kubectl_shows_it_is_a_state_that_cannot_be_seen(case: Case) -> None:
    result = kubectl(case.emu, case.tmp, "get", "lease", "kube-controller-manager", "-n", "kube-system")
    assert result.returncode == 1
    assert 'leases.coordination.k8s.io "kube-controller-manager" not found' in result.stderr
    assert case.diagnosis.cause is Cause.UNKNOWN
    assert any("cannot be seen" in e for e in _evidence(case.diagnosis))


@pytest.mark.parametrize("case", ["pod-volume-teardown"], indirect=True)
def test_a_detaching_volume_attachment_as_kubectl_shows_it_is_named_as_what_the_pod_waits_for(case: Case) -> None:
    header, row = case.kubectl("get", "volumeattachments").splitlines()
    assert header.split() == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    name, attacher, volume, node, attached, _ = row.split()
    assert (attacher, node, attached) == ("ebs.csi.aws.com", "node-2", "true")
    deleted = case.kubectl("get", "volumeattachment", name, "-o", "jsonpath={.metadata.deletionTimestamp}")
    assert deleted  # being deleted: the volume is detaching
    pod = json.loads(case.kubectl("get", "pod", "postgres-0", "-n", "orders", "-o", "json"))
    assert [s["state"]["terminated"]["exitCode"] for s in pod["status"]["containerStatuses"]] == [137]
    assert case.diagnosis.cause is Cause.CONTENT_DELETING
    assert not any(f.blocking for f in case.diagnosis.findings)
    assert any(
        f"volume {volume} to detach from node node-2 (VolumeAttachment {name} is being deleted)" in e
        for e in _evidence(case.diagnosis)
    )


@pytest.mark.parametrize("case", ["pod-teardown-no-progress"], indirect=True)
def test_an_attached_volume_and_a_silent_kubelet_ask_for_a_look_before_a_high_risk_force_delete(case: Case) -> None:
    name, _, volume, _, attached, _ = case.kubectl("get", "volumeattachments", "--no-headers").split()
    assert attached == "true"
    events = case.kubectl("get", "events", "-n", "ledger", "--field-selector", "involvedObject.name=postgres-0")
    assert events == ""  # none could be created in the terminating namespace
    row = case.kubectl("get", "pod", "postgres-0", "-n", "ledger", "--no-headers").split()
    assert row[2] == "Terminating"
    finding = case.diagnosis.findings[0]
    assert finding.cause is Cause.CONTENT_DELETING
    assert finding.summary.startswith("pod postgres-0: no progress for 10m; look at the kubelet on node node-2")
    assert any(f"volume {volume} to be unmounted and detached (VolumeAttachment {name}" in e for e in finding.evidence)
    assert [r.action for r in finding.remedies] == [Action.INVESTIGATE, Action.FORCE_DELETE_POD]
    force = finding.remedies[1]
    assert force.risk is Risk.HIGH
    assert "StatefulSet postgres recreates postgres-0" in force.leaves_behind[0]
    assert "holds a volume" in force.leaves_behind[0]


@pytest.mark.parametrize("case", ["pod-stuck-terminating-ready-node"], indirect=True)
def test_the_kubelets_events_as_kubectl_shows_them_are_quoted_in_a_deletion_error(case: Case) -> None:
    columns = "custom-columns=REASON:.reason,TYPE:.type,COUNT:.count,SOURCE:.source.component"
    rows = case.kubectl(
        "get", "events", "-n", "legacy-app", "--field-selector", "involvedObject.name=postgres-0", "-o", columns
    ).splitlines()
    table = {r.split()[0]: r.split()[1:] for r in rows[1:]}
    assert table["Killing"] == ["Normal", "1", "kubelet"]
    kind, count, source = table["FailedKillPod"]
    assert (kind, source) == ("Warning", "kubelet")
    message = case.kubectl(
        "get",
        "events",
        "-n",
        "legacy-app",
        "--field-selector",
        "reason=FailedKillPod",
        "-o",
        "jsonpath={.items[0].message}",
    )
    assert case.diagnosis.cause is Cause.DELETION_ERROR
    finding = case.diagnosis.findings[0]
    assert finding.blocking is True
    assert any(
        e.startswith(f"Warning FailedKillPod from kubelet ({count} times") and e.endswith(message)
        for e in finding.evidence
    )
    described = case.kubectl("describe", "pod", "postgres-0", "-n", "legacy-app")
    assert "FailedKillPod" in described
