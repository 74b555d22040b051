"""The blocking object family of a verdict (issue 39 §3): what "seen before" matches on, beside cluster and cause."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.diagnosis.family import MAX_FAMILY, NODE_POOL_LABELS, blocker_family
from bot.domain.findings import Action, Cause, Diagnosis, Finding, NamespaceState, Remedy, Risk
from bot.domain.refs import ClusterName, ObjectRef
from bot.domain.snapshot import GroupVersionStatus, NamespaceSnapshot

AT = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
APISERVICE = ObjectRef("apiregistration.k8s.io/v1", "APIService", "v1beta1.metrics.k8s.io")
NODE = ObjectRef("v1", "Node", "node-7", resource="nodes")
POD = ObjectRef("v1", "Pod", "web-0", namespace="shop")


def _diagnosis(*findings: Finding) -> Diagnosis:
    return Diagnosis(
        cluster=ClusterName("prod"),
        namespace="shop",
        observed_at=AT,
        state=NamespaceState.TERMINATING,
        terminating_for_seconds=600,
        complete=True,
        findings=findings,
    )


def _snapshot(**fields: object) -> NamespaceSnapshot:
    return NamespaceSnapshot(
        cluster=ClusterName("prod"),
        namespace="shop",
        observed_at=AT,
        namespace_object=None,
        **fields,  # type: ignore[arg-type]
    )


def _finding(cause: Cause, *objects: ObjectRef, blocking: bool = True, remedies: tuple[Remedy, ...] = ()) -> Finding:
    return Finding(cause=cause, blocking=blocking, summary="s", objects=objects, remedies=remedies)


def _removal(finalizer: str) -> Remedy:
    return Remedy(action=Action.REMOVE_FINALIZER, risk=Risk.MEDIUM, description="d", finalizer=finalizer)


def test_an_unavailable_apiservice_is_its_own_family() -> None:
    diagnosis = _diagnosis(_finding(Cause.APISERVICE_UNAVAILABLE, APISERVICE))
    assert blocker_family(diagnosis, None) == "apiservice:v1beta1.metrics.k8s.io"


def test_the_leading_blocking_finding_decides_not_an_earlier_non_blocking_one() -> None:
    diagnosis = _diagnosis(
        _finding(Cause.ORPHANED_FINALIZER, POD, blocking=False, remedies=(_removal("a.io/x"),)),
        _finding(Cause.APISERVICE_UNAVAILABLE, APISERVICE),
        _finding(Cause.ORPHANED_FINALIZER, POD, remedies=(_removal("b.io/y"),)),
    )
    assert blocker_family(diagnosis, None) == "apiservice:v1beta1.metrics.k8s.io"


def test_a_webhook_is_its_configurations_kind_and_name() -> None:
    config = ObjectRef("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "kyverno-resource")
    diagnosis = _diagnosis(_finding(Cause.WEBHOOK_BLOCKS_DELETE, POD, config))
    assert blocker_family(diagnosis, None) == "webhook:ValidatingWebhookConfiguration/kyverno-resource"


@pytest.mark.parametrize(
    "cause", [Cause.ORPHANED_FINALIZER, Cause.NAMESPACE_FINALIZER, Cause.CLEANUP_FAILING, Cause.FINALIZER_DEADLOCK]
)
def test_a_finalizer_cause_is_the_finalizer_its_removals_remove(cause: Cause) -> None:
    diagnosis = _diagnosis(_finding(cause, POD, remedies=(_removal("kiali.io/finalizer"),)))
    assert blocker_family(diagnosis, None) == "finalizer:kiali.io/finalizer"


def test_without_a_removal_the_finalizer_every_object_keeps_and_none_when_they_differ() -> None:
    a = ObjectRef("v1", "ConfigMap", "a", namespace="shop", finalizers=("x.io/f", "y.io/g"))
    b = ObjectRef("v1", "ConfigMap", "b", namespace="shop", finalizers=("x.io/f",))
    c = ObjectRef("v1", "ConfigMap", "c", namespace="shop", finalizers=("z.io/h",))
    assert blocker_family(_diagnosis(_finding(Cause.ORPHANED_FINALIZER, a, b)), None) == "finalizer:x.io/f"
    # no one finalizer: no family, never a guess that could match another incident falsely
    assert blocker_family(_diagnosis(_finding(Cause.ORPHANED_FINALIZER, a, c)), None) is None


@pytest.mark.parametrize("label", NODE_POOL_LABELS)
def test_pods_on_a_node_are_its_pools_by_each_well_known_label(label: str) -> None:
    node = {"metadata": {"name": "node-7", "labels": {label: "spot-a", "kubernetes.io/os": "linux"}}}
    for cause in (Cause.POD_ON_LOST_NODE, Cause.POD_NOT_TERMINATING):
        diagnosis = _diagnosis(_finding(cause, POD, NODE))
        assert blocker_family(diagnosis, _snapshot(nodes={"node-7": node})) == f"nodepool:{label}=spot-a"


def test_a_node_without_a_pool_label_or_gone_is_its_own_family() -> None:
    diagnosis = _diagnosis(_finding(Cause.POD_ON_LOST_NODE, POD, NODE))
    plain = {"metadata": {"name": "node-7", "labels": {"kubernetes.io/os": "linux"}}}
    assert blocker_family(diagnosis, _snapshot(nodes={"node-7": plain})) == "node:node-7"
    assert blocker_family(diagnosis, _snapshot(nodes={"node-7": None})) == "node:node-7"
    assert blocker_family(diagnosis, None) == "node:node-7"


def test_discovery_is_the_group_versions_of_its_apiservices_else_those_failing() -> None:
    other = ObjectRef("apiregistration.k8s.io/v1", "APIService", "v1.custom.metrics.k8s.io")
    diagnosis = _diagnosis(_finding(Cause.DISCOVERY_FAILURE, other, APISERVICE))
    assert blocker_family(diagnosis, None) == "groupversion:custom.metrics.k8s.io/v1,metrics.k8s.io/v1beta1"
    bare = _diagnosis(_finding(Cause.AGGREGATED_DISCOVERY_DEFECT))
    failing = _snapshot(
        group_versions=(
            GroupVersionStatus("apps/v1", True),
            GroupVersionStatus("example.io/v2", False, 503),
        )
    )
    assert blocker_family(bare, failing) == "groupversion:example.io/v2"
    assert blocker_family(bare, None) is None


@pytest.mark.parametrize(
    "cause", [Cause.PVC_IN_USE, Cause.DELETION_ERROR, Cause.UNKNOWN, Cause.CONTENT_DELETING, Cause.GITOPS_OWNER]
)
def test_the_other_causes_have_no_family(cause: Cause) -> None:
    assert blocker_family(_diagnosis(_finding(cause, POD, NODE, APISERVICE)), None) is None


def test_nothing_blocking_has_no_family() -> None:
    assert blocker_family(_diagnosis(_finding(Cause.APISERVICE_UNAVAILABLE, APISERVICE, blocking=False)), None) is None
    assert blocker_family(_diagnosis(), None) is None


def test_a_family_longer_than_its_column_is_kept_as_its_hash() -> None:
    long_name = "v1." + "a" * 300 + ".example.io"
    ref = ObjectRef("apiregistration.k8s.io/v1", "APIService", long_name)
    family = blocker_family(_diagnosis(_finding(Cause.APISERVICE_UNAVAILABLE, ref)), None)
    assert family is not None
    assert family.startswith("apiservice:sha256:")
    assert len(family) <= MAX_FAMILY
    other = ObjectRef("apiregistration.k8s.io/v1", "APIService", long_name + "x")
    assert blocker_family(_diagnosis(_finding(Cause.APISERVICE_UNAVAILABLE, other)), None) != family
