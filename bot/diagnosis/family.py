"""The blocking object family of a verdict (issue 39 §3): what an earlier incident must share with this one,
beside its cluster and cause, to be "seen before". Pure.

A family is `<kind>:<value>`, from the leading blocking finding:

- apiservice_unavailable: `apiservice:<APIService name>`;
- webhook_blocks_delete: `webhook:<kind>/<name>` of the webhook configuration (or the admission policy, or
  the CRD whose conversion webhook it is);
- orphaned_finalizer, namespace_finalizer, cleanup_failing, finalizer_deadlock: `finalizer:<finalizer>`;
- pod_on_lost_node, pod_not_terminating: `nodepool:<label>=<pool>` from the node's well-known node-pool
  label (GKE, EKS, AKS, Karpenter), else `node:<name>`;
- discovery_failure, aggregated_discovery_defect: `groupversion:<group/version>[,...]`;
- pvc_in_use, deletion_error, content_deleting, gitops_owner, unknown: none.

No family means no "seen before": a verdict without one is never matched to another (pvc_in_use names the
namespace's own claim and pod, which a new namespace does not share; the others name no object).
"""

from __future__ import annotations

import hashlib

from bot.domain.findings import Cause, Diagnosis, Finding
from bot.domain.refs import KubeObject, ObjectRef
from bot.domain.snapshot import NamespaceSnapshot

# the node-pool labels of managed clusters and Karpenter, in the order looked at
NODE_POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "karpenter.sh/nodepool",
)
# the column's width: a longer family is kept as its hash
MAX_FAMILY = 255

_FINALIZER_CAUSES = frozenset(
    {Cause.ORPHANED_FINALIZER, Cause.NAMESPACE_FINALIZER, Cause.CLEANUP_FAILING, Cause.FINALIZER_DEADLOCK}
)
_NODE_CAUSES = frozenset({Cause.POD_ON_LOST_NODE, Cause.POD_NOT_TERMINATING})
_DISCOVERY_CAUSES = frozenset({Cause.DISCOVERY_FAILURE, Cause.AGGREGATED_DISCOVERY_DEFECT})
_WEBHOOK_KINDS = (
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "CustomResourceDefinition",
)


def blocker_family(diagnosis: Diagnosis, snapshot: NamespaceSnapshot | None) -> str | None:
    """The family of the verdict's leading blocking finding; None when it has none (or nothing blocks)."""
    finding = next((f for f in diagnosis.findings if f.blocking), None)
    if finding is None:
        return None
    family = _family(finding, snapshot)
    if family is None or len(family) <= MAX_FAMILY:
        return family
    kind = family.partition(":")[0]
    return f"{kind}:sha256:{hashlib.sha256(family.encode()).hexdigest()}"


def _family(finding: Finding, snapshot: NamespaceSnapshot | None) -> str | None:
    cause = finding.cause
    if cause is Cause.APISERVICE_UNAVAILABLE:
        ref = _first(finding.objects, ("APIService",))
        return f"apiservice:{ref.name}" if ref else None
    if cause is Cause.WEBHOOK_BLOCKS_DELETE:
        ref = _first(finding.objects, _WEBHOOK_KINDS)
        return f"webhook:{ref.kind}/{ref.name}" if ref else None
    if cause in _FINALIZER_CAUSES:
        finalizer = _finalizer(finding)
        return f"finalizer:{finalizer}" if finalizer else None
    if cause in _NODE_CAUSES:
        ref = _first(finding.objects, ("Node",))
        return _node_family(ref.name, snapshot) if ref else None
    if cause in _DISCOVERY_CAUSES:
        versions = _group_versions(finding, snapshot)
        return "groupversion:" + ",".join(versions) if versions else None
    return None


def _first(objects: tuple[ObjectRef, ...], kinds: tuple[str, ...]) -> ObjectRef | None:
    return next((o for o in objects if o.kind in kinds), None)


def _finalizer(finding: Finding) -> str | None:
    """The finalizer the finding is about: the one its removals remove, else the one every object keeps."""
    named = [r.finalizer for r in finding.remedies if r.finalizer]
    if named:
        return named[0]
    kept = [set(o.finalizers) for o in finding.objects if o.finalizers]
    common = set.intersection(*kept) if kept else set()
    return next(iter(common)) if len(common) == 1 else None


def _node_family(name: str, snapshot: NamespaceSnapshot | None) -> str:
    node: KubeObject | None = snapshot.nodes.get(name) if snapshot is not None else None
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    for label in NODE_POOL_LABELS:
        pool = labels.get(label)
        if isinstance(pool, str) and pool:
            return f"nodepool:{label}={pool}"
    return f"node:{name}"


def _group_versions(finding: Finding, snapshot: NamespaceSnapshot | None) -> list[str]:
    """The group versions of the finding's APIServices (`v1beta1.metrics.k8s.io` is metrics.k8s.io/v1beta1),
    else the group versions the snapshot saw failing discovery."""
    versions = set()
    for ref in finding.objects:
        if ref.kind == "APIService" and "." in ref.name:
            version, _, group = ref.name.partition(".")
            versions.add(f"{group}/{version}")
    if not versions and snapshot is not None:
        versions = {gv.group_version for gv in snapshot.failing_group_versions()}
    return sorted(versions)
