"""Issue 27: prediction paths no before-delete scenario reaches, built from dicts (the rules are pure), and
how a prediction is rendered for a terminal and for Slack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Cause, ControllerState, Diagnosis, NamespaceState, Prediction
from bot.domain.snapshot import GroupVersionStatus, NamespaceSnapshot, ResourceType
from bot.services.reporting import render_text
from bot.slack import blocks

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
KIALIS = ResourceType("kiali.io", "v1alpha1", "kialis", "Kiali", True, ("list", "delete"))
PODS = ResourceType("", "v1", "pods", "Pod", True, ("list", "delete"))
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, ("list", "delete"))


def _at(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _namespace(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "uid": "ns-uid", "labels": {"kubernetes.io/metadata.name": "ns"}, **meta},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _kiali() -> dict[str, Any]:
    return {
        "apiVersion": "kiali.io/v1alpha1",
        "kind": "Kiali",
        "metadata": {"name": "kiali", "namespace": "ns", "uid": "kiali-uid", "finalizers": ["kiali.io/finalizer"]},
    }


def _operator(namespace: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "kiali-operator"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kiali-operator", "namespace": namespace, "uid": "op-uid", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "operator", "image": "quay.io/kiali/kiali-operator:v2.17.0"}]},
            },
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
    }


def _lease(renewed: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"},
        "spec": {"holderIdentity": "cp-1_abc", "leaseDurationSeconds": 15, "renewTime": _at(renewed)},
    }


def _snapshot(**fields: Any) -> NamespaceSnapshot:
    base: dict[str, Any] = {
        "cluster": "c",
        "namespace": "ns",
        "observed_at": NOW,
        "namespace_object": _namespace(),
        "resource_types": (KIALIS, PODS, CONFIGMAPS),
        "server_version": {"gitVersion": "v1.34.2", "major": "1", "minor": "34"},
        "leases": (_lease(NOW - timedelta(seconds=3)),),
        "for_prediction": True,
    }
    base.update(fields)
    return NamespaceSnapshot(**base)


def _predicted(snapshot: NamespaceSnapshot) -> Prediction:
    diagnosis = diagnose(snapshot)
    assert diagnosis.state is NamespaceState.ACTIVE
    assert diagnosis.findings == ()
    assert diagnosis.prediction is not None
    assert Diagnosis.from_json(diagnosis.to_json()) == diagnosis
    assert not [r for f in diagnosis.prediction.findings for r in f.remedies if r.action.changes_cluster]
    return diagnosis.prediction


def test_a_namespace_read_alone_gets_no_prediction() -> None:
    """A snapshot of the namespace object alone (stored before predictions existed) tells nothing of what
    its deletion would meet."""
    diagnosis = diagnose(_snapshot(for_prediction=False))
    assert diagnosis.state is NamespaceState.ACTIVE
    assert diagnosis.prediction is None
    assert "prediction" not in diagnosis.to_json()


def test_the_report_carries_the_prediction_as_the_contract_says() -> None:
    report = diagnose(_snapshot()).to_json()
    assert report["state"] == "active"
    assert report["findings"] == []
    assert report["prediction"] == {"would_block": False, "complete": True, "gaps": [], "findings": []}


def test_a_controller_running_in_the_namespace_is_deleted_with_it() -> None:
    """From 1.33 the namespace controller deletes the pods first: the operator is gone before its Kiali."""
    prediction = _predicted(_snapshot(contents={"kialis": (_kiali(),)}, workloads=(_operator("ns"),)))
    assert prediction.would_block
    finding = prediction.findings[0]
    assert finding.cause is Cause.ORPHANED_FINALIZER
    assert finding.controller is not None
    assert finding.controller.state is ControllerState.DEAD
    assert any("OrderedNamespaceDeletion" in e for e in finding.evidence)
    assert "delete this object first" in finding.remedies[0].description
    assert finding.remedies[0].commands == ("kubectl delete kialis.kiali.io kiali -n ns",)


def test_before_ordered_deletion_a_controller_in_the_namespace_is_a_race() -> None:
    version = {"gitVersion": "v1.32.4", "major": "1", "minor": "32"}
    snapshot = _snapshot(contents={"kialis": (_kiali(),)}, workloads=(_operator("ns"),), server_version=version)
    prediction = _predicted(snapshot)
    assert not prediction.would_block
    assert not prediction.complete
    assert prediction.gaps[0].reason == "unknown"
    assert any("is a race" in e for e in prediction.findings[0].evidence)


def test_a_controller_running_elsewhere_removes_its_finalizer() -> None:
    prediction = _predicted(_snapshot(contents={"kialis": (_kiali(),)}, workloads=(_operator("kiali-operator"),)))
    assert prediction == Prediction()


def test_a_lapsed_controller_manager_lease_means_no_namespace_controller() -> None:
    prediction = _predicted(_snapshot(leases=(_lease(NOW - timedelta(minutes=5)),)))
    assert prediction.would_block
    finding = prediction.findings[0]
    assert finding.cause is Cause.UNKNOWN
    assert finding.summary.startswith("the namespace controller is not running")
    assert finding.remedies[0].action is Action.RESTORE_CONTROLLER


def test_a_group_version_failing_discovery_stops_every_deletion() -> None:
    """A Local APIService's version the API server does not serve (an upgrade half done, case 012)."""
    local = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1beta2.flowcontrol.apiserver.k8s.io"},
        "spec": {"group": "flowcontrol.apiserver.k8s.io", "version": "v1beta2"},
        "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]},
    }
    failing = GroupVersionStatus(
        "flowcontrol.apiserver.k8s.io/v1beta2",
        available=False,
        status_code=404,
        error="the server could not find the requested resource",
    )
    prediction = _predicted(_snapshot(apiservices=(local,), group_versions=(failing,)))
    assert prediction.would_block
    finding = prediction.findings[0]
    assert finding.cause is Cause.DISCOVERY_FAILURE
    assert "flowcontrol.apiserver.k8s.io/v1beta2" in finding.summary
    assert finding.remedies[0].action is Action.INVESTIGATE


def _webhook(client: dict[str, Any], resources: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "guard"},
        "webhooks": [
            {
                "name": "guard.example.com",
                "clientConfig": client,
                "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}],
                "failurePolicy": "Fail",
            }
        ],
    }


def test_a_dead_webhook_on_the_namespace_itself_refuses_the_delete() -> None:
    hook = _webhook({"service": {"namespace": "guard", "name": "guard"}}, ["namespaces"])
    prediction = _predicted(_snapshot(webhook_configurations=(hook,)))
    assert prediction.would_block
    finding = prediction.findings[0]
    assert finding.cause is Cause.WEBHOOK_BLOCKS_DELETE
    assert "the DELETE of the namespace itself" in finding.summary
    assert [o.kind for o in finding.objects] == ["ValidatingWebhookConfiguration", "Namespace"]
    # its backend is gone: deleting the configuration is the fix, a step for a person before the delete
    assert finding.remedies[0].action is Action.PREPARE
    assert finding.remedies[0].commands == ("kubectl delete validatingwebhookconfiguration guard",)


def test_a_url_webhook_on_the_deletes_cannot_be_checked_and_is_a_gap() -> None:
    hook = _webhook({"url": "https://guard.example.com/validate"}, ["configmaps"])
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns", "uid": "u"}}
    prediction = _predicted(_snapshot(webhook_configurations=(hook,), contents={"configmaps": (configmap,)}))
    assert not prediction.would_block
    gap = "whether webhook guard.example.com (https://guard.example.com/validate) answers"
    assert [g.what for g in prediction.gaps] == [gap]
    assert prediction.findings[0].cause is Cause.WEBHOOK_BLOCKS_DELETE


def _pod(name: str, node: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": phase},
    }


def _node(name: str, *, ready: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown"}]},
    }


def test_pods_hold_the_namespace_only_on_a_node_that_exists_and_is_not_ready() -> None:
    out_of_service = [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]
    pods = (
        _pod("lost", "n-lost"),
        _pod("done", "n-lost", phase="Succeeded"),  # finished: removed at once
        _pod("fine", "n-ready"),
        _pod("orphan", "n-gone"),  # the pod garbage collector removes it
        _pod("shut", "n-shut"),  # NotReady and out of service: the pod garbage collector too
        _pod("unread", "n-unread"),  # its node could not be read: the snapshot's gap says so
    )
    nodes = {
        "n-lost": _node("n-lost", ready="Unknown"),
        "n-ready": _node("n-ready", ready="True"),
        "n-gone": None,
        "n-shut": _node("n-shut", ready="False", taints=out_of_service),
    }
    prediction = _predicted(_snapshot(contents={"pods": pods}, nodes=nodes))
    blocking = [f for f in prediction.findings if f.blocking]
    assert [f.cause for f in blocking] == [Cause.POD_ON_LOST_NODE]
    assert [o.name for o in blocking[0].objects] == ["lost", "n-lost"]
    assert "the whole namespace (OrderedNamespaceDeletion)" in blocking[0].summary
    collected = sorted(o.name for f in prediction.findings if not f.blocking for o in f.objects)
    assert collected == ["orphan", "shut"]


def test_a_claim_is_held_by_a_pod_that_would_be_held() -> None:
    pod = _pod("db-0", "n-lost")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "ns", "uid": "pvc", "finalizers": ["kubernetes.io/pvc-protection"]},
    }
    nodes = {"n-lost": _node("n-lost", ready="Unknown")}
    prediction = _predicted(_snapshot(contents={"pods": (pod,), "persistentvolumeclaims": (claim,)}, nodes=nodes))
    assert [f.cause for f in prediction.findings] == [Cause.POD_ON_LOST_NODE, Cause.PVC_IN_USE]
    # the same claim used by a pod on a Ready node goes with its pod: no finding
    nodes = {"n-lost": _node("n-lost", ready="True")}
    assert _predicted(_snapshot(contents={"pods": (pod,), "persistentvolumeclaims": (claim,)}, nodes=nodes)) == (
        Prediction()
    )


def test_a_terminal_and_slack_say_what_deleting_it_now_would_meet() -> None:
    hook = _webhook({"service": {"namespace": "guard", "name": "guard"}}, ["namespaces"])
    stuck = diagnose(_snapshot(webhook_configurations=(hook,)))
    text = render_text(stuck)
    assert text.splitlines()[0].startswith("c/ns: namespace is Active; deleting it now would get stuck: ")
    assert "[1] webhook_blocks_delete (WOULD BLOCK)" in text
    assert "before the delete, safest first:" in text
    verdict = blocks.verdict(stuck, requested_by="U1")
    assert len(verdict.blocks) == 2  # the line, and its context
    line = verdict.blocks[0]["text"]["text"]
    assert "is Active; *deleting it now would get stuck*: `webhook_blocks_delete`" in line
    assert "\n" not in line
    assert "details in the thread" in verdict.blocks[1]["elements"][0]["text"]
    messages, _ = blocks.report_parts(stuck, run_id=7)
    thread = [b for m in messages for b in m.blocks]
    assert not [b for b in thread if b["type"] == "actions"]  # no Request button, even with a run
    assert any("would block" in str(b.get("text")) for b in thread)

    clear = diagnose(_snapshot())
    assert render_text(clear) == "c/ns: namespace is Active; deleting it now: nothing would hold it\n"
    verdict = blocks.verdict(clear)
    assert verdict.blocks[0]["text"]["text"].endswith("is Active; deleting it now: nothing would hold it")
    assert len(verdict.blocks) == 1  # nothing for a thread
