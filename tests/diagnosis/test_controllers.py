"""Issue 22 §1 and §2 from snapshots: what makes a finalizer's controller alive, dead or unknown, and the
live controller that cannot finish (finalizer_deadlock). The emulator scenarios (tests/diagnosis/
test_scenarios.py, the issue 22 block of the scenario library) show the same end to end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Cause, ControllerState, Diagnosis, Finding
from bot.domain.snapshot import NamespaceSnapshot, ResourceType

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def _at(delta: timedelta) -> str:
    return (NOW - delta).isoformat().replace("+00:00", "Z")


DELETED = _at(timedelta(hours=1))
GADGETS = ResourceType("example.io", "v1", "gadgets", "Gadget", True, ("list", "delete"))
HELMCHARTS = ResourceType("helm.cattle.io", "v1", "helmcharts", "HelmChart", True, ("list", "delete"))
CHALLENGES = ResourceType("acme.cert-manager.io", "v1", "challenges", "Challenge", True, ("list", "delete"))
PODS = ResourceType("", "v1", "pods", "Pod", True, ("list", "delete"))
REFUSAL = "unable to create new content in namespace ns because it is being terminated"


def _held(rtype: ResourceType, finalizer: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": rtype.group_version,
        "kind": rtype.kind,
        "metadata": {
            "name": "held",
            "namespace": "ns",
            "uid": "uid-held",
            "deletionTimestamp": DELETED,
            "finalizers": [finalizer],
            **extra.pop("metadata", {}),
        },
        **extra,
    }


def _snapshot(rtype: ResourceType, held: dict[str, Any], **lists: Any) -> NamespaceSnapshot:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "uid": "ns-uid", "deletionTimestamp": DELETED},
        "spec": {"finalizers": ["kubernetes"]},
        "status": lists.pop("namespace_status", {"phase": "Terminating", "conditions": []}),
    }
    return NamespaceSnapshot(
        cluster="c",
        namespace="ns",
        observed_at=NOW,
        namespace_object=namespace,
        resource_types=(rtype,),
        contents={rtype.key: (held,)},
        **lists,
    )


def _finding(diagnosis: Diagnosis) -> Finding:
    judged = [f for f in diagnosis.findings if f.controller is not None]
    assert judged, [f.summary for f in diagnosis.findings]
    return judged[0]


def _state(snapshot: NamespaceSnapshot) -> ControllerState:
    controller = _finding(diagnose(snapshot)).controller
    assert controller is not None
    return controller.state


def _status_write(manager: str, ago: timedelta, subresource: str = "status") -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "time": _at(ago),
        "subresource": subresource,
        "fieldsV1": {"f:status": {}},
    }


def _event(message: str, *, reporter: str, ago: timedelta, about: str = "held", kind: str = "Gadget") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{about}.1", "namespace": "ns"},
        "involvedObject": {"kind": kind, "name": about, "namespace": "ns"},
        "reason": "CleanupFailed",
        "message": message,
        "type": "Warning",
        "source": {"component": reporter},
        "lastTimestamp": _at(ago),
    }


def _lease(namespace: str, name: str, renewed: timedelta, duration: int = 60) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": f"{name}-0", "renewTime": _at(renewed), "leaseDurationSeconds": duration},
    }


def _deployment(name: str, namespace: str, image: str, **status: Any) -> dict[str, Any]:
    replicas = status.pop("replicas", 1)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
        "status": status,
    }


# --- alive ----------------------------------------------------------------------------------------


def test_a_recent_status_write_by_another_manager_shows_the_controller_alive() -> None:
    held = _held(
        GADGETS,
        "gadgets.example.io/teardown",
        metadata={"managedFields": [_status_write("gadgetd", timedelta(minutes=2))]},
    )
    finding = _finding(diagnose(_snapshot(GADGETS, held)))
    assert finding.cause is Cause.CONTENT_DELETING
    assert not finding.blocking
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.ALIVE
    assert any("written 2m ago by gadgetd" in e for e in finding.controller.evidence)


def test_nsstucks_own_writes_and_old_writes_show_nothing() -> None:
    for write in (_status_write("nsstuck", timedelta(minutes=1)), _status_write("gadgetd", timedelta(minutes=11))):
        held = _held(GADGETS, "gadgets.example.io/teardown", metadata={"managedFields": [write]})
        assert _state(_snapshot(GADGETS, held)) is ControllerState.UNKNOWN, write


def test_a_recent_condition_transition_shows_the_controller_alive() -> None:
    held = _held(
        GADGETS,
        "gadgets.example.io/teardown",
        status={"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _at(timedelta(minutes=3))}]},
    )
    assert _state(_snapshot(GADGETS, held)) is ControllerState.ALIVE


def test_a_pods_status_is_its_kubelets_and_says_nothing_of_its_finalizers_controller() -> None:
    pod = _held(
        PODS,
        "batch.kubernetes.io/job-tracking",
        metadata={"managedFields": [_status_write("kubelet-ish", timedelta(minutes=1))]},
        status={"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _at(timedelta(minutes=1))}]},
    )
    # kube-controller-manager's controller, and no Lease: unknown, whatever the pod's status says
    assert _state(_snapshot(PODS, pod)) is ControllerState.UNKNOWN


def test_a_recent_event_from_a_controller_shows_it_alive_and_is_quoted_escaped() -> None:
    held = _held(GADGETS, "gadgets.example.io/teardown")
    event = _event('deleting "bucket"\nstep 2', reporter="gadgetd", ago=timedelta(minutes=4))
    finding = _finding(diagnose(_snapshot(GADGETS, held, events=(event,))))
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.ALIVE
    assert any('"deleting \\"bucket\\"\\nstep 2"' in e for e in finding.controller.evidence), finding.controller


def test_an_old_event_or_one_from_the_kubelet_shows_nothing() -> None:
    held = _held(GADGETS, "gadgets.example.io/teardown")
    for event in (
        _event("x", reporter="gadgetd", ago=timedelta(minutes=30)),
        _event("x", reporter="kubelet", ago=timedelta(minutes=1)),
    ):
        finding = _finding(diagnose(_snapshot(GADGETS, held, events=(event,))))
        assert finding.controller is not None
        assert finding.controller.state is ControllerState.UNKNOWN
        # and the absence of Events is said to prove nothing
        assert any("proves nothing" in e for e in finding.controller.evidence)


def test_a_renewed_catalogued_lease_shows_the_controller_alive_without_any_workload() -> None:
    held = _held(CHALLENGES, "finalizer.acme.cert-manager.io")
    lease = _lease("kube-system", "cert-manager-controller", timedelta(seconds=20))
    # (within the bound of time without progress: past it, a live controller is no longer "at work")
    finding = _finding(diagnose(_snapshot(CHALLENGES, held, leases=(lease,)), no_progress_after=timedelta(hours=2)))
    assert finding.cause is Cause.CONTENT_DELETING
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.ALIVE
    assert any("Lease kube-system/cert-manager-controller was renewed 20s ago" in e for e in finding.evidence)


# --- dead, and what is not dead -------------------------------------------------------------------


def test_uninstalled_only_when_none_of_its_workloads_images_or_leases_exists() -> None:
    held = _held(CHALLENGES, "finalizer.acme.cert-manager.io")
    dead = _finding(diagnose(_snapshot(CHALLENGES, held)))
    assert dead.controller is not None
    assert dead.controller.state is ControllerState.DEAD
    assert "its controller was uninstalled" in dead.summary
    # a Lease that lapsed: something held it; time alone never proves the controller dead
    stale = _lease("kube-system", "cert-manager-controller", timedelta(hours=2))
    unknown = _finding(diagnose(_snapshot(CHALLENGES, held, leases=(stale,))))
    assert unknown.controller is not None
    assert unknown.controller.state is ControllerState.UNKNOWN
    assert "uninstalled" not in unknown.summary
    assert unknown.remedies[0].action is Action.RESTORE_CONTROLLER
    removal = next(r for r in unknown.remedies if r.action is Action.REMOVE_FINALIZER)
    assert any("whether it runs is unknown" in line for line in removal.leaves_behind)


def test_a_workload_scaled_to_zero_is_dead_and_one_down_briefly_is_not() -> None:
    held = _held(CHALLENGES, "finalizer.acme.cert-manager.io")
    image = "quay.io/jetstack/cert-manager-controller:v1.16.1"
    zero = _deployment("cert-manager", "cert-manager", image, replicas=0)
    assert _state(_snapshot(CHALLENGES, held, workloads=(zero,))) is ControllerState.DEAD

    def down(minutes: int) -> dict[str, Any]:
        condition = {"type": "Available", "status": "False", "lastTransitionTime": _at(timedelta(minutes=minutes))}
        return _deployment("cert-manager", "cert-manager", image, readyReplicas=0, conditions=[condition])

    assert _state(_snapshot(CHALLENGES, held, workloads=(down(15),))) is ControllerState.DEAD
    assert _state(_snapshot(CHALLENGES, held, workloads=(down(5),))) is ControllerState.UNKNOWN


def test_a_webhook_whose_service_is_gone_shows_its_controller_dead() -> None:
    held = _held(GADGETS, "gadgets.example.io/teardown")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gadgets-webhook"},
        "webhooks": [
            {
                "name": "validate.gadgets.example.io",
                "clientConfig": {"service": {"namespace": "gadget-system", "name": "gadget-webhook"}},
                "rules": [
                    {"operations": ["DELETE"], "apiGroups": ["other.org"], "apiVersions": ["v1"], "resources": ["x"]}
                ],
                "failurePolicy": "Ignore",
            }
        ],
    }
    finding = _finding(diagnose(_snapshot(GADGETS, held, webhook_configurations=(webhook,))))
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.DEAD
    assert any("service/gadget-webhook in gadget-system, which no longer exists" in e for e in finding.evidence)


def test_a_distributions_controller_is_never_dead_for_want_of_a_workload() -> None:
    held = _held(HELMCHARTS, "wrangler.cattle.io/on-helm-chart-remove")
    finding = _finding(diagnose(_snapshot(HELMCHARTS, held)))
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.UNKNOWN
    assert "uninstalled" not in finding.summary
    assert any("k3s and RKE2 servers" in e for e in finding.controller.evidence)
    # its Lease shows it
    lease = _lease("kube-system", "k3s", timedelta(seconds=5))
    assert _state(_snapshot(HELMCHARTS, held, leases=(lease,))) is ControllerState.ALIVE


def test_kube_controller_managers_controllers_are_judged_by_its_lease() -> None:
    pod = _held(PODS, "batch.kubernetes.io/job-tracking")
    fresh = _lease("kube-system", "kube-controller-manager", timedelta(seconds=3), duration=15)
    alive = _finding(diagnose(_snapshot(PODS, pod, leases=(fresh,))))
    assert alive.cause is Cause.CONTENT_DELETING
    # no Lease and no namespace condition: perhaps a control plane that does not run it at all
    none = _finding(diagnose(_snapshot(PODS, pod, namespace_status={"phase": "Terminating"})))
    assert none.controller is not None
    assert none.controller.state is ControllerState.UNKNOWN
    assert any("may not run kube-controller-manager's controllers at all" in e for e in none.controller.evidence)


# --- finalizer_deadlock ---------------------------------------------------------------------------


def test_the_terminating_namespaces_refusal_in_status_is_a_deadlock_with_the_manual_cleanup_first() -> None:
    message = f'jobs.batch "helm-delete-traefik" is forbidden: {REFUSAL}'
    held = _held(
        HELMCHARTS,
        "wrangler.cattle.io/on-helm-chart-remove",
        status={"conditions": [{"type": "Failed", "status": "True", "message": message}]},
    )
    diagnosis = diagnose(_snapshot(HELMCHARTS, held))
    finding = diagnosis.findings[0]
    assert finding.cause is Cause.FINALIZER_DEADLOCK
    assert finding.blocking
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.ALIVE
    assert any('\\"helm-delete-traefik\\" is forbidden' in e for e in finding.evidence)
    assert finding.remedies[0].action is Action.INVESTIGATE
    assert "Uninstall the Helm release by hand" in finding.remedies[0].description
    assert finding.remedies[1].action is Action.REMOVE_FINALIZER
    assert Action.RESTORE_CONTROLLER not in {r.action for r in finding.remedies}


def test_an_event_in_the_namespace_shows_the_deadlock_and_another_namespaces_refusal_does_not() -> None:
    held = _held(GADGETS, "gadgets.example.io/teardown")
    about_other = _event(
        f'jobs.batch "cleanup" is forbidden: {REFUSAL}',
        reporter="gadgetd",
        ago=timedelta(hours=2),
        about="x",
        kind="Job",
    )
    assert diagnose(_snapshot(GADGETS, held, events=(about_other,))).cause is Cause.FINALIZER_DEADLOCK
    elsewhere = _event(
        'jobs.batch "cleanup" is forbidden: unable to create new content in namespace other because it is being '
        "terminated",
        reporter="gadgetd",
        ago=timedelta(hours=2),
    )
    assert diagnose(_snapshot(GADGETS, held, events=(elsewhere,))).cause is Cause.ORPHANED_FINALIZER
    # a ReplicaSet refused its pods: kube-controller-manager's own, not the Gadget controller's
    pods_refused = _event(
        f'pods "web-5d9c-x" is forbidden: {REFUSAL}',
        reporter="replicaset-controller",
        ago=timedelta(hours=2),
        about="web-5d9c",
        kind="ReplicaSet",
    )
    assert diagnose(_snapshot(GADGETS, held, events=(pods_refused,))).cause is Cause.ORPHANED_FINALIZER


def test_the_controller_travels_in_the_json_report() -> None:
    held = _held(CHALLENGES, "finalizer.acme.cert-manager.io")
    diagnosis = diagnose(_snapshot(CHALLENGES, held))
    report = diagnosis.to_json()
    assert report["findings"][0]["controller"]["state"] == "dead"
    assert report["findings"][0]["controller"]["evidence"]
    assert Diagnosis.from_json(report) == diagnosis


def test_a_control_plane_controller_is_shown_alive_by_its_workload_and_never_dead_without_one() -> None:
    services = ResourceType("", "v1", "services", "Service", True, ("list", "delete"))
    held = _held(services, "service.kubernetes.io/load-balancer-cleanup")
    nothing = _finding(diagnose(_snapshot(services, held)))
    assert nothing.controller is not None
    assert nothing.controller.state is ControllerState.UNKNOWN
    assert any("inside the control plane (cloud-controller-manager)" in e for e in nothing.controller.evidence)
    ccm = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "cloud-controller-manager", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": [{"name": "ccm", "image": "registry.k8s.io/ccm:v1"}]}}},
        "status": {"numberReady": 1},
    }
    assert _state(_snapshot(services, held, workloads=(ccm,))) is ControllerState.ALIVE
    ccm_down = {**ccm, "status": {"numberReady": 0}}
    assert _state(_snapshot(services, held, workloads=(ccm_down,))) is ControllerState.UNKNOWN
