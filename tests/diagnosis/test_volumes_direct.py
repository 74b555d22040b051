"""bot/diagnosis/volumes.py on snapshots built from dicts: who the pvc-protection controller counts as a
user of a claim, and what state of that user makes the claim block the namespace.

(tests/diagnosis/test_stuck_or_slow.py has the common paths: a running user, one inside its grace
period, a claim nobody uses; these are the others.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.diagnosis.volumes import uses
from bot.domain.findings import Action, Cause, Diagnosis, Finding
from tests.diagnosis.test_stuck_or_slow import _claim, _diagnose, _event, _node, _only, _pod


def _claim_finding(diagnosis: Diagnosis) -> Finding:
    found = [f for f in diagnosis.findings if f.summary.startswith("PVC data ")]
    assert len(found) == 1, [(f.cause, f.summary) for f in diagnosis.findings]
    return found[0]


def _ephemeral(name: str, *, past_grace: timedelta | None, grace: int = 30) -> dict[str, Any]:
    """A pod whose generic ephemeral volume `data` made the claim `<name>-data`."""
    pod = _pod(name, past_grace=past_grace)
    pod["spec"]["volumes"] = [{"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    if past_grace is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
    return pod


def test_a_pod_not_scheduled_is_no_user_of_the_claim_it_names() -> None:
    pending = _pod("db-0", past_grace=None, claim="data")
    del pending["spec"]["nodeName"]
    assert uses(pending, "data") is False
    finding = _claim_finding(_diagnose(contents={"pods": (pending,), "persistentvolumeclaims": (_claim("data"),)}))
    assert finding.cause is Cause.CONTENT_DELETING
    assert "no scheduled pod in the namespace uses it any more" in finding.evidence
    assert not any("db-0" in e for e in finding.evidence)


def test_a_generic_ephemeral_volume_makes_its_pod_a_user_until_the_pod_is_shut_down() -> None:
    running = _ephemeral("db-0", past_grace=None)
    assert uses(running, "db-0-data") is True
    assert uses(running, "db-1-data") is False
    finding = _only(
        _diagnose(contents={"pods": (running,), "persistentvolumeclaims": (_claim("db-0-data"),)}), Cause.PVC_IN_USE
    )
    assert finding.summary == "PVC db-0-data cannot go while pod(s) db-0 use it"
    assert "pod db-0 (running, not being deleted) mounts it" in finding.evidence
    # deleted with grace 0: shut down, so podUsesPVC no longer counts it for its ephemeral claim
    shut_down = _ephemeral("db-0", past_grace=timedelta(minutes=5), grace=0)
    assert uses(shut_down, "db-0-data") is False
    # a persistentVolumeClaim volume is counted whatever the pod's deletion
    named = _pod("db-0", past_grace=timedelta(minutes=5), claim="data")
    named["metadata"]["deletionGracePeriodSeconds"] = 0
    assert uses(named, "data") is True


def test_a_user_past_its_grace_on_a_node_not_read_blocks_the_claim() -> None:
    diagnosis = _diagnose(
        contents={
            "pods": (_pod("db-0", past_grace=timedelta(minutes=20), claim="data"),),
            "persistentvolumeclaims": (_claim("data"),),
        },
        nodes={},
    )
    finding = _only(diagnosis, Cause.PVC_IN_USE)
    assert finding.blocking is True
    assert "pod db-0 (deleting, 20m past its grace period) mounts it" in finding.evidence
    assert [r.action for r in finding.remedies][:2] == [Action.WAIT, Action.REMOVE_FINALIZER]


def test_a_user_held_by_its_own_finalizers_blocks_the_claim() -> None:
    pod = _pod("db-0", past_grace=timedelta(minutes=20), claim="data")
    pod["metadata"]["finalizers"] = ["example.com/keep"]
    diagnosis = _diagnose(
        contents={"pods": (pod,), "persistentvolumeclaims": (_claim("data"),)},
        nodes={"node-1": _node("node-1")},
    )
    finding = _only(diagnosis, Cause.PVC_IN_USE)
    assert "pod db-0 (deleting, 20m past its grace period, held by finalizers) mounts it" in finding.evidence


def test_a_user_whose_kubelet_fails_to_tear_it_down_blocks_the_claim() -> None:
    pod = _pod("db-0", past_grace=timedelta(minutes=2), claim="data")
    event = _event(
        "db-0", "FailedKillPod", "error killing pod: rpc error: deadline exceeded", seen=timedelta(minutes=1)
    )
    diagnosis = _diagnose(
        contents={"pods": (pod,), "persistentvolumeclaims": (_claim("data"),)},
        nodes={"node-1": _node("node-1")},
        events=(event,),
    )
    finding = _only(diagnosis, Cause.PVC_IN_USE)
    assert "pod db-0 (deleting; the kubelet on node node-1 fails to tear it down) mounts it" in finding.evidence


def test_a_user_its_kubelet_is_tearing_down_within_the_bound_does_not_block_the_claim() -> None:
    pod = _pod("db-0", past_grace=timedelta(minutes=2), claim="data")
    diagnosis = _diagnose(
        contents={"pods": (pod,), "persistentvolumeclaims": (_claim("data"),)},
        nodes={"node-1": _node("node-1")},
    )
    finding = _claim_finding(diagnosis)
    assert finding.cause is Cause.CONTENT_DELETING
    assert finding.blocking is False
    assert finding.summary == "PVC data waits for pod(s) db-0, which are being deleted"
    assert "pod db-0 (deleting; the kubelet on node node-1 is tearing it down) mounts it" in finding.evidence
    assert [r.action for r in finding.remedies] == [Action.WAIT]


def test_the_same_user_stood_still_past_the_bound_blocks_the_claim() -> None:
    pod = _pod("db-0", past_grace=timedelta(minutes=45), claim="data")
    diagnosis = _diagnose(
        contents={"pods": (pod,), "persistentvolumeclaims": (_claim("data"),)},
        nodes={"node-1": _node("node-1")},
    )
    finding = _only(diagnosis, Cause.PVC_IN_USE)
    assert any(
        e.startswith("pod db-0 (deleting; the kubelet on node node-1 has not finished it, no progress for 45m")
        for e in finding.evidence
    ), finding.evidence
