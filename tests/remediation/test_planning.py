"""Planning a remedy from live objects (plain dicts): freshness, the exact operations, and took_effect."""

from __future__ import annotations

import copy
import json
import shlex
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.diagnosis import remedies
from bot.domain.findings import Action, Cause, Diagnosis, Finding, Gap, NamespaceState, Remedy, Risk
from bot.domain.refs import ClusterName, KubeObject, ObjectRef
from bot.domain.snapshot import NamespaceSnapshot
from bot.remediation.planning import cause_reasons, operations, stale_reasons, took_effect

DELETED_AT = "2026-11-20T08:00:25Z"


# -- live objects as the API server returns them -----------------------------------------------------


def kiali(
    *, finalizers: tuple[str, ...] = ("kiali.io/finalizer",), rv: str = "1074", uid: str = "u-kiali"
) -> KubeObject:
    return {
        "apiVersion": "kiali.io/v1alpha1",
        "kind": "Kiali",
        "metadata": {
            "name": "kiali",
            "namespace": "istio-system",
            "uid": uid,
            "resourceVersion": rv,
            "deletionTimestamp": DELETED_AT,
            "deletionGracePeriodSeconds": 0,
            "finalizers": list(finalizers),
        },
        "spec": {"auth": {"strategy": "anonymous"}},
    }


def namespace(
    name: str = "ci-runner-42",
    *,
    spec: tuple[str, ...] = ("kubernetes",),
    meta: tuple[str, ...] = (),
    rv: str = "1045",
    uid: str = "u-ns",
) -> KubeObject:
    metadata: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "resourceVersion": rv,
        "creationTimestamp": "2026-11-20T08:00:10Z",
        "deletionTimestamp": DELETED_AT,
        "labels": {"kubernetes.io/metadata.name": name},
    }
    if meta:
        metadata["finalizers"] = list(meta)
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
        "spec": {"finalizers": list(spec)} if spec else {},
        "status": {"phase": "Terminating", "conditions": [{"type": "NamespaceContentRemaining", "status": "False"}]},
    }


def apiservice(*, rv: str = "1040", uid: str = "u-api") -> KubeObject:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io", "uid": uid, "resourceVersion": rv},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1"},
    }


def webhook_config(*, rv: str = "1039", uid: str = "u-hook") -> KubeObject:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policy-webhook", "uid": uid, "resourceVersion": rv},
        "webhooks": [],
    }


def pod(
    *, rv: str = "1066", uid: str = "u-pod", deleting: bool = True, grace: int = 30, finalizers: tuple[str, ...] = ()
) -> KubeObject:
    metadata: dict[str, Any] = {"name": "worker-0", "namespace": "batch-jobs", "uid": uid, "resourceVersion": rv}
    if deleting:
        metadata["deletionTimestamp"] = DELETED_AT
        metadata["deletionGracePeriodSeconds"] = grace
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "node-3"}}


def ref(obj: KubeObject, resource: str) -> ObjectRef:
    return ObjectRef.of(obj, resource=resource)


# -- remedies as the diagnosis builds them ------------------------------------------------------------


def remove_kiali_finalizer() -> Remedy:
    return remedies.remove_finalizer(ref(kiali(), "kialis"), "kiali.io/finalizer", risk=Risk.MEDIUM, consequence="x")


def remove_ns_finalizer(live: KubeObject, finalizer: str, *, in_spec: bool) -> Remedy:
    return remedies.remove_namespace_finalizer(ref(live, "namespaces"), finalizer, in_spec=in_spec, consequence="x")


def force_finalize(live: KubeObject | None = None) -> Remedy:
    return remedies.force_finalize(ref(live or namespace(), "namespaces"), ())


def delete_apiservice() -> Remedy:
    return remedies.delete_apiservice(ref(apiservice(), "apiservices"), risk=Risk.LOW, consequence="x")


def delete_webhook() -> Remedy:
    return remedies.delete_webhook_configuration(
        ref(webhook_config(), "validatingwebhookconfigurations"), consequence="x"
    )


def force_delete_pod() -> Remedy:
    return remedies.force_delete_pod(ref(pod(), "pods"), risk=Risk.MEDIUM, consequence="x")


SPEC_NS = namespace(spec=("kubernetes", "ci.example.com/cleanup"))
META_NS = namespace("kubesphere-sample", spec=(), meta=("finalizers.kubesphere.io/namespaces",), rv="1072")

# (remedy, the live object the diagnosis saw, a function that re-creates it with changes)
CASES: dict[str, tuple[Remedy, KubeObject]] = {
    "remove_finalizer": (remove_kiali_finalizer(), kiali()),
    "remove_namespace_finalizer_spec": (
        remove_ns_finalizer(SPEC_NS, "ci.example.com/cleanup", in_spec=True),
        SPEC_NS,
    ),
    "remove_namespace_finalizer_metadata": (
        remove_ns_finalizer(META_NS, "finalizers.kubesphere.io/namespaces", in_spec=False),
        META_NS,
    ),
    "force_finalize_namespace": (force_finalize(), namespace()),
    "delete_apiservice": (delete_apiservice(), apiservice()),
    "delete_webhook_configuration": (delete_webhook(), webhook_config()),
    "force_delete_pod": (force_delete_pod(), pod()),
}


def with_meta(obj: KubeObject, **changes: Any) -> KubeObject:
    out = copy.deepcopy(obj)
    out["metadata"].update(changes)
    return out


def without_the_finalizer(remedy: Remedy, obj: KubeObject) -> KubeObject:
    """`obj` after someone else removed the remedy's finalizer (and thereby bumped its resourceVersion)."""
    out = with_meta(obj, resourceVersion="2000")
    if remedy.action is Action.FORCE_FINALIZE_NAMESPACE:
        out["spec"] = {}
        return out
    out["metadata"]["finalizers"] = [f for f in out["metadata"].get("finalizers", []) if f != remedy.finalizer]
    spec = out.get("spec") or {}
    if "finalizers" in spec:
        spec["finalizers"] = [f for f in spec["finalizers"] if f != remedy.finalizer]
    return out


# -- stale_reasons -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_a_target_as_the_diagnosis_saw_it_is_fresh(case: str) -> None:
    remedy, live = CASES[case]
    assert stale_reasons(remedy, [copy.deepcopy(live)]) == []


@pytest.mark.parametrize("case", CASES)
def test_a_target_that_is_gone(case: str) -> None:
    remedy, _ = CASES[case]
    assert stale_reasons(remedy, [None]) == [f"{remedy.targets[0].display} is gone"]


@pytest.mark.parametrize("case", CASES)
def test_a_target_deleted_and_recreated_wins_over_every_other_change(case: str) -> None:
    remedy, live = CASES[case]
    recreated = without_the_finalizer(remedy, with_meta(live, uid="u-new"))
    old_uid = remedy.targets[0].uid
    assert stale_reasons(remedy, [recreated]) == [
        f"{remedy.targets[0].display} was deleted and re-created (UID {old_uid} → u-new)"
    ]


@pytest.mark.parametrize(
    "case", ["remove_finalizer", "remove_namespace_finalizer_spec", "remove_namespace_finalizer_metadata"]
)
def test_the_finalizer_to_remove_is_no_longer_there(case: str) -> None:
    remedy, live = CASES[case]
    # the resourceVersion changed too: the finalizer is the more useful reason
    assert stale_reasons(remedy, [without_the_finalizer(remedy, live)]) == [
        f"{remedy.finalizer} is no longer on {remedy.targets[0].display}"
    ]


def test_a_namespace_finalizer_counts_in_either_list() -> None:
    # the diagnosis saw it in spec.finalizers; it is now (also) in metadata.finalizers: still there
    remedy, live = CASES["remove_namespace_finalizer_spec"]
    moved = with_meta(live, finalizers=["ci.example.com/cleanup"])
    moved["spec"] = {"finalizers": ["kubernetes"]}
    assert stale_reasons(remedy, [moved]) == []
    # and a namespace finalizer found in neither list is reported as gone from the namespace
    moved["metadata"]["finalizers"] = []
    assert stale_reasons(remedy, [moved]) == ["ci.example.com/cleanup is no longer on namespaces/ci-runner-42"]


def test_force_finalize_of_a_namespace_already_finalized() -> None:
    remedy, live = CASES["force_finalize_namespace"]
    done = without_the_finalizer(remedy, live)
    assert stale_reasons(remedy, [done]) == [
        "namespaces/ci-runner-42 has no spec.finalizers left: it is already finalized"
    ]


@pytest.mark.parametrize("case", CASES)
def test_a_target_changed_since_the_diagnosis(case: str) -> None:
    remedy, live = CASES[case]
    changed = with_meta(live, resourceVersion="1999", labels={"touched": "yes"})
    rv = remedy.targets[0].resource_version
    assert stale_reasons(remedy, [changed]) == [
        f"{remedy.targets[0].display} changed since the diagnosis (resourceVersion {rv} → 1999)"
    ]


def test_one_reason_per_changed_target_in_target_order() -> None:
    first, second, third = pod(), with_meta(pod(), name="worker-1", uid="u-pod-1"), with_meta(pod(), name="worker-2")
    remedy = Remedy(
        action=Action.FORCE_DELETE_POD,
        risk=Risk.MEDIUM,
        description="x",
        targets=(ref(first, "pods"), ref(second, "pods"), ref(third, "pods")),
    )
    assert stale_reasons(remedy, [first, second, third]) == []
    reasons = stale_reasons(remedy, [None, second, with_meta(third, resourceVersion="1100")])
    assert reasons == [
        "pods/worker-0 is gone",
        "pods/worker-2 changed since the diagnosis (resourceVersion 1066 → 1100)",
    ]


def test_a_reference_without_uid_or_version_checks_what_it_has() -> None:
    bare = ObjectRef("v1", "Pod", "worker-0", namespace="batch-jobs", resource="pods")
    remedy = remedies.force_delete_pod(bare, risk=Risk.MEDIUM, consequence="x")
    assert stale_reasons(remedy, [pod(uid="anything", rv="9")]) == []
    assert stale_reasons(remedy, [None]) == ["pods/worker-0 is gone"]


# -- refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", [a for a in Action if not a.changes_cluster])
def test_actions_that_change_nothing_are_not_planned(action: Action) -> None:
    remedy = Remedy(action=action, risk=Risk.NONE, description="x", targets=(ref(pod(), "pods"),))
    with pytest.raises(ValueError, match="changes nothing"):
        stale_reasons(remedy, [pod()])
    with pytest.raises(ValueError, match="changes nothing"):
        operations(remedy, [pod()])
    with pytest.raises(ValueError, match="changes nothing"):
        took_effect(remedy, pod(), None)


def test_live_objects_must_pair_with_the_targets() -> None:
    remedy, live = CASES["delete_apiservice"]
    with pytest.raises(ValueError, match="2 live object"):
        stale_reasons(remedy, [live, live])
    with pytest.raises(ValueError, match="0 live object"):
        operations(remedy, [])


def test_operations_refuse_what_cannot_be_planned() -> None:
    remedy, live = CASES["remove_finalizer"]
    with pytest.raises(ValueError, match="is gone"):
        operations(remedy, [None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"kiali\.io/finalizer is no longer on kialis\.kiali\.io/kiali"):
        operations(remedy, [kiali(finalizers=("other.io/x",))])
    with pytest.raises(ValueError, match=r"is not kialis\.kiali\.io/kiali"):
        operations(remedy, [with_meta(live, name="other")])
    no_uid = copy.deepcopy(live)
    del no_uid["metadata"]["uid"]
    with pytest.raises(ValueError, match="no uid or resourceVersion"):
        operations(remedy, [no_uid])
    finalizer_less = Remedy(action=Action.REMOVE_FINALIZER, risk=Risk.LOW, description="x", targets=remedy.targets)
    with pytest.raises(ValueError, match="must name its finalizer"):
        stale_reasons(finalizer_less, [live])


# -- operations --------------------------------------------------------------------------------------


def _only(remedy: Remedy, live: KubeObject) -> Any:
    ops = operations(remedy, [live])
    assert len(ops) == 1
    return ops[0]


def _pasted_patch(kubectl: str) -> Any:
    args = shlex.split(kubectl)
    assert args[args.index("--type=json") + 1] == "-p"
    return json.loads(args[args.index("-p") + 1])


def test_remove_finalizer_is_a_guarded_json_patch_at_the_live_index() -> None:
    remedy = remove_kiali_finalizer()  # the diagnosis saw the finalizer at index 0
    live = kiali(finalizers=("other.io/keep", "kiali.io/finalizer"), rv="1080")  # now it is at 1
    op = _only(remedy, live)
    expected = [
        {"op": "test", "path": "/metadata/uid", "value": "u-kiali"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1080"},
        {"op": "test", "path": "/metadata/finalizers/1", "value": "kiali.io/finalizer"},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert op.method == "PATCH"
    assert op.path == "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis/kiali"
    assert op.content_type == "application/json-patch+json"
    assert op.body == expected
    assert op.target == ObjectRef(
        "kiali.io/v1alpha1",
        "Kiali",
        "kiali",
        namespace="istio-system",
        uid="u-kiali",
        resource_version="1080",
        finalizers=("other.io/keep", "kiali.io/finalizer"),
        resource="kialis",
    )
    assert op.summary == "remove kiali.io/finalizer from kialis.kiali.io/kiali"
    assert op.kubectl == (
        "kubectl patch kialis.kiali.io kiali -n istio-system --type=json -p '"
        + json.dumps(expected, separators=(",", ":"))
        + "'"
    )
    assert _pasted_patch(op.kubectl) == op.body


def test_remove_finalizer_from_a_core_object() -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mymap", "namespace": "finalizer-demo", "uid": "u-cm", "resourceVersion": "7"},
    }
    cm["metadata"]["finalizers"] = ["kubernetes"]
    remedy = remedies.remove_finalizer(ref(cm, "configmaps"), "kubernetes", risk=Risk.LOW, consequence="x")
    op = _only(remedy, cm)
    assert op.path == "/api/v1/namespaces/finalizer-demo/configmaps/mymap"
    assert op.kubectl.startswith("kubectl patch configmaps mymap -n finalizer-demo --type=json -p '")
    assert op.body[2] == {"op": "test", "path": "/metadata/finalizers/0", "value": "kubernetes"}


def test_namespace_finalizer_in_metadata_is_a_json_patch_of_the_namespace() -> None:
    remedy, live = CASES["remove_namespace_finalizer_metadata"]
    op = _only(remedy, live)
    assert (op.method, op.path, op.content_type) == (
        "PATCH",
        "/api/v1/namespaces/kubesphere-sample",
        "application/json-patch+json",
    )
    assert op.body == [
        {"op": "test", "path": "/metadata/uid", "value": "u-ns"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1072"},
        {"op": "test", "path": "/metadata/finalizers/0", "value": "finalizers.kubesphere.io/namespaces"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]
    assert op.kubectl.startswith("kubectl patch namespaces kubesphere-sample --type=json -p ")
    assert _pasted_patch(op.kubectl) == op.body
    assert op.summary == "remove finalizers.kubesphere.io/namespaces from namespaces/kubesphere-sample"


def test_namespace_finalizer_in_spec_is_a_put_to_finalize_with_the_live_namespace() -> None:
    remedy, _ = CASES["remove_namespace_finalizer_spec"]
    live = namespace(spec=("kubernetes", "ci.example.com/cleanup", "other.example.com/x"), rv="1050")
    pristine = copy.deepcopy(live)
    op = _only(remedy, live)
    expected = copy.deepcopy(live)
    expected["spec"]["finalizers"] = ["kubernetes", "other.example.com/x"]
    assert (op.method, op.path, op.content_type) == (
        "PUT",
        "/api/v1/namespaces/ci-runner-42/finalize",
        "application/json",
    )
    assert op.body == expected  # resourceVersion 1050 kept: the precondition
    assert op.body["metadata"]["resourceVersion"] == "1050"
    assert live == pristine  # the live object is not modified
    assert op.target.resource_version == "1050"
    assert op.summary == "remove ci.example.com/cleanup from the spec.finalizers of namespaces/ci-runner-42"
    assert op.kubectl == (
        "kubectl get namespace ci-runner-42 -o json | "
        """jq '.spec.finalizers -= ["ci.example.com/cleanup"]' | """
        "kubectl replace --raw /api/v1/namespaces/ci-runner-42/finalize -f -"
    )


def test_a_namespace_finalizer_in_both_lists_goes_from_metadata_first() -> None:
    live = namespace(spec=("x.example.com/f",), meta=("x.example.com/f",))
    remedy = remove_ns_finalizer(live, "x.example.com/f", in_spec=True)
    op = _only(remedy, live)
    assert op.method == "PATCH"
    assert op.body[-1] == {"op": "remove", "path": "/metadata/finalizers/0"}


def test_force_finalize_empties_spec_finalizers_through_finalize() -> None:
    remedy, _ = CASES["force_finalize_namespace"]
    live = namespace(spec=("kubernetes", "ci.example.com/cleanup"), meta=("foregroundDeletion",), rv="1100")
    op = _only(remedy, live)
    expected = copy.deepcopy(live)
    expected["spec"]["finalizers"] = []
    assert (op.method, op.path) == ("PUT", "/api/v1/namespaces/ci-runner-42/finalize")
    assert op.body == expected
    assert op.body["metadata"]["finalizers"] == ["foregroundDeletion"]  # metadata.finalizers are not touched
    assert op.summary == (
        "force-finalize namespaces/ci-runner-42: empty its spec.finalizers (now kubernetes, ci.example.com/cleanup)"
    )
    assert op.kubectl == (
        "kubectl get namespace ci-runner-42 -o json | jq '.spec.finalizers = []' | "
        "kubectl replace --raw /api/v1/namespaces/ci-runner-42/finalize -f -"
    )


def test_force_finalize_fills_in_type_meta() -> None:
    remedy, live = CASES["force_finalize_namespace"]
    bare = copy.deepcopy(live)
    del bare["apiVersion"], bare["kind"]
    op = _only(remedy, bare)
    assert (op.body["apiVersion"], op.body["kind"]) == ("v1", "Namespace")
    assert (op.target.api_version, op.target.kind) == ("v1", "Namespace")


def test_delete_apiservice_with_preconditions() -> None:
    remedy, _ = CASES["delete_apiservice"]
    op = _only(remedy, apiservice(rv="1041"))
    assert (op.method, op.path) == ("DELETE", "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io")
    assert op.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"uid": "u-api", "resourceVersion": "1041"},
    }
    assert op.content_type == "application/json"
    assert op.kubectl == "kubectl delete apiservices.apiregistration.k8s.io v1beta1.metrics.k8s.io"
    assert op.summary == "delete apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io"


def test_delete_webhook_configuration_with_preconditions() -> None:
    remedy, live = CASES["delete_webhook_configuration"]
    op = _only(remedy, live)
    assert op.path == "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/policy-webhook"
    assert op.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"uid": "u-hook", "resourceVersion": "1039"},
    }
    assert op.kubectl == "kubectl delete validatingwebhookconfigurations.admissionregistration.k8s.io policy-webhook"


def test_force_delete_pod_with_grace_zero_and_preconditions() -> None:
    remedy, live = CASES["force_delete_pod"]
    op = _only(remedy, live)
    assert (op.method, op.path) == ("DELETE", "/api/v1/namespaces/batch-jobs/pods/worker-0")
    assert op.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-pod", "resourceVersion": "1066"},
    }
    assert op.kubectl == "kubectl delete pods worker-0 -n batch-jobs --grace-period=0 --force"
    assert op.summary == "force-delete pods/worker-0 (grace period 0)"


def test_one_operation_per_target_in_order() -> None:
    first, second = pod(), with_meta(pod(), name="worker-1", uid="u-pod-1", resourceVersion="1067")
    remedy = Remedy(
        action=Action.FORCE_DELETE_POD,
        risk=Risk.MEDIUM,
        description="x",
        targets=(ref(first, "pods"), ref(second, "pods")),
    )
    ops = operations(remedy, [first, second])
    assert [op.path.rsplit("/", 1)[1] for op in ops] == ["worker-0", "worker-1"]
    assert [op.body["preconditions"] for op in ops] == [
        {"uid": "u-pod", "resourceVersion": "1066"},
        {"uid": "u-pod-1", "resourceVersion": "1067"},
    ]


def test_operations_survive_a_json_round_trip() -> None:
    from bot.domain.changes import Operation

    for remedy, live in CASES.values():
        for op in operations(remedy, [live]):
            assert Operation.from_json(json.loads(json.dumps(op.to_json()))) == op


# -- took_effect -------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_a_target_that_is_gone_or_recreated_took_effect(case: str) -> None:
    remedy, live = CASES[case]
    assert took_effect(remedy, live, None) is True
    assert took_effect(remedy, live, with_meta(live, uid="u-new")) is True


@pytest.mark.parametrize("case", CASES)
def test_an_unchanged_target_did_not(case: str) -> None:
    remedy, live = CASES[case]
    assert took_effect(remedy, live, copy.deepcopy(live)) is False
    # an unrelated change is not the remedy's change either
    assert took_effect(remedy, live, with_meta(live, resourceVersion="3000", labels={"x": "y"})) is False


@pytest.mark.parametrize(
    "case",
    [
        "remove_finalizer",
        "remove_namespace_finalizer_spec",
        "remove_namespace_finalizer_metadata",
        "force_finalize_namespace",
    ],
)
def test_a_finalizer_change_took_effect_when_the_finalizer_is_gone(case: str) -> None:
    remedy, live = CASES[case]
    assert took_effect(remedy, live, without_the_finalizer(remedy, live)) is True


def test_a_namespace_finalizer_still_in_the_other_list_did_not_take_effect() -> None:
    remedy, live = CASES["remove_namespace_finalizer_spec"]
    moved = copy.deepcopy(live)
    moved["spec"]["finalizers"] = ["kubernetes"]
    moved["metadata"]["finalizers"] = ["ci.example.com/cleanup"]
    assert took_effect(remedy, live, moved) is False


def test_force_finalize_took_effect_only_when_spec_finalizers_are_empty() -> None:
    remedy, _ = CASES["force_finalize_namespace"]
    before = namespace(spec=("kubernetes", "ci.example.com/cleanup"))
    partly = namespace(spec=("ci.example.com/cleanup",))
    assert took_effect(remedy, before, partly) is False
    assert took_effect(remedy, before, namespace(spec=(), meta=("foregroundDeletion",))) is True


@pytest.mark.parametrize("case", ["delete_apiservice", "delete_webhook_configuration"])
def test_a_delete_took_effect_when_the_object_started_deleting(case: str) -> None:
    remedy, live = CASES[case]
    assert took_effect(remedy, live, with_meta(live, deletionTimestamp=DELETED_AT, finalizers=["a.io/b"])) is True


def test_force_delete_of_a_pod_that_keeps_finalizers() -> None:
    remedy, _ = CASES["force_delete_pod"]
    running = pod(deleting=False, finalizers=("batch.kubernetes.io/job-tracking",))
    terminating = pod(grace=30, finalizers=("batch.kubernetes.io/job-tracking",))
    forced = pod(grace=0, finalizers=("batch.kubernetes.io/job-tracking",), rv="1070")
    assert took_effect(remedy, running, terminating) is True  # started deleting
    assert took_effect(remedy, terminating, terminating) is False  # still the graceful delete
    assert took_effect(remedy, terminating, forced) is True  # grace period forced to 0
    assert took_effect(remedy, forced, forced) is False  # nothing to tell apart


# -- cause_reasons: the cause, re-checked on a diagnosis made right before acting -------------------------


def _fresh(
    state: NamespaceState, *findings: Finding, gaps: tuple[Gap, ...] = ()
) -> tuple[NamespaceSnapshot, Diagnosis]:
    at = datetime(2026, 11, 20, 9, tzinfo=UTC)
    snapshot = NamespaceSnapshot(cluster=ClusterName("prod-eu"), namespace="ns", observed_at=at, namespace_object=None)
    diagnosis = Diagnosis(
        cluster=ClusterName("prod-eu"),
        namespace="ns",
        observed_at=at,
        state=state,
        terminating_for_seconds=None,
        complete=not gaps,
        gaps=gaps,
        findings=findings,
    )
    return snapshot, diagnosis


def _proposing(remedy: Remedy) -> Finding:
    return Finding(
        cause=Cause.UNKNOWN, blocking=True, summary="still there", objects=remedy.targets, remedies=(remedy,)
    )


@pytest.mark.parametrize("case", CASES)
def test_the_cause_holds_while_a_fresh_diagnosis_still_proposes_the_remedy(case: str) -> None:
    remedy, live = CASES[case]
    now, fresh = _fresh(NamespaceState.TERMINATING, _proposing(remedy))
    assert cause_reasons(remedy, [live], now, fresh) == []


@pytest.mark.parametrize("case", CASES)
def test_the_cause_is_gone_when_a_fresh_diagnosis_no_longer_proposes_it(case: str) -> None:
    remedy, live = CASES[case]
    [reason] = cause_reasons(remedy, [live], *_fresh(NamespaceState.TERMINATING))
    assert "a diagnosis made now finds nothing that blocks the namespace: " in reason
    left = f"{remedy.finalizer} was left on" if remedy.finalizer else "was left alone"
    assert left in reason, reason
    # the same remedy for another finalizer, or another action on the target, is not this remedy
    other = Remedy(
        action=Action.DELETE_APISERVICE if remedy.action is not Action.DELETE_APISERVICE else Action.FORCE_DELETE_POD,
        description="x",
        risk=Risk.LOW,
        targets=remedy.targets,
    )
    assert len(cause_reasons(remedy, [live], *_fresh(NamespaceState.TERMINATING, _proposing(other)))) == 1


@pytest.mark.parametrize("case", CASES)
def test_a_namespace_gone_or_no_longer_terminating_ends_every_remedy(case: str) -> None:
    remedy, live = CASES[case]
    assert cause_reasons(remedy, [live], *_fresh(NamespaceState.NOT_FOUND)) == [
        "namespace ns is gone now: nothing was changed"
    ]
    assert cause_reasons(remedy, [live], *_fresh(NamespaceState.ACTIVE)) == [
        "namespace ns is no longer being deleted: nothing was changed"
    ]


def test_force_finalizing_needs_the_fresh_evidence_complete() -> None:
    remedy, live = CASES["force_finalize_namespace"]
    gap = Gap(what="list kialis.kiali.io/v1alpha1 in ns", reason="timeout")
    [reason] = cause_reasons(remedy, [live], *_fresh(NamespaceState.TERMINATING, _proposing(remedy), gaps=(gap,)))
    assert reason.startswith("the evidence is incomplete now (list kialis.kiali.io/v1alpha1 in ns: timeout)")
    # any other kind goes on incomplete evidence as long as the remedy is still proposed
    remedy, live = CASES["remove_finalizer"]
    assert cause_reasons(remedy, [live], *_fresh(NamespaceState.TERMINATING, _proposing(remedy), gaps=(gap,))) == []
