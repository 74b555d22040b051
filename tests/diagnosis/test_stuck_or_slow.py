"""Issue 23 §3, stuck or slow, on snapshots built from dicts: the paths the scenarios do not reach.

(tests/diagnosis/test_scenarios.py diagnoses the scenarios themselves; tests/diagnosis/
test_stuck_or_slow_kubectl.py puts the real kubectl next to them.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.diagnosis.controller_state import server_version
from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Cause, Diagnosis, Finding, Gap, Risk
from bot.domain.refs import ClusterName
from bot.domain.snapshot import NamespaceSnapshot, ResourceType

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
PODS = ResourceType("", "v1", "pods", "Pod", True, ("list", "delete"))
PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("list", "delete"))
CONTENT_FAILURE = {
    "type": "NamespaceDeletionContentFailure",
    "status": "True",
    "reason": "ContentDeletionFailed",
    "message": "Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: ns "
    "for gvr: /v1, Resource=pods",
}
CONTENT_OK = {
    "type": "NamespaceDeletionContentFailure",
    "status": "False",
    "reason": "ContentDeleted",
    "message": "All content successfully deleted, may be waiting on finalization",
}


def _at(delta: timedelta) -> str:
    return (NOW - delta).isoformat().replace("+00:00", "Z")


def _namespace(deleted: timedelta, conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "uid": "ns-uid", "deletionTimestamp": _at(deleted)},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": conditions or []},
    }


def _lease(renewed: timedelta) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"},
        "spec": {"holderIdentity": "cp-1_abc", "leaseDurationSeconds": 15, "renewTime": _at(renewed)},
    }


FRESH = (_lease(timedelta(seconds=2)),)
STALE = (_lease(timedelta(minutes=20)),)
V133 = {"major": "1", "minor": "33", "gitVersion": "v1.33.1"}
V132 = {"major": "1", "minor": "32", "gitVersion": "v1.32.4"}
V115 = {"major": "1", "minor": "15", "gitVersion": "v1.15.12"}


def _node(name: str, *, ready: bool = True) -> dict[str, Any]:
    status = "True" if ready else "Unknown"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": "Ready", "status": status, "reason": "KubeletReady" if ready else "NodeStatusUnknown"}
            ]
        },
    }


def _pod(
    name: str,
    *,
    past_grace: timedelta | None,
    node: str = "node-1",
    claim: str | None = None,
    containers: str = "running",
    owner: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if past_grace is not None:
        meta["deletionTimestamp"] = _at(past_grace)
        meta["deletionGracePeriodSeconds"] = 30
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner, "uid": "sts"}]
    state: dict[str, Any] = (
        {"running": {"startedAt": _at(timedelta(days=1))}}
        if containers == "running"
        else {"terminated": {"exitCode": 137, "finishedAt": _at(timedelta(minutes=1))}}
    )
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "app", "image": "app:1"}]}
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running", "containerStatuses": [{"name": "app", "state": state}]},
    }


def _claim(name: str, *, deleting: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = _at(timedelta(minutes=3))
        meta["finalizers"] = ["kubernetes.io/pvc-protection"]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": {"volumeName": f"pv-{name}"}}


def _event(pod: str, reason: str, message: str, *, seen: timedelta, kind: str = "Warning") -> dict[str, Any]:
    """An events.k8s.io/v1 Event, the form the collector prefers."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{reason.lower()}", "namespace": "ns"},
        "regarding": {"kind": "Pod", "name": pod, "namespace": "ns", "uid": f"uid-{pod}"},
        "reason": reason,
        "note": message,
        "type": kind,
        "reportingController": "kubelet",
        "series": {"count": 4, "lastObservedTime": _at(seen)},
        "eventTime": _at(seen + timedelta(minutes=5)),
    }


def _diagnose(
    deleted: timedelta = timedelta(minutes=20),
    conditions: list[dict[str, str]] | None = None,
    **fields: Any,
) -> Diagnosis:
    """`conditions` None: the namespace controller has written its (OK) conditions; [] none at all."""
    if conditions is None:
        conditions = [CONTENT_OK]
    base: dict[str, Any] = {
        "cluster": "c",
        "namespace": "ns",
        "observed_at": NOW,
        "namespace_object": _namespace(deleted, conditions),
        "resource_types": (PODS, PVCS),
        "server_version": V133,
        "leases": FRESH,
    }
    base.update(fields)
    return diagnose(NamespaceSnapshot(**base))


def _only(diagnosis: Diagnosis, cause: Cause) -> Finding:
    found = [f for f in diagnosis.findings if f.cause is cause]
    assert len(found) == 1, [(f.cause, f.summary) for f in diagnosis.findings]
    return found[0]


# --- /version -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (V115, (1, 15, 12, "v1.15.12")),
        ({"major": "1", "minor": "28+", "gitVersion": "v1.28.9-eks-036c24b"}, (1, 28, 9, "v1.28.9-eks-036c24b")),
        ({"major": "1", "minor": "27", "gitVersion": "v1.27"}, (1, 27, None, "v1.27")),  # a minor alone
        ({"major": "1", "minor": "30+"}, (1, 30, None, "1.30")),
    ],
)
def test_the_server_version_is_read_from_git_version_or_major_and_minor(
    document: dict[str, str], expected: tuple[Any, ...]
) -> None:
    version = server_version(document)
    assert version is not None
    assert (version.major, version.minor, version.patch, version.text) == expected


@pytest.mark.parametrize("document", [None, {}, {"gitVersion": "kube-emulator"}, {"major": "one", "minor": "x"}])
def test_an_unreadable_version_is_none(document: Any) -> None:
    assert server_version(document) is None


# --- no deletion conditions -----------------------------------------------------------------------


def test_a_namespace_seconds_into_its_deletion_is_content_deleting_even_with_a_lapsed_lease() -> None:
    diagnosis = _diagnose(timedelta(seconds=8), leases=STALE, conditions=[])
    assert diagnosis.cause is Cause.CONTENT_DELETING
    assert not any(f.blocking for f in diagnosis.findings)


def test_before_1_16_an_empty_namespace_younger_than_the_resync_is_content_deleting() -> None:
    diagnosis = _diagnose(timedelta(minutes=3), server_version=V115, leases=(), conditions=[])
    finding = _only(diagnosis, Cause.CONTENT_DELETING)
    assert finding.blocking is False
    assert "resyncs every 5 minutes" in finding.summary
    assert any(
        "v1.15.12: before 1.16 the namespace controller writes no deletion conditions" in e for e in finding.evidence
    )


def test_before_1_16_an_empty_namespace_older_than_the_resync_is_stuck() -> None:
    diagnosis = _diagnose(timedelta(minutes=12), server_version=V115, leases=(), conditions=[])
    assert diagnosis.cause is Cause.UNKNOWN
    assert any("the API server is v1.15.12" in e for f in diagnosis.findings for e in f.evidence)


def test_a_lapsed_lease_says_the_namespace_controller_is_not_running() -> None:
    diagnosis = _diagnose(timedelta(minutes=3), leases=STALE, conditions=[])
    finding = _only(diagnosis, Cause.UNKNOWN)
    assert finding.blocking is True
    assert finding.summary.startswith("the namespace controller is not running")
    assert "longer than its 15s duration" in finding.evidence[0]
    assert finding.remedies[0].action is Action.RESTORE_CONTROLLER


def test_a_fresh_lease_past_the_resync_is_stuck_and_asks_for_the_log() -> None:
    young = _diagnose(timedelta(minutes=4), conditions=[])
    assert young.cause is Cause.CONTENT_DELETING
    assert "has not got to this namespace yet" in young.findings[0].summary
    old = _diagnose(timedelta(minutes=6), conditions=[])
    finding = _only(old, Cause.UNKNOWN)
    assert finding.blocking is True
    assert "is running, but its namespace controller has written nothing" in finding.summary
    assert finding.remedies[0].action is Action.INVESTIGATE


def test_without_a_lease_the_controllers_state_cannot_be_seen() -> None:
    young = _diagnose(timedelta(minutes=2), leases=(), conditions=[])
    assert young.cause is Cause.CONTENT_DELETING
    assert any("cannot be seen" in e for e in young.findings[0].evidence)
    old = _diagnose(timedelta(minutes=30), leases=(), conditions=[])
    finding = _only(old, Cause.UNKNOWN)
    assert "there is no Lease kube-system/kube-controller-manager" in finding.evidence[0]
    assert finding.remedies[0].action is Action.INVESTIGATE


def test_leases_that_could_not_be_read_are_not_an_absent_lease() -> None:
    gap = Gap(what="list leases (cluster-wide)", reason="forbidden")
    diagnosis = _diagnose(timedelta(minutes=30), leases=(), gaps=(gap,), conditions=[])
    finding = _only(diagnosis, Cause.UNKNOWN)
    assert finding.evidence[0].startswith("the cluster's Leases could not be read")


# --- pods past their grace period on Ready nodes --------------------------------------------------


def test_kubelet_errors_are_a_blocking_deletion_error_with_the_events_quoted() -> None:
    message = (
        'UnmountVolume.TearDown failed for volume "data" : kubernetes.io/csi: Unmounter.TearDownAt failed: '
        "rpc error: code = Internal desc = umount: target is busy"
    )
    diagnosis = _diagnose(
        conditions=[CONTENT_FAILURE],
        contents={"pods": (_pod("db-0", past_grace=timedelta(minutes=4), claim="data", containers="stopped"),)},
        nodes={"node-1": _node("node-1")},
        events=(_event("db-0", "FailedUnMount", message, seen=timedelta(seconds=40)),),
    )
    finding = _only(diagnosis, Cause.DELETION_ERROR)
    assert diagnosis.cause is Cause.DELETION_ERROR
    assert finding.blocking is True
    assert f"Warning FailedUnMount from kubelet (4 times, last 40s ago): {message}" in finding.evidence
    assert [r.action for r in finding.remedies][:2] == [Action.INVESTIGATE, Action.FORCE_DELETE_POD]
    force = finding.remedies[1]
    assert force.risk is Risk.HIGH
    assert "holds a volume" in force.leaves_behind[0]
    # the controller's "unexpected items ... Resource=pods" is that pod: no second, generic deletion_error
    assert len([f for f in diagnosis.findings if f.cause is Cause.DELETION_ERROR]) == 1


def test_a_detach_error_on_the_pods_volume_attachment_is_a_kubelet_side_error() -> None:
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": "csi-123"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-data"}},
        "status": {"attached": True, "detachError": {"time": _at(timedelta(minutes=1)), "message": "volume busy"}},
    }
    diagnosis = _diagnose(
        contents={
            "pods": (_pod("db-0", past_grace=timedelta(minutes=4), claim="data"),),
            "persistentvolumeclaims": (_claim("data", deleting=False),),
        },
        nodes={"node-1": _node("node-1")},
        volume_attachments=(attachment,),
    )
    finding = _only(diagnosis, Cause.DELETION_ERROR)
    assert any("VolumeAttachment csi-123 (volume pv-data on node node-1): detach failed" in e for e in finding.evidence)


def test_an_error_event_from_before_the_deletion_is_not_the_kubelets_teardown_error() -> None:
    old = _event("db-0", "FailedKillPod", "error killing pod: old", seen=timedelta(hours=2))
    diagnosis = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(minutes=3)),)},
        nodes={"node-1": _node("node-1")},
        events=(old,),
    )
    assert diagnosis.cause is Cause.CONTENT_DELETING
    assert not any(f.cause is Cause.DELETION_ERROR for f in diagnosis.findings)


def test_a_recent_killing_event_is_progress() -> None:
    killing = _event("web-1", "Killing", "Stopping container app", seen=timedelta(minutes=1), kind="Normal")
    diagnosis = _diagnose(
        contents={"pods": (_pod("web-1", past_grace=timedelta(minutes=30)),)},
        nodes={"node-1": _node("node-1")},
        events=(killing,),
    )
    finding = _only(diagnosis, Cause.CONTENT_DELETING)
    assert "still being torn down" in finding.summary
    assert any(e.startswith("progress: Normal Killing from kubelet") for e in finding.evidence)
    assert finding.remedies[0].action is Action.WAIT


def test_no_progress_past_ten_minutes_asks_to_look_at_the_kubelet_before_a_force_delete() -> None:
    diagnosis = _diagnose(
        contents={"pods": (_pod("web-1", past_grace=timedelta(minutes=15)),)},
        nodes={"node-1": _node("node-1")},
    )
    finding = _only(diagnosis, Cause.CONTENT_DELETING)
    assert finding.summary.startswith("pod web-1: no progress for 15m; look at the kubelet on node node-1")
    assert [r.action for r in finding.remedies] == [Action.INVESTIGATE, Action.FORCE_DELETE_POD]
    assert finding.remedies[1].risk is Risk.MEDIUM  # no volume, no StatefulSet
    # within ten minutes, the same pod is only waited for
    early = _diagnose(
        contents={"pods": (_pod("web-1", past_grace=timedelta(minutes=3)),)},
        nodes={"node-1": _node("node-1")},
    )
    assert early.findings[0].remedies[0].action is Action.WAIT


def test_force_deleting_a_statefulset_pod_is_high_risk_and_says_why() -> None:
    diagnosis = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(minutes=15), owner="db"),)},
        nodes={"node-1": _node("node-1")},
    )
    force = next(r for f in diagnosis.findings for r in f.remedies if r.action is Action.FORCE_DELETE_POD)
    assert force.risk is Risk.HIGH
    assert force.leaves_behind[0].startswith("StatefulSet db recreates db-0 at once")


# --- OrderedNamespaceDeletion ---------------------------------------------------------------------


def test_ordered_deletion_is_said_only_where_the_version_has_it_on() -> None:
    contents = {
        "pods": (_pod("w-1", past_grace=timedelta(minutes=5), node="lost"),),
        "persistentvolumeclaims": (_claim("other", deleting=False),),
    }
    fields = {"contents": contents, "nodes": {"lost": _node("lost", ready=False)}}
    on = _only(_diagnose(**fields), Cause.POD_ON_LOST_NODE)
    assert on.summary.endswith("; it holds the whole namespace (OrderedNamespaceDeletion)")
    assert any("v1.33.1: with OrderedNamespaceDeletion" in e and "(1 other object(s) wait)" in e for e in on.evidence)
    off = _only(_diagnose(server_version=V132, **fields), Cause.POD_ON_LOST_NODE)
    assert "OrderedNamespaceDeletion" not in off.summary
    assert not any("OrderedNamespaceDeletion" in e for e in off.evidence)


# --- pvc-protection -------------------------------------------------------------------------------


def test_a_pvc_whose_pod_is_inside_its_grace_period_does_not_block() -> None:
    diagnosis = _diagnose(
        contents={
            "pods": (_pod("db-0", past_grace=-timedelta(minutes=5), claim="data"),),
            "persistentvolumeclaims": (_claim("data"),),
        },
        nodes={"node-1": _node("node-1")},
    )
    assert not any(f.blocking for f in diagnosis.findings)
    pvc = next(f for f in diagnosis.findings if "PVC data" in f.summary)
    assert pvc.summary == "PVC data waits for pod(s) db-0, which are being deleted"
    assert any("pod db-0 (deleting, inside its grace period" in e for e in pvc.evidence)


def test_a_pvc_used_by_a_running_pod_or_a_failing_one_blocks() -> None:
    running = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=None, claim="data"),), "persistentvolumeclaims": (_claim("data"),)},
    )
    finding = _only(running, Cause.PVC_IN_USE)
    assert finding.blocking is True
    assert "pod db-0 (running, not being deleted) mounts it" in finding.evidence


@pytest.mark.parametrize(
    ("leases", "gaps", "cause", "words"),
    [
        (FRESH, (), Cause.CONTENT_DELETING, "(it lapses after 15s)"),
        ((), (), Cause.CONTENT_DELETING, "whether it runs cannot be seen"),
        (STALE, (), Cause.ORPHANED_FINALIZER, "is not running"),
    ],
)
def test_an_unused_pvc_is_orphaned_only_where_the_lease_shows_the_controller_down(
    leases: tuple[dict[str, Any], ...], gaps: tuple[Gap, ...], cause: Cause, words: str
) -> None:
    diagnosis = _diagnose(
        contents={"persistentvolumeclaims": (_claim("data"),)},
        leases=leases,
        gaps=gaps,
    )
    finding = next(f for f in diagnosis.findings if "PVC data" in f.summary)
    assert finding.cause is cause
    assert any(words in e for e in finding.evidence), finding.evidence
    if cause is Cause.ORPHANED_FINALIZER:
        assert finding.blocking is True
        assert [r.action for r in finding.remedies][:2] == [Action.RESTORE_CONTROLLER, Action.REMOVE_FINALIZER]
        assert finding.remedies[1].risk is Risk.LOW


def test_a_finished_pod_still_uses_its_claim_until_it_is_deleted() -> None:
    """podUsesPVC counts a scheduled pod naming the claim whatever its phase."""
    done = _pod("job-1", past_grace=None, claim="data")
    done["status"]["phase"] = "Succeeded"
    diagnosis = _diagnose(contents={"pods": (done,), "persistentvolumeclaims": (_claim("data"),)})
    finding = _only(diagnosis, Cause.PVC_IN_USE)
    assert "pod job-1 (succeeded, not being deleted) mounts it" in finding.evidence


def test_silent_pods_on_one_node_are_one_finding_naming_them_all() -> None:
    pods = tuple(_pod(f"web-{i}", past_grace=timedelta(minutes=20)) for i in range(5))
    diagnosis = _diagnose(contents={"pods": pods}, nodes={"node-1": _node("node-1")})
    finding = _only(diagnosis, Cause.CONTENT_DELETING)
    assert finding.summary.startswith("5 pods (web-0, web-1, web-2, ...): no progress for 20m; look at the kubelet")
    assert [o.name for o in finding.objects] == [f"web-{i}" for i in range(5)]
    assert [r.action for r in finding.remedies] == [Action.INVESTIGATE] + [Action.FORCE_DELETE_POD] * 5


# --- issue 37 §5: pods the kubelet cannot finish (pod_not_terminating) ------------------------------


def _nfs_volume(claim: str, server: str) -> dict[str, Any]:
    """A PersistentVolume as the collector keeps it (`trim_volume`): an NFS share bound to `claim` in ns."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{claim}"},
        "spec": {"nfs": {"server": server, "path": "/export"}, "claimRef": {"namespace": "ns", "name": claim}},
    }


def _csi_volume(claim: str, driver: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{claim}"},
        "spec": {"csi": {"driver": driver}, "claimRef": {"namespace": "ns", "name": claim}},
    }


def _csi_node(node: str, *drivers: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": d} for d in drivers]},
    }


def test_a_pod_standing_still_past_the_bound_on_a_ready_node_whose_nfs_server_is_gone_is_not_terminating() -> None:
    pod = _pod("app-0", past_grace=timedelta(minutes=45), claim="shared", containers="stopped")
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = _at(timedelta(minutes=45))
    diagnosis = _diagnose(
        conditions=[CONTENT_FAILURE],
        contents={"pods": (pod,)},
        nodes={"node-1": _node("node-1")},
        persistent_volumes=(_nfs_volume("shared", "nfs-server.ns.svc.cluster.local"),),
    )
    finding = _only(diagnosis, Cause.POD_NOT_TERMINATING)
    assert diagnosis.cause is Cause.POD_NOT_TERMINATING
    assert finding.blocking is True
    assert finding.summary.startswith(
        "the kubelet on Ready node node-1 has not finished pod app-0: no progress for 45m "
        "(NFS server nfs-server.ns.svc.cluster.local is gone)"
    )
    assert [(o.kind, o.name) for o in finding.objects] == [("Pod", "app-0"), ("Node", "node-1")]
    assert any(
        "its Service nfs-server in ns (the namespace being deleted) no longer exists" in e for e in finding.evidence
    )
    assert any("their absence proves nothing" in e for e in finding.evidence)
    assert [(r.action, r.risk) for r in finding.remedies] == [
        (Action.RESTORE_BACKEND, Risk.NONE),  # the NFS server, named
        (Action.RESTORE_BACKEND, Risk.LOW),  # the kubelet on node-1
        (Action.FORCE_DELETE_POD, Risk.HIGH),  # it holds a volume
        (Action.FORCE_FINALIZE_NAMESPACE, Risk.HIGH),  # the last resort, last
    ]
    assert finding.remedies[0].targets[0].name == "nfs-server"
    assert "reboot" in finding.remedies[1].description
    assert finding.remedies[1].commands[0] == "systemctl restart kubelet  # on node node-1"
    # the controller's "unexpected items ... Resource=pods" is that pod: no second, generic deletion_error
    assert not [f for f in diagnosis.findings if f.cause is Cause.DELETION_ERROR]


def test_within_the_bound_the_same_pod_is_still_waited_on_saying_how_long_it_stood_still() -> None:
    pod = _pod("app-0", past_grace=timedelta(minutes=20), claim="shared", containers="stopped")
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = _at(timedelta(minutes=20))
    diagnosis = _diagnose(
        contents={"pods": (pod,)},
        nodes={"node-1": _node("node-1")},
        persistent_volumes=(_nfs_volume("shared", "nfs-server.ns.svc"),),
    )
    finding = _only(diagnosis, Cause.CONTENT_DELETING)
    assert not any(f.blocking for f in diagnosis.findings)
    assert finding.summary.startswith("pod app-0: no progress for 20m; look at the kubelet on node node-1")
    assert any("NFS share of server nfs-server.ns.svc" in e for e in finding.evidence)
    # a custom bound (the setting of issue 37 §1) moves the line
    assert _causes_with_bound(pod, timedelta(minutes=15)) == [Cause.POD_NOT_TERMINATING]
    assert _causes_with_bound(pod, timedelta(minutes=25)) == [Cause.CONTENT_DELETING]


def _causes_with_bound(pod: dict[str, Any], bound: timedelta) -> list[Cause]:
    """The causes the pod rules give with another bound (what the lead wires from issue 37 §1's setting)."""
    from bot.diagnosis import pods as pod_rules
    from bot.diagnosis.context import Context

    snapshot = NamespaceSnapshot(
        cluster=ClusterName("c"),
        namespace="ns",
        observed_at=NOW,
        namespace_object=_namespace(timedelta(hours=1), [CONTENT_OK]),
        resource_types=(PODS,),
        contents={"pods": (pod,)},
        nodes={"node-1": _node("node-1")},
        server_version=V133,
    )
    return [f.cause for f in pod_rules.findings(Context(snapshot), bound=bound)]


def test_a_csi_driver_without_a_node_plugin_on_the_pods_node_is_named() -> None:
    diagnosis = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(hours=2), claim="data"),)},
        nodes={"node-1": _node("node-1")},
        persistent_volumes=(_csi_volume("data", "ebs.csi.aws.com"),),
        csi_nodes={"node-1": _csi_node("node-1", "efs.csi.aws.com")},
    )
    finding = _only(diagnosis, Cause.POD_NOT_TERMINATING)
    assert "(CSI driver ebs.csi.aws.com has no node plugin on node node-1)" in finding.summary
    assert any("CSINode node-1 lists efs.csi.aws.com, not ebs.csi.aws.com" in e for e in finding.evidence)
    assert any("container(s) still running or not ready: app (running)" in e for e in finding.evidence)
    assert finding.remedies[0].targets[0].kind == "CSIDriver"
    # registered there, the driver is no broken backend: the kubelet's log is the place to look
    registered = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(hours=2), claim="data"),)},
        nodes={"node-1": _node("node-1")},
        persistent_volumes=(_csi_volume("data", "ebs.csi.aws.com"),),
        csi_nodes={"node-1": _csi_node("node-1", "ebs.csi.aws.com")},
    )
    finding = _only(registered, Cause.POD_NOT_TERMINATING)
    assert [r.action for r in finding.remedies][:2] == [Action.INVESTIGATE, Action.RESTORE_BACKEND]
    # a node without a CSINode (404): no CSI node plugin ever registered there
    none = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(hours=2), claim="data"),)},
        nodes={"node-1": _node("node-1")},
        persistent_volumes=(_csi_volume("data", "ebs.csi.aws.com"),),
        csi_nodes={"node-1": None},
    )
    assert any("node node-1 has no CSINode" in e for e in _only(none, Cause.POD_NOT_TERMINATING).evidence)
    assert "nothing nsstuck can read says why" in finding.remedies[0].description


def test_a_volume_attachment_detaching_for_longer_than_the_bound_is_no_progress() -> None:
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": "csi-9f", "deletionTimestamp": _at(timedelta(minutes=50))},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-data"}},
        "status": {"attached": True},
    }
    pods = (_pod("db-0", past_grace=timedelta(minutes=55), claim="data", containers="stopped"),)
    pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = _at(timedelta(minutes=55))
    fields = {
        "contents": {"pods": pods, "persistentvolumeclaims": (_claim("data", deleting=False),)},
        "nodes": {"node-1": _node("node-1")},
    }
    stuck = _only(_diagnose(volume_attachments=(attachment,), **fields), Cause.POD_NOT_TERMINATING)
    assert "VolumeAttachment csi-9f has been stuck detaching for 50m" in stuck.summary
    assert stuck.remedies[0].targets[0].kind == "VolumeAttachment"
    # a detach that began five minutes ago is progress
    attachment["metadata"]["deletionTimestamp"] = _at(timedelta(minutes=5))
    moving = _diagnose(volume_attachments=(attachment,), **fields)
    assert moving.cause is Cause.CONTENT_DELETING
    assert not any(f.blocking for f in moving.findings)


def test_kubelet_errors_past_the_bound_are_quoted_in_pod_not_terminating_and_a_lost_node_stays_lost() -> None:
    message = "error killing pod: rpc error: code = DeadlineExceeded desc = context deadline exceeded"
    diagnosis = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(hours=3)),)},
        nodes={"node-1": _node("node-1")},
        events=(_event("db-0", "FailedKillPod", message, seen=timedelta(hours=2, minutes=50)),),
    )
    finding = _only(diagnosis, Cause.POD_NOT_TERMINATING)
    assert any(e.endswith(message) for e in finding.evidence)
    assert any("created before the namespace was deleted" in e for e in finding.evidence)
    lost = _diagnose(
        contents={"pods": (_pod("db-0", past_grace=timedelta(hours=3)),)},
        nodes={"node-1": _node("node-1", ready=False)},
    )
    assert lost.cause is Cause.POD_ON_LOST_NODE
    assert not any(f.cause is Cause.POD_NOT_TERMINATING for f in lost.findings)


def test_a_pvc_whose_pod_is_not_terminating_blocks() -> None:
    diagnosis = _diagnose(
        contents={
            "pods": (_pod("db-0", past_grace=timedelta(hours=1), claim="data"),),
            "persistentvolumeclaims": (_claim("data"),),
        },
        nodes={"node-1": _node("node-1")},
    )
    pvc = _only(diagnosis, Cause.PVC_IN_USE)
    assert any("the kubelet on node node-1 has not finished it, no progress for 1h" in e for e in pvc.evidence)
    assert diagnosis.cause is Cause.POD_NOT_TERMINATING
