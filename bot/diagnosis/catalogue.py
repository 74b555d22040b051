"""Who removes which finalizer, and how to recognise that controller among the cluster's workloads.

A catalogue of well-known finalizers (reference §6), then heuristics for the rest: a finalizer is
usually named after its controller's domain (`kiali.io/finalizer`), and that domain is usually the
group of the custom resource it sits on and a word in the controller's name or image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.domain.refs import KubeObject, meta, name_of


@dataclass(frozen=True)
class Owner:
    """The controller expected to remove a finalizer."""

    name: str  # for people: "Kiali operator"
    # words that identify its workloads (matched against names, labels, images); empty: built in
    markers: tuple[str, ...] = ()
    # part of the control plane (kube-controller-manager, the API server): assumed to be running
    builtin: bool = False
    handled_by_rule: str | None = None  # another rule family explains it (pvc protection, GC)


_BUILTIN = Owner("kube-controller-manager", builtin=True)

# exact names
_EXACT: dict[str, Owner] = {
    "kubernetes.io/pvc-protection": Owner(
        "the PVC protection controller (kube-controller-manager)", builtin=True, handled_by_rule="pvc_in_use"
    ),
    "kubernetes.io/pv-protection": Owner("the PV protection controller (kube-controller-manager)", builtin=True),
    "orphan": Owner("the garbage collector (kube-controller-manager)", builtin=True, handled_by_rule="gc"),
    "foregroundDeletion": Owner("the garbage collector (kube-controller-manager)", builtin=True, handled_by_rule="gc"),
    "batch.kubernetes.io/job-tracking": Owner("the Job controller (kube-controller-manager)", builtin=True),
    "service.kubernetes.io/load-balancer-cleanup": Owner(
        "the cloud-controller-manager service controller", markers=("cloud-controller-manager", "ccm")
    ),
    "customresourcecleanup.apiextensions.k8s.io": Owner("the API server's CRD finalizer", builtin=True),
    "resource.kubernetes.io/delete-protection": Owner("the DRA resourceclaim controller", builtin=True),
    "external-provisioner.volume.kubernetes.io/finalizer": Owner(
        "the CSI external-provisioner", markers=("csi-provisioner", "external-provisioner")
    ),
    "provisioner.storage.kubernetes.io/cloning-protection": Owner(
        "the CSI external-provisioner", markers=("csi-provisioner", "external-provisioner")
    ),
    "kiali.io/finalizer": Owner("the Kiali operator", markers=("kiali-operator", "kiali")),
    "finalizers.kubesphere.io/namespaces": Owner(
        "the KubeSphere controller manager", markers=("ks-controller-manager", "kubesphere")
    ),
    "controller.cattle.io/namespace-auth": Owner("the Rancher agent", markers=("cattle", "rancher")),
    "finalizer.acme.cert-manager.io": Owner("cert-manager", markers=("cert-manager",)),
    "acme.cert-manager.io/finalizer": Owner("cert-manager", markers=("cert-manager",)),
    "restores.velero.io/external-resources-finalizer": Owner("the Velero server", markers=("velero",)),
    "finalizers.fluxcd.io": Owner("the Flux controllers", markers=("flux", "fluxcd")),
    "istio-finalizer.install.istio.io": Owner("the Istio operator", markers=("istio-operator",)),
    "istio-finalizer.sailoperator.io": Owner("the Sail operator", markers=("sail-operator", "sailoperator")),
    "in-use.crossplane.io": Owner("Crossplane", markers=("crossplane",)),
    "composite.apiextensions.crossplane.io": Owner("Crossplane", markers=("crossplane",)),
    "finalizer.managedresource.crossplane.io": Owner("a Crossplane provider", markers=("crossplane", "provider-")),
    "cluster.cluster.x-k8s.io": Owner("Cluster API", markers=("capi-controller-manager", "cluster-api")),
    "cnrm.cloud.google.com/finalizer": Owner("Config Connector", markers=("cnrm", "config-connector")),
    "cephcluster.ceph.rook.io": Owner("the Rook operator", markers=("rook-ceph-operator", "rook")),
    "baremetalhost.metal3.io": Owner("the Metal3 baremetal operator", markers=("baremetal-operator", "metal3")),
    "service.k8s.aws/resources": Owner("the AWS Load Balancer Controller", markers=("aws-load-balancer",)),
    "ingress.k8s.aws/resources": Owner("the AWS Load Balancer Controller", markers=("aws-load-balancer",)),
}

# prefixes (the finalizer starts with it)
_PREFIXES: tuple[tuple[str, Owner], ...] = (
    (
        "resources-finalizer.argocd.argoproj.io",
        Owner("the Argo CD application controller", markers=("argocd",)),
    ),
    (
        "post-delete-finalizer.argocd.argoproj.io",
        Owner("the Argo CD application controller", markers=("argocd",)),
    ),
    (
        "pre-delete-finalizer.argocd.argoproj.io",
        Owner("the Argo CD application controller", markers=("argocd",)),
    ),
    ("argoproj.io/", Owner("Argo CD", markers=("argocd", "argo"))),
    ("controller.cattle.io/", Owner("the Rancher agent", markers=("cattle", "rancher"))),
    ("clusterscoped.controller.cattle.io/", Owner("the Rancher agent", markers=("cattle", "rancher"))),
    ("wrangler.cattle.io/", Owner("the Rancher agent", markers=("cattle", "rancher"))),
    ("group.ingress.k8s.aws/", Owner("the AWS Load Balancer Controller", markers=("aws-load-balancer",))),
    ("gateway.k8s.aws/", Owner("the AWS Load Balancer Controller", markers=("aws-load-balancer",))),
)

# words of a domain that say nothing about who owns it
_GENERIC = {
    "io", "com", "org", "net", "dev", "sh", "cloud", "k8s", "x-k8s", "kubernetes", "finalizer",
    "finalizers", "controller", "operator", "cleanup", "protection", "www", "apps", "api", "apis",
}  # fmt: skip


def lookup(finalizer: str) -> Owner | None:
    """The catalogue's owner of a finalizer, if it is a well-known one."""
    if finalizer in _EXACT:
        return _EXACT[finalizer]
    for prefix, owner in _PREFIXES:
        if finalizer.startswith(prefix):
            return owner
    return None


def domain_words(finalizer: str, group: str = "") -> tuple[str, ...]:
    """The distinctive words of a finalizer's domain and of the resource's group.

    `kiali.io/finalizer` -> ("kiali",); `widgets.example.com` + `cleanup.example.com/x` -> ("example",)
    """
    domain = finalizer.split("/", 1)[0] if "/" in finalizer else ""
    words: list[str] = []
    for text in (domain, group):
        for word in re.split(r"[.\-/]", text.lower()):
            if word and word not in _GENERIC and len(word) > 2 and word not in words:
                words.append(word)
    return tuple(words)


def owner_for(finalizer: str, group: str = "") -> Owner:
    """The catalogue's owner, or one guessed from the domain (reasoning written by the caller)."""
    known = lookup(finalizer)
    if known is not None:
        return known
    if "/" not in finalizer and finalizer == "kubernetes":
        # only meaningful in a Namespace's spec.finalizers; on any other object nothing removes it
        return Owner("nothing (the name 'kubernetes' is only meaningful on a Namespace)")
    words = domain_words(finalizer, group)
    if words:
        return Owner(f"the controller of {finalizer.split('/', 1)[0] or group}", markers=words)
    return Owner(f"an unknown controller ({finalizer!r} names no domain)")


def workload_text(workload: KubeObject) -> str:
    """Everything that identifies a workload, lower-cased: names, labels, images, arguments."""
    # read directly rather than through meta()/labels_of(): a digest matches markers against every
    # workload of every cluster, so this runs hundreds of thousands of times
    m = meta(workload)
    parts = [str(m.get("name", "")), str(m.get("namespace", ""))]
    parts.extend(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
    template = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in template.get("containers") or ():
        parts.append(str(container.get("name", "")))
        parts.append(str(container.get("image", "")))
        parts.extend(str(a) for a in container.get("args") or ())
        parts.extend(str(a) for a in container.get("command") or ())
    return " ".join(parts).lower()


def matching_workloads(markers: tuple[str, ...], workloads: tuple[KubeObject, ...]) -> list[KubeObject]:
    """Workloads whose identity mentions any marker, best (most markers) first."""
    if not markers:
        return []
    lowered = [m.lower() for m in markers]
    scored = []
    for workload in workloads:
        text = workload_text(workload)
        score = 0
        for marker in lowered:
            if marker in text:
                score += 1
        if score:
            scored.append((-score, name_of(workload), workload))
    return [w for _, _, w in sorted(scored, key=lambda t: (t[0], t[1]))]
