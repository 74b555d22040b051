"""The finalizer catalogue: every entry well-formed, the projects issue 22 names covered, look-ups by
exact name and by prefix, the resources the remediation role will list, and today's owners unchanged."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.diagnosis import catalogue
from bot.diagnosis.catalogue import CatalogueEntry, RunsIn
from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Cause, Risk
from bot.domain.snapshot import NamespaceSnapshot, ResourceType

ENTRIES = catalogue.entries()

# a DNS subdomain, as Kubernetes checks a finalizer's prefix (and an API group)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
# the name part of a qualified name (letters, digits, '-', '_', '.'; alphanumeric at both ends)
QUALIFIED_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# an API group: a DNS subdomain, or one of the built-in single-word groups (apps, batch...)
API_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SOURCE = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+:\S.*|https://\S+)$")
PLURAL = re.compile(r"^[a-z][a-z0-9]*s$")

# real finalizers that are not domain-qualified, each read in its project's source
UNQUALIFIED = {
    "profile-finalizer"
}  # kubeflow/dashboard:components/profile-controller/controllers/profile_controller.go

# entries kept from today's catalogue that their project's source does not define (said in `unverified`)
NOT_IN_SOURCE = {"argoproj.io/", "istio-finalizer.sailoperator.io"}

# the projects issue 22 names, as the catalogue spells them ("Rancher/Fleet/wrangler" is three, CDI has
# its own, Linkerd defines no finalizer)
REQUIRED_PROJECTS = {
    "Argo CD", "Flux", "Crossplane", "Strimzi", "Rook/Ceph", "Velero", "Knative", "KubeVirt", "KubeVirt CDI",
    "Longhorn", "cert-manager", "Istio", "Linkerd", "Kyverno", "Gatekeeper", "Rancher", "Fleet",
    "k3s/RKE2 helm-controller", "OpenShift", "Kubeflow", "Tekton", "vSphere CSI", "AWS Load Balancer Controller",
    "Karpenter", "External Secrets", "Prometheus operator", "KEDA",
}  # fmt: skip

# today's catalogue (before issue 22): its owners must read exactly as before, or the rules' words change
TODAY_EXACT: dict[str, tuple[str, tuple[str, ...], bool, str | None]] = {
    "kubernetes.io/pvc-protection": (
        "the PVC protection controller (kube-controller-manager)", (), True, "pvc_in_use",
    ),
    "kubernetes.io/pv-protection": ("the PV protection controller (kube-controller-manager)", (), True, None),
    "orphan": ("the garbage collector (kube-controller-manager)", (), True, "gc"),
    "foregroundDeletion": ("the garbage collector (kube-controller-manager)", (), True, "gc"),
    "batch.kubernetes.io/job-tracking": ("the Job controller (kube-controller-manager)", (), True, None),
    "service.kubernetes.io/load-balancer-cleanup": (
        "the cloud-controller-manager service controller", ("cloud-controller-manager", "ccm"), False, None,
    ),
    "customresourcecleanup.apiextensions.k8s.io": ("the API server's CRD finalizer", (), True, None),
    "resource.kubernetes.io/delete-protection": ("the DRA resourceclaim controller", (), True, None),
    "external-provisioner.volume.kubernetes.io/finalizer": (
        "the CSI external-provisioner", ("csi-provisioner", "external-provisioner"), False, None,
    ),
    "provisioner.storage.kubernetes.io/cloning-protection": (
        "the CSI external-provisioner", ("csi-provisioner", "external-provisioner"), False, None,
    ),
    "kiali.io/finalizer": ("the Kiali operator", ("kiali-operator", "kiali"), False, None),
    "finalizers.kubesphere.io/namespaces": (
        "the KubeSphere controller manager", ("ks-controller-manager", "kubesphere"), False, None,
    ),
    "controller.cattle.io/namespace-auth": ("the Rancher agent", ("cattle", "rancher"), False, None),
    "finalizer.acme.cert-manager.io": ("cert-manager", ("cert-manager",), False, None),
    "acme.cert-manager.io/finalizer": ("cert-manager", ("cert-manager",), False, None),
    "restores.velero.io/external-resources-finalizer": ("the Velero server", ("velero",), False, None),
    "finalizers.fluxcd.io": ("the Flux controllers", ("flux", "fluxcd"), False, None),
    "istio-finalizer.install.istio.io": ("the Istio operator", ("istio-operator",), False, None),
    "istio-finalizer.sailoperator.io": ("the Sail operator", ("sail-operator", "sailoperator"), False, None),
    "in-use.crossplane.io": ("Crossplane", ("crossplane",), False, None),
    "composite.apiextensions.crossplane.io": ("Crossplane", ("crossplane",), False, None),
    "finalizer.managedresource.crossplane.io": (
        "a Crossplane provider", ("crossplane", "provider-"), False, None,
    ),
    "cluster.cluster.x-k8s.io": ("Cluster API", ("capi-controller-manager", "cluster-api"), False, None),
    "cnrm.cloud.google.com/finalizer": ("Config Connector", ("cnrm", "config-connector"), False, None),
    "cephcluster.ceph.rook.io": ("the Rook operator", ("rook-ceph-operator", "rook"), False, None),
    "baremetalhost.metal3.io": ("the Metal3 baremetal operator", ("baremetal-operator", "metal3"), False, None),
    "service.k8s.aws/resources": ("the AWS Load Balancer Controller", ("aws-load-balancer",), False, None),
    "ingress.k8s.aws/resources": ("the AWS Load Balancer Controller", ("aws-load-balancer",), False, None),
}  # fmt: skip
TODAY_PREFIXES: dict[str, tuple[str, tuple[str, ...]]] = {
    "resources-finalizer.argocd.argoproj.io": ("the Argo CD application controller", ("argocd",)),
    "post-delete-finalizer.argocd.argoproj.io": ("the Argo CD application controller", ("argocd",)),
    "pre-delete-finalizer.argocd.argoproj.io": ("the Argo CD application controller", ("argocd",)),
    "argoproj.io/": ("Argo CD", ("argocd", "argo")),
    "controller.cattle.io/": ("the Rancher agent", ("cattle", "rancher")),
    "clusterscoped.controller.cattle.io/": ("the Rancher agent", ("cattle", "rancher")),
    "wrangler.cattle.io/": ("the Rancher agent", ("cattle", "rancher")),
    "group.ingress.k8s.aws/": ("the AWS Load Balancer Controller", ("aws-load-balancer",)),
    "gateway.k8s.aws/": ("the AWS Load Balancer Controller", ("aws-load-balancer",)),
}


def _ids(entry: CatalogueEntry) -> str:
    return entry.finalizer + ("*" if entry.prefix else "")


def test_the_catalogue_has_at_least_60_entries_each_finalizer_once() -> None:
    assert len(ENTRIES) >= 60
    exact = Counter(e.finalizer for e in ENTRIES if not e.prefix)
    prefixes = Counter(e.finalizer for e in ENTRIES if e.prefix)
    assert [name for name, n in exact.items() if n > 1] == []
    assert [name for name, n in prefixes.items() if n > 1] == []


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_every_entry_names_a_qualified_finalizer(entry: CatalogueEntry) -> None:
    name = entry.finalizer
    if not entry.prefix and (name in catalogue.STANDARD_FINALIZERS or name in UNQUALIFIED):
        return
    domain, _, path = name.partition("/")
    assert DNS_SUBDOMAIN.match(domain), f"{name}: not domain-qualified"
    if entry.prefix:
        # a prefix ends where a name continues: after the domain's '/', or inside the path
        assert name.endswith(("/", "-")) or "/" not in name, name
    elif path:
        assert QUALIFIED_NAME_PART.match(path), name
    assert len(name) <= 316  # 253 for the prefix, '/', 63 for the name


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_every_entry_is_complete(entry: CatalogueEntry) -> None:
    assert entry.project
    assert entry.owner.name
    assert SOURCE.match(entry.source), entry.source
    for sentence in (entry.cleanup, entry.manual_cleanup):
        assert sentence.strip() == sentence
        assert sentence.endswith("."), sentence
        assert "\n" not in sentence
    assert entry.resources or entry.open_resources, "an entry lists its resources or says the list is open"
    for group, resource in entry.resources:
        assert group == "" or API_GROUP.match(group), group
        assert PLURAL.match(resource), f"{resource}: plural, lower-case, never a subresource or '*'"
    assert len(set(entry.resources)) == len(entry.resources)
    assert (entry.finalizer in NOT_IN_SOURCE) == ("not defined" in entry.unverified)


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_where_each_remover_runs_is_consistent(entry: CatalogueEntry) -> None:
    runtime, owner = entry.runtime, entry.owner
    for workload in runtime.workloads:
        assert workload.kind in {"Deployment", "StatefulSet", "DaemonSet"}
        assert DNS_SUBDOMAIN.match(f"{workload.name}.{workload.namespace}")
    for lease in runtime.leases or ():
        assert DNS_SUBDOMAIN.match(lease.name) or re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", lease.name)
        assert re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", lease.namespace), lease
    if runtime.runs_in is RunsIn.CONTROL_PLANE:
        assert runtime.where in {"kube-controller-manager", "kube-apiserver", "cloud-controller-manager"}
        assert owner.builtin or owner.markers
        if runtime.where == "kube-controller-manager":
            assert [(lease.name, lease.namespace) for lease in runtime.leases or ()] == [
                ("kube-controller-manager", "kube-system")
            ]
    elif runtime.runs_in is RunsIn.RETIRED:
        # nothing will remove it: the rules say so and offer the removal
        assert owner.name.startswith("nothing")
        assert not owner.markers
        assert not owner.builtin
    else:
        assert owner.markers, "a remover that runs as a workload is looked for by its markers"
        assert not owner.builtin
        assert all(m == m.lower() for m in owner.markers)
        if runtime.runs_in is RunsIn.DISTRIBUTION:
            assert runtime.where


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.runtime.workloads], ids=_ids)
def test_the_markers_find_the_workloads_the_catalogue_lists(entry: CatalogueEntry) -> None:
    for workload in entry.runtime.workloads:
        image = f"registry.example/{entry.runtime.images[0]}:v1" if entry.runtime.images else "example/x:v1"
        obj = _workload(workload.kind, workload.name, workload.namespace, image)
        assert catalogue.matching_workloads(entry.owner.markers, (obj,)) == [obj], (workload, entry.owner.markers)


def test_the_projects_issue_22_names_are_all_covered() -> None:
    covered = {e.project for e in ENTRIES} | set(catalogue.PROJECTS_WITHOUT_FINALIZERS)
    assert REQUIRED_PROJECTS - covered == set()
    assert catalogue.entry("wrangler.cattle.io/anything") is not None  # wrangler's own family


def test_todays_owners_read_exactly_as_before() -> None:
    for name, (owner, markers, builtin, rule) in TODAY_EXACT.items():
        found = catalogue.lookup(name)
        assert found is not None, name
        assert (found.name, found.markers, found.builtin, found.handled_by_rule) == (owner, markers, builtin, rule)
    for prefix, (owner, markers) in TODAY_PREFIXES.items():
        family = catalogue.entry(prefix + "x")
        assert family is not None
        assert family.prefix
        assert family.finalizer == prefix
        assert (family.owner.name, family.owner.markers) == (owner, markers)


def test_lookup_by_exact_name_and_by_prefix() -> None:
    kiali = catalogue.entry("kiali.io/finalizer")
    assert kiali is not None
    assert not kiali.prefix
    assert kiali.project == "Kiali"
    assert catalogue.lookup("kiali.io/finalizer") is kiali.owner
    argocd = catalogue.entry("resources-finalizer.argocd.argoproj.io/foreground")
    assert argocd is not None
    assert argocd.prefix
    assert argocd.finalizer == "resources-finalizer.argocd.argoproj.io"
    ces = catalogue.entry("externalsecrets.external-secrets.io/ces-team-db")
    assert ces is not None
    assert ces.resources == (("", "namespaces"),)
    group = catalogue.entry("group.ingress.k8s.aws/shared-alb")
    assert group is not None
    assert group.project == "AWS Load Balancer Controller"
    assert catalogue.entry("example.com/cleanup") is None
    assert catalogue.lookup("example.com/cleanup") is None
    assert catalogue.entry("kiali.io/finalizer-x") is None  # an exact name is not a prefix


def test_an_exact_entry_wins_over_the_prefix_family_it_belongs_to() -> None:
    helm = catalogue.entry("wrangler.cattle.io/on-helm-chart-remove")
    assert helm is not None
    assert not helm.prefix
    assert helm.project == "k3s/RKE2 helm-controller"
    other = catalogue.entry("wrangler.cattle.io/some-handler")
    assert other is not None
    assert other.prefix
    assert other.project == "Rancher"


def test_prefixes_shadow_no_exact_entry_unintentionally() -> None:
    prefixes = [e for e in ENTRIES if e.prefix]
    shadowed = {
        e.finalizer: p.finalizer
        for e in ENTRIES
        if not e.prefix
        for p in prefixes
        if e.finalizer.startswith(p.finalizer)
    }
    # each of these is deliberate: a member of a family that the catalogue knows better by its full name
    assert shadowed == {
        "wrangler.cattle.io/on-helm-chart-remove": "wrangler.cattle.io/",
        "controller.cattle.io/namespace-auth": "controller.cattle.io/",
    }
    # and no family contains another, so the order of the prefixes never matters
    nested = [(a.finalizer, b.finalizer) for a in prefixes for b in prefixes if a != b]
    assert [(a, b) for a, b in nested if b.startswith(a)] == []


def test_resources_lists_every_pair_once_sorted_without_wildcards_or_subresources() -> None:
    pairs = catalogue.resources()
    assert list(pairs) == sorted(set(pairs))
    assert set(pairs) == {pair for e in ENTRIES for pair in e.resources}
    assert all("*" not in g + r and "/" not in r for g, r in pairs)
    for expected in (
        ("", "namespaces"),
        ("", "persistentvolumeclaims"),
        ("argoproj.io", "applications"),
        ("helm.cattle.io", "helmcharts"),
        ("kiali.io", "kialis"),
        ("acme.cert-manager.io", "challenges"),
        ("kafka.strimzi.io", "kafkatopics"),
    ):
        assert expected in pairs


def test_the_cleanups_that_create_objects_in_the_namespace_are_flagged() -> None:
    creating = {e.finalizer for e in ENTRIES if e.creates_in_namespace is True}
    assert creating == {"wrangler.cattle.io/on-helm-chart-remove", "workflows.argoproj.io/artifact-gc"}
    assert catalogue.entry("kiali.io/finalizer").creates_in_namespace is False  # type: ignore[union-attr]


def test_the_kubernetes_finalizer_still_means_nothing_outside_a_namespace_spec() -> None:
    entry = catalogue.entry("kubernetes")
    assert entry is not None
    assert entry.runtime.runs_in is RunsIn.CONTROL_PLANE
    assert catalogue.owner_for("kubernetes").name.startswith("nothing")


# --- through the rules -------------------------------------------------------------------------------------------

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
DELETED = (NOW - timedelta(hours=3)).isoformat().replace("+00:00", "Z")
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, ("list", "delete"))


def _workload(kind: str, name: str, namespace: str, image: str, ready: int = 1) -> dict[str, Any]:
    status = {"numberReady": ready} if kind == "DaemonSet" else {"readyReplicas": ready}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
        "status": status,
    }


def _snapshot(finalizer: str, workloads: tuple[dict[str, Any], ...]) -> NamespaceSnapshot:
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "held",
            "namespace": "ns",
            "uid": "uid-held",
            "deletionTimestamp": DELETED,
            "finalizers": [finalizer],
        },
    }
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "uid": "ns-uid", "deletionTimestamp": DELETED},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": []},
    }
    return NamespaceSnapshot(
        cluster="c",
        namespace="ns",
        observed_at=NOW,
        namespace_object=namespace,
        resource_types=(CONFIGMAPS,),
        contents={"configmaps": (held,)},
        workloads=workloads,
    )


def test_a_retired_gatekeeper_finalizer_is_not_waited_for_though_gatekeeper_runs() -> None:
    # before: the domain's word "gatekeeper" found the running Gatekeeper, and the rules said to wait for it
    gatekeeper = _workload(
        "Deployment", "gatekeeper-controller-manager", "gatekeeper-system", "openpolicyagent/gatekeeper:v3.20.0"
    )
    diagnosis = diagnose(_snapshot("finalizers.gatekeeper.sh/sync", (gatekeeper,)))
    finding = diagnosis.findings[0]
    assert finding.cause is Cause.ORPHANED_FINALIZER
    assert finding.blocking is True
    remove = [r for r in finding.remedies if r.action is Action.REMOVE_FINALIZER]
    assert remove
    assert remove[0].risk is Risk.LOW
    assert (
        "no controller removes a finalizer named 'finalizers.gatekeeper.sh/sync' from a ConfigMap" in finding.evidence
    )


def test_a_newly_catalogued_finalizer_is_attributed_to_its_controller_by_name() -> None:
    # before: "finalizer.keda.sh" named no domain to the heuristics ("an unknown controller")
    keda = _workload("Deployment", "keda-operator", "keda", "ghcr.io/kedacore/keda:2.16.0")
    # (within the bound of time without progress: past it, a live controller is no longer "at work")
    diagnosis = diagnose(_snapshot("finalizer.keda.sh", (keda,)), no_progress_after=timedelta(hours=4))
    finding = diagnosis.findings[0]
    assert finding.cause is Cause.CONTENT_DELETING
    assert "finalizer.keda.sh is a well-known finalizer, removed by the KEDA operator" in finding.evidence
    assert "its controller (keda-operator) is running" in finding.summary
