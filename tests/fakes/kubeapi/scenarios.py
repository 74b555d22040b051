"""The scenario library: stuck (and not stuck) namespaces, built the way they happen.

Every scenario is built by real API calls against a started Emulator: create the objects, let the
controllers run (``emu.settle()``), advance the FakeClock where grace periods or back-offs matter,
then delete the namespace and let the controllers produce the stuck state. Nothing writes a final
state by hand; status that a component outside the emulator would write (a kubelet that stops
posting node status, the PV binder) is written through the same ``/status`` endpoints that
component uses.

Each scenario also records, as data, what a correct diagnosis says (``Scenario.expected``): the
namespace, the causes (the fixed vocabulary of docs/contract.md §2, most blocking first), the
objects that hold the namespace, the first remedy action, whether the evidence is complete, and the
exact namespace conditions the namespace controller writes.

    SCENARIOS: dict[str, Scenario]
    apply_scenario(emu, name) -> Scenario       # the build, always
    apply_scenario_once(emu, name) -> Scenario  # the build once per run, then its state restored

With a FakeClock the build advances time itself; with a RealClock it cannot, so it only settles
once and the state converges as real time passes (with the background controller loop running).
Scenarios that need an emulator option (``discovery_error_style``, ``ordered_namespace_deletion``,
``pod_gc_orphans``, ``endpoint_style``) list it in ``Scenario.options``; ``apply_scenario`` sets it
on the emulator's options and on the installed controllers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

from tests.fakes.tracing import untraced, untraced_here

from . import state_files
from .clock import FakeClock
from .controllers import controllers_of
from .controllers._http import JSON, ApiError, KubeHTTP
from .controllers.kubelet import CRASH_LOOP_ANNOTATION, STUCK_TERMINATING_ANNOTATION, TEARDOWN_ERROR_ANNOTATION
from .emulator import Emulator
from .state import EmulatorState, StateError, capture, restore

Cause = Literal[
    "apiservice_unavailable",
    "aggregated_discovery_defect",
    "orphaned_finalizer",
    "namespace_finalizer",
    "webhook_blocks_delete",
    "pod_on_lost_node",
    "pod_not_terminating",
    "pvc_in_use",
    "discovery_failure",
    "deletion_error",
    "finalizer_deadlock",
    "cleanup_failing",
    "content_deleting",
    "gitops_owner",
    "unknown",
]
RemedyAction = Literal[
    "restore_backend",
    "fix_controller",
    "delete_apiservice",
    "remove_finalizer",
    "force_delete_pod",
    "delete_webhook_configuration",
    "force_finalize_namespace",
    "wait",
    "investigate",
    "none",
]

DISCOVERY = "NamespaceDeletionDiscoveryFailure"
PARSING = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

# The OK variant of each condition (docs/k8s-namespace-deletion.md §2.5), written independently of
# the controller code so that the scenario tests check the controller against the reference.
_OK: dict[str, tuple[str, str, str]] = {
    DISCOVERY: ("False", "ResourcesDiscovered", "All resources successfully discovered"),
    PARSING: ("False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("False", "ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def conditions(
    *,
    discovery: str | None = None,
    content_failure: str | None = None,
    remaining: str | None = None,
    finalizers: str | None = None,
) -> tuple[tuple[str, str, str, str], ...]:
    """The five conditions in order as (type, status, reason, message); failing ones given by message."""
    failing = {
        DISCOVERY: ("True", "DiscoveryFailed", discovery),
        CONTENT_FAILURE: ("True", "ContentDeletionFailed", content_failure),
        CONTENT_REMAINING: ("True", "SomeResourcesRemain", remaining),
        FINALIZERS_REMAINING: ("True", "SomeFinalizersRemain", finalizers),
    }
    out: list[tuple[str, str, str, str]] = []
    for ctype in (DISCOVERY, PARSING, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING):
        status, reason, message = failing.get(ctype, ("", "", None))
        if message is None:
            status, reason, message = _OK[ctype]
        out.append((ctype, status, reason, message))
    return tuple(out)


ALL_OK = conditions()


def _unavailable(gv: str, style: str = "legacy") -> str:
    text = (
        "the server is currently unable to handle the request"
        if style == "legacy"
        else (f"stale GroupVersion discovery: {gv}")
    )
    return (
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: "
        f"{gv}: {text}"
    )


def _unexpected_pods(namespace: str) -> str:
    return (
        "Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: "
        f"{namespace} for gvr: /v1, Resource=pods"
    )


@dataclass(frozen=True)
class ObjectRef:
    """An object a correct diagnosis names as holding the namespace.

    ``name`` may be an fnmatch pattern (``worker-*``) for objects whose names a controller generates
    (pods of a ReplicaSet); every object of that kind matching it is meant.
    """

    kind: str
    name: str
    namespace: str | None = None
    api_version: str = "v1"


@dataclass(frozen=True)
class APIServiceExpectation:
    name: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Expected:
    """What a correct diagnosis of ``namespace`` says once the scenario is applied."""

    namespace: str
    state: Literal["terminating", "active", "not_found"]
    causes: tuple[Cause, ...]
    blocking: tuple[ObjectRef, ...]
    first_remedy: RemedyAction
    acceptable_remedies: tuple[RemedyAction, ...] = ()
    complete: bool = True
    gaps: tuple[str, ...] = ()  # resource types ("<plural>.<group>") the diagnosis cannot read
    conditions: tuple[tuple[str, str, str, str], ...] | None = None  # None: no conditions at all
    spec_finalizers: tuple[str, ...] = ("kubernetes",)
    metadata_finalizers: tuple[str, ...] = ()
    apiservices: tuple[APIServiceExpectation, ...] = ()
    # (CRD name, Terminating condition status, reason) for CRDs that are being deleted
    crds: tuple[tuple[str, str, str], ...] = ()
    # (remedy action, webhook name): the remedies a fail-closed webhook with a dead backend would
    # reject (`blocked_by`); every other remedy is blocked by nothing
    blocked: tuple[tuple[RemedyAction, str], ...] = ()
    # issue 22: the state of the controller of the first finding about a finalizer (None: not checked)
    controller: Literal["alive", "dead", "unknown"] | None = None
    # issue 37 §3: how that controller was found (`controller.found_by`; None: not checked)
    found_by: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    build: Callable[[Any], None]
    expected: Expected
    seed: str | None = None  # the seed article it reproduces (shared/seeds/<id>)
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# --------------------------------------------------------------------------------------------
# Building blocks: plain API calls with the cluster-admin identity.


class Api:
    """Thin helpers over the HTTP API (the admin identity, like a cluster administrator)."""

    def __init__(self, emu: Any) -> None:
        self.emu = emu
        self.http = KubeHTTP(emu.url, emu.admin_token)

    # -- generic -------------------------------------------------------------------------------
    def create(self, path: str, body: JSON) -> JSON:
        return self.http.post(path, body)

    def apply(self, path: str, body: JSON) -> JSON:
        """Create, or replace the spec of an existing object (409 AlreadyExists)."""
        try:
            return self.http.post(path, body)
        except ApiError as err:
            if err.status != 409:
                raise
        name = body["metadata"]["name"]
        current = self.http.get(f"{path}/{name}")
        merged = {**current, **{k: v for k, v in body.items() if k not in ("metadata", "status")}}
        return self.http.put(f"{path}/{name}", merged)

    def delete(self, path: str, **options: Any) -> JSON:
        return self.http.delete(path, options or None)

    def put_status(self, path: str, status: JSON) -> JSON:
        current = self.http.get(path)
        return self.http.put(f"{path}/status", {**current, "status": {**(current.get("status") or {}), **status}})

    # -- objects -------------------------------------------------------------------------------
    def namespace(self, name: str, *, labels: dict[str, str] | None = None, **metadata: Any) -> JSON:
        meta: JSON = {"name": name, **metadata}
        if labels:
            meta["labels"] = labels
        return self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})

    def ensure_namespace(self, name: str) -> None:
        if self.http.get_or_none(f"/api/v1/namespaces/{name}") is None:
            self.namespace(name)

    def node(self, name: str, ip: str, *, role: str = "worker") -> None:
        """A Node as its kubelet registers it, then the kubelet's first Ready status."""
        self.create(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        f"node-role.kubernetes.io/{role}": "",
                    },
                },
                "spec": {"podCIDR": f"10.244.{ip.rsplit('.', 1)[1]}.0/24"},
            },
        )
        now = self.emu.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        self.put_status(
            f"/api/v1/nodes/{name}",
            {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "kubeletVersion": "v1.34.2",
                    "containerRuntimeVersion": "containerd://2.1.4",
                    "osImage": "Ubuntu 24.04.3 LTS",
                    "kernelVersion": "6.8.0-79-generic",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        )

    def node_lost(self, name: str) -> None:
        """What the node lifecycle controller writes when a kubelet stops posting status.

        The Ready condition goes Unknown (NodeStatusUnknown), the node gets the unreachable taints,
        and its pods' Ready condition goes False (MarkPodsNotReady).
        """
        path = f"/api/v1/nodes/{name}"
        node = self.http.get(path)
        taints = [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        ]
        self.http.put(path, {**node, "spec": {**(node.get("spec") or {}), "taints": taints}})
        now = self.emu.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        node = self.http.get(path)
        conds = []
        for old in (node.get("status") or {}).get("conditions") or []:
            cond = old
            if old.get("type") == "Ready":
                cond = {
                    **old,
                    "status": "Unknown",
                    "lastTransitionTime": now,
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                }
            conds.append(cond)
        self.http.put(f"{path}/status", {**node, "status": {**(node.get("status") or {}), "conditions": conds}})
        # MarkPodsNotReady: the pods of the node are no longer Ready
        for pod in self.http.list_items("/api/v1/pods", fieldSelector=f"spec.nodeName={name}"):
            pod_conds = []
            for old in (pod.get("status") or {}).get("conditions") or []:
                cond = old
                if old.get("type") == "Ready" and old.get("status") != "False":
                    cond = {**old, "status": "False", "lastTransitionTime": now}
                pod_conds.append(cond)
            pod_path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
            self.http.put(
                f"{pod_path}/status", {**pod, "status": {**(pod.get("status") or {}), "conditions": pod_conds}}
            )

    def deployment(
        self,
        ns: str,
        name: str,
        *,
        node: str,
        replicas: int = 1,
        image: str = "nginx:1.27",
        ports: list[JSON] | None = None,
        grace: int | None = None,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        service_account: str | None = None,
    ) -> JSON:
        labels = labels or {"app": name}
        container: JSON = {"name": name.split("-", maxsplit=1)[0] if "-" in name else name, "image": image}
        if ports:
            container["ports"] = ports
        pod_spec: JSON = {"nodeName": node, "containers": [container]}
        if grace is not None:
            pod_spec["terminationGracePeriodSeconds"] = grace
        if service_account:
            pod_spec["serviceAccountName"] = service_account
        template_meta: JSON = {"labels": dict(labels)}
        if annotations:
            template_meta["annotations"] = dict(annotations)
        return self.create(
            f"/apis/apps/v1/namespaces/{ns}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "labels": dict(labels)},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": dict(labels)},
                    "template": {"metadata": template_meta, "spec": pod_spec},
                },
            },
        )

    def service(
        self, ns: str, name: str, *, selector: dict[str, str], ports: list[JSON], cluster_ip: str | None = None
    ) -> JSON:
        spec: JSON = {"selector": selector, "ports": ports}
        if cluster_ip:
            spec["clusterIP"] = cluster_ip
        return self.create(
            f"/api/v1/namespaces/{ns}/services",
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": dict(selector)}, "spec": spec},
        )

    def configmap(self, ns: str, name: str, *, data: dict[str, str] | None = None, **metadata: Any) -> JSON:
        body: JSON = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}}
        if data:
            body["data"] = data
        return self.create(f"/api/v1/namespaces/{ns}/configmaps", body)

    def apiservice(self, group: str, version: str, *, svc_ns: str, svc_name: str, priority: int = 100) -> JSON:
        return self.apply(
            "/apis/apiregistration.k8s.io/v1/apiservices",
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": f"{version}.{group}", "labels": {"k8s-app": svc_name}},
                "spec": {
                    "group": group,
                    "version": version,
                    "service": {"namespace": svc_ns, "name": svc_name, "port": 443},
                    "groupPriorityMinimum": priority,
                    "versionPriority": 100,
                    "insecureSkipTLSVerify": True,
                },
            },
        )

    def crd(self, group: str, plural: str, kind: str, *, version: str = "v1", scope: str = "Namespaced") -> JSON:
        return self.create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {
                    "group": group,
                    "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                    "scope": scope,
                    "versions": [
                        {
                            "name": version,
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                            },
                        }
                    ],
                },
            },
        )

    def custom(self, group: str, version: str, plural: str, ns: str, body: JSON) -> JSON:
        return self.create(f"/apis/{group}/{version}/namespaces/{ns}/{plural}", body)

    def cluster_role_for(self, name: str, *, group: str, resources: list[str], sa_ns: str, sa: str) -> None:
        self.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [{"apiGroups": [group], "resources": resources, "verbs": ["*"]}],
            },
        )
        self.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}],
            },
        )

    def service_account(self, ns: str, name: str) -> None:
        self.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )

    def delete_namespace(self, name: str) -> None:
        """``kubectl delete namespace <name> --wait=false`` (first waiting there while ``before_delete`` holds
        the build, if it does)."""
        pause = _PAUSES.get(id(self.emu))
        if pause is not None and pause.namespace == name:
            pause.wait()
        self.delete(f"/api/v1/namespaces/{name}")


def run_for(emu: Any, seconds: float, *, step: float = 15.0) -> None:
    """Let the cluster run: settle, then advance the FakeClock in steps, settling after each."""
    emu.settle()
    advance = getattr(emu.clock, "advance", None)
    if advance is None:
        return
    elapsed = 0.0
    while elapsed < seconds:
        delta = min(step, seconds - elapsed)
        advance(delta)
        elapsed += delta
        emu.settle()


# --------------------------------------------------------------------------------------------
# Shared infrastructure.

METRICS_IP = "10.96.171.26"
ADAPTER_IP = "10.96.204.17"


def base_cluster(api: Api, *, nodes: int = 2) -> None:
    """Nodes and the kube-system basics every scenario starts from."""
    api.node("control-plane-1", "192.168.0.193", role="control-plane")
    for i in range(1, nodes + 1):
        api.node(f"node-{i}", f"192.168.0.{40 + i}")


def metrics_server(api: Api, *, broken: bool = False) -> None:
    """metrics-server in kube-system and its APIService v1beta1.metrics.k8s.io."""
    api.service_account("kube-system", "metrics-server")
    api.deployment(
        "kube-system",
        "metrics-server",
        node="node-1",
        image="registry.k8s.io/metrics-server/metrics-server:v0.7.2",
        ports=[{"name": "https", "containerPort": 10250, "protocol": "TCP"}],
        labels={"k8s-app": "metrics-server"},
        annotations={CRASH_LOOP_ANNOTATION: "true"} if broken else None,
        service_account="metrics-server",
    )
    api.service(
        "kube-system",
        "metrics-server",
        selector={"k8s-app": "metrics-server"},
        ports=[{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}],
        cluster_ip=METRICS_IP,
    )
    api.apiservice("metrics.k8s.io", "v1beta1", svc_ns="kube-system", svc_name="metrics-server")


def app(api: Api, ns: str, name: str = "web", *, node: str = "node-2", replicas: int = 2, grace: int = 30) -> None:
    """An ordinary application: Deployment, Service, ConfigMap, Secret."""
    api.deployment(
        ns,
        name,
        node=node,
        replicas=replicas,
        grace=grace,
        ports=[{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    )
    api.service(ns, name, selector={"app": name}, ports=[{"name": "http", "port": 80, "targetPort": "http"}])
    api.configmap(ns, f"{name}-config", data={"LOG_LEVEL": "info"})
    api.create(
        f"/api/v1/namespaces/{ns}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-tls"}, "type": "Opaque", "data": {}},
    )


def _start(emu: Any, *, nodes: int = 2) -> Api:
    api = Api(emu)
    base_cluster(api, nodes=nodes)
    run_for(emu, 10)
    return api


# --------------------------------------------------------------------------------------------
# Seed articles.


def _seed000(emu: Any) -> None:
    api = _start(emu)
    metrics_server(api, broken=True)
    run_for(emu, 60, step=30)
    ns = "ack-system-e2e-test-0"
    api.namespace(ns)
    app(api, ns, "e2e-app")
    run_for(emu, 15)
    api.delete_namespace(ns)
    run_for(emu, 840, step=120)  # "Terminating 14m"


def _metrics_unreachable(emu: Any) -> None:
    api = _start(emu)
    metrics_server(api)
    run_for(emu, 60, step=30)
    # the route from the API server's host network to the pod network is gone (seeds 001/004)
    emu.knobs.unreachable_services.add("kube-system/metrics-server")
    ns = "tobedeletedb"
    api.namespace(ns)
    app(api, ns, "db-client", replicas=1)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 120, step=30)


def _seed002(emu: Any) -> None:
    api = _start(emu)
    ns = "finalizer-demo"
    api.namespace(ns)
    run_for(emu, 5)
    # a ConfigMap with a finalizer that no controller handles
    api.configmap(ns, "mymap", finalizers=["kubernetes"])
    api.delete(f"/api/v1/namespaces/{ns}/configmaps/mymap")  # kubectl delete configmap/mymap
    # the ownerReferences cascade: deleting the parent removes the child (background)
    parent = api.configmap(ns, "mymap-parent")
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "mymap-parent", "uid": parent["metadata"]["uid"]}
    api.configmap(ns, "mymap-child", ownerReferences=[owner])
    api.delete(f"/api/v1/namespaces/{ns}/configmaps/mymap-parent")
    run_for(emu, 5)
    # --cascade=orphan: the child stays, without its ownerReference
    parent2 = api.configmap(ns, "mymap-parent2")
    owner2 = {"apiVersion": "v1", "kind": "ConfigMap", "name": "mymap-parent2", "uid": parent2["metadata"]["uid"]}
    api.configmap(ns, "mymap-child2", ownerReferences=[owner2])
    api.delete(f"/api/v1/namespaces/{ns}/configmaps/mymap-parent2", propagationPolicy="Orphan")
    run_for(emu, 5)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


def _seed003_kubesphere(emu: Any) -> None:
    api = _start(emu)
    ns = "kubesphere-sample"
    # KubeSphere put its finalizer and an ownerReference to its Workspace on the namespace, then
    # KubeSphere (and its CRDs) was uninstalled without cleaning them up.
    api.namespace(
        ns,
        labels={"kubesphere.io/workspace": "system-workspace"},
        finalizers=["finalizers.kubesphere.io/namespaces"],
        ownerReferences=[
            {
                "apiVersion": "tenant.kubesphere.io/v1alpha1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "Workspace",
                "name": "system-workspace",
                "uid": "d4310acd-1fdc-11ea-a370-a2c490b9ae47",
            }
        ],
    )
    app(api, ns, "console", replicas=1)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _kiali_crd(api: Api) -> None:
    api.crd("kiali.io", "kialis", "Kiali", version="v1alpha1")


def _kiali_cr(api: Api, ns: str) -> None:
    api.custom(
        "kiali.io",
        "v1alpha1",
        "kialis",
        ns,
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]},
            "spec": {"deployment": {"namespace": ns}, "auth": {"strategy": "anonymous"}},
        },
    )


def _seed003_kiali(emu: Any) -> None:
    api = _start(emu)
    _kiali_crd(api)
    ns = "istio-system"
    api.namespace(ns)
    app(api, ns, "istiod", replicas=1)
    run_for(emu, 5)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    # the Kiali operator was uninstalled (helm uninstall kiali-operator) before the Kiali CR
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _gitops_owned(emu: Any) -> None:
    """Issue 38 §5: a namespace Argo CD deploys to (its tracking annotation, an Application with automated
    sync and selfHeal) whose content Flux manages too (a Kustomization's and a HelmRelease's labels), held by
    a Kiali CR whose operator is gone: the blocking finalizer, and the owners that would re-create it."""
    api = _start(emu)
    api.crd("argoproj.io", "applications", "Application", version="v1alpha1")
    api.crd("kustomize.toolkit.fluxcd.io", "kustomizations", "Kustomization", version="v1")
    api.crd("helm.toolkit.fluxcd.io", "helmreleases", "HelmRelease", version="v2")
    _kiali_crd(api)
    for owners in ("argocd", "flux-system"):
        api.ensure_namespace(owners)
    ns = "storefront"
    api.create(
        "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": ns, "namespace": "argocd"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://git.example.com/apps.git", "path": ns, "targetRevision": "HEAD"},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": ns},
                "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "syncOptions": ["CreateNamespace=true"]},
            },
        },
    )
    flux = (
        ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization", "storefront-infra"),
        ("helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease", "storefront-cache"),
    )
    for group, version, plural, kind, name in flux:
        spec: JSON = {"interval": "10m", "targetNamespace": ns}
        if kind == "Kustomization":
            spec |= {"path": f"./infra/{ns}", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "infra"}}
        else:
            spec |= {
                "releaseName": name,
                "driftDetection": {"mode": "enabled"},
                "chart": {"spec": {"chart": "redis", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
            }
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": kind,
            "metadata": {"name": name, "namespace": "flux-system"},
        }
        api.create(f"/apis/{group}/{version}/namespaces/flux-system/{plural}", {**body, "spec": spec})
    api.namespace(ns, annotations={"argocd.argoproj.io/tracking-id": f"{ns}:/Namespace:/{ns}"})
    for group, _, _, _, name in flux:
        labels = {f"{group}/name": name, f"{group}/namespace": "flux-system"}
        api.create(
            f"/api/v1/namespaces/{ns}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-settings", "labels": labels}},
        )
    run_for(emu, 5)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _seed003_adapter(emu: Any) -> None:
    api = _start(emu)
    api.ensure_namespace("monitoring")
    # prometheus-adapter registered the resource metrics API, then was deleted; the APIService stayed
    api.apiservice("metrics.k8s.io", "v1beta1", svc_ns="monitoring", svc_name="prometheus-adapter")
    run_for(emu, 30)
    ns = "dev-sandbox"
    api.namespace(ns)
    app(api, ns, "sandbox", replicas=1)
    run_for(emu, 15)
    api.delete_namespace(ns)
    run_for(emu, 120, step=30)


# --------------------------------------------------------------------------------------------
# One per cause of the contract, and the non-stuck and incomplete-evidence cases.


def _healthy_active(emu: Any) -> None:
    api = _start(emu)
    metrics_server(api)
    api.namespace("shop")
    app(api, "shop", "storefront")
    run_for(emu, 60, step=30)


def _deleted_cleanly(emu: Any) -> None:
    api = _start(emu)
    metrics_server(api)
    api.namespace("scratch")
    app(api, "scratch", "tmp", grace=10)
    run_for(emu, 30)
    api.delete_namespace("scratch")
    run_for(emu, 120, step=30)


def _content_deleting(emu: Any) -> None:
    api = _start(emu)
    api.namespace("web-frontend")
    app(api, "web-frontend", "frontend", grace=120)
    run_for(emu, 30)
    api.delete_namespace("web-frontend")
    run_for(emu, 20, step=10)  # the pods have 120 s to stop; the namespace controller waits for them


def _live_operator(emu: Any) -> None:
    api = _start(emu)
    _kiali_crd(api)
    api.namespace("kiali-operator")
    api.service_account("kiali-operator", "kiali-operator")
    api.cluster_role_for(
        "kiali-operator", group="kiali.io", resources=["*"], sa_ns="kiali-operator", sa="kiali-operator"
    )
    api.deployment(
        "kiali-operator",
        "kiali-operator",
        node="node-1",
        image="quay.io/kiali/kiali-operator:v2.17.0",
        labels={"app.kubernetes.io/name": "kiali-operator"},
        service_account="kiali-operator",
    )
    ns = "observability"
    api.namespace(ns)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    api.delete_namespace(ns)
    # the operator is running and will remove its finalizer once it has cleaned up
    run_for(emu, 20)


def _webhook_blocks(emu: Any) -> None:
    api = _start(emu)
    api.namespace("policy-system")
    api.deployment("policy-system", "policy-webhook", node="node-1", replicas=0, labels={"app": "policy-webhook"})
    api.service(
        "policy-system",
        "policy-webhook",
        selector={"app": "policy-webhook"},
        ports=[{"name": "https", "port": 443, "targetPort": 9443}],
    )
    api.create(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "policy-webhook"},
            "webhooks": [
                {
                    "name": "validate.policy.example.com",
                    "clientConfig": {
                        "service": {"namespace": "policy-system", "name": "policy-webhook", "path": "/validate"}
                    },
                    "rules": [
                        {
                            "operations": ["DELETE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10,
                }
            ],
        },
    )
    ns = "payments"
    api.namespace(ns)
    api.configmap(ns, "app-config", data={"currency": "EUR"})
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


# An operator uninstalled (`helm uninstall`) left its CRD, a Widget keeping the operator's finalizer,
# and a webhook configuration the operator had registered at run time; the variants vary the webhook.
WIDGET_FINALIZER = "widgets.example.com/cleanup"
WIDGET_HOOK = "validate.widgets.example.com"
WIDGET_VARIANTS = ("validating", "mutating", "ignore", "ready", "other-group", "delete-only", "object-selector")


def _widget_webhook(variant: str) -> JSON:
    mutating = variant == "mutating"
    rule: JSON = {
        "operations": ["DELETE"] if variant == "delete-only" else ["CREATE", "UPDATE"],
        "apiGroups": ["other.example.org" if variant == "other-group" else "example.com"],
        "apiVersions": ["*"] if mutating else ["v1"],
        "resources": ["*/*"] if mutating else ["widgets"],
    }
    hook: JSON = {
        "name": "mutate.widgets.example.com" if mutating else WIDGET_HOOK,
        "clientConfig": {
            "service": {
                "namespace": "widget-system",
                "name": "widget-webhook",
                "path": "/mutate" if mutating else "/validate",
            }
        },
        "rules": [rule],
        "failurePolicy": "Ignore" if variant == "ignore" else "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    }
    if variant == "object-selector":
        hook["objectSelector"] = {"matchLabels": {"widgets.example.com/managed": "true"}}
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "widget-operator"},
        "webhooks": [hook],
    }


def _widget_operator_gone(emu: Any, variant: str) -> None:
    api = _start(emu)
    api.crd("example.com", "widgets", "Widget")
    api.namespace("widget-system")
    if variant == "ready":
        # the webhook's backend still runs (only the operator's controller is gone)
        api.deployment("widget-system", "widget-webhook", node="node-1", labels={"app": "widget-webhook"})
        api.service(
            "widget-system",
            "widget-webhook",
            selector={"app": "widget-webhook"},
            ports=[{"name": "https", "port": 443, "targetPort": 9443}],
        )
    ns = "shop"
    api.namespace(ns)
    api.custom(
        "example.com",
        "v1",
        "widgets",
        ns,
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "storefront", "labels": {"app": "storefront"}, "finalizers": [WIDGET_FINALIZER]},
            "spec": {"size": 3},
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 30)
    # the operator's webhook configuration outlived it (the operator registered it at run time)
    plural = "mutatingwebhookconfigurations" if variant == "mutating" else "validatingwebhookconfigurations"
    api.create(f"/apis/admissionregistration.k8s.io/v1/{plural}", _widget_webhook(variant))
    run_for(emu, 60, step=30)


def _lost_node_not_ready(emu: Any) -> None:
    api = _start(emu, nodes=3)
    ns = "batch-jobs"
    api.namespace(ns)
    app(api, ns, "worker", node="node-3", replicas=2)
    run_for(emu, 30)
    api.node_lost("node-3")
    run_for(emu, 40, step=30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _lost_node_missing(emu: Any) -> None:
    api = _start(emu, nodes=3)
    ns = "reports"
    api.namespace(ns)
    app(api, ns, "renderer", node="node-3", replicas=1)
    run_for(emu, 30)
    api.delete("/api/v1/nodes/node-3")  # the VM was removed and its Node deleted
    run_for(emu, 10)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _postgres(
    api: Api, ns: str, *, node: str, stuck: bool | str = False, error: str | None = None, grace: int = 30
) -> None:
    api.create(
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"pv-{ns}-data"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/mnt/data/{ns}"},
                "claimRef": {"namespace": ns, "name": "data-postgres-0"},
            },
        },
    )
    api.create(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-postgres-0"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "volumeName": f"pv-{ns}-data",
                "storageClassName": "",
            },
        },
    )
    # what the PV controller (binder) writes
    api.put_status(f"/api/v1/persistentvolumes/pv-{ns}-data", {"phase": "Bound"})
    api.put_status(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-postgres-0",
        {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}},
    )
    annotations: dict[str, str] = {}
    if stuck:
        annotations[STUCK_TERMINATING_ANNOTATION] = "true" if stuck is True else str(stuck)
    if error:
        annotations[TEARDOWN_ERROR_ANNOTATION] = error
    meta: JSON = {"name": "postgres-0", "labels": {"app": "postgres"}}
    if annotations:
        meta["annotations"] = annotations
    api.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "postgres",
                        "image": "postgres:17",
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-postgres-0"}}],
            },
        },
    )


def _pvc_in_use(emu: Any) -> None:
    api = _start(emu, nodes=3)
    ns = "database"
    api.namespace(ns)
    _postgres(api, ns, node="node-3")
    run_for(emu, 30)
    api.node_lost("node-3")
    run_for(emu, 40, step=30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _pod_stuck_terminating(emu: Any) -> None:
    api = _start(emu)
    ns = "legacy-app"
    api.namespace(ns)
    # the node is Ready, but its kubelet cannot stop the container (the runtime times out)
    _postgres(api, ns, node="node-2", error="FailedKillPod")
    run_for(emu, 30)
    # someone deleted the pod first: it hung in Terminating, and the kubelet recorded why, while the
    # namespace could still take new Events; then the namespace was deleted too
    api.delete(f"/api/v1/namespaces/{ns}/pods/postgres-0")
    run_for(emu, 60, step=30)
    api.delete_namespace(ns)
    run_for(emu, 120, step=30)


def _discovery_recovered(emu: Any) -> None:
    api = _start(emu)
    api.ensure_namespace("monitoring")
    api.deployment(
        "monitoring",
        "prometheus-adapter",
        node="node-1",
        image="registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0",
        ports=[{"name": "https", "containerPort": 6443, "protocol": "TCP"}],
        labels={"app.kubernetes.io/name": "prometheus-adapter"},
    )
    api.service(
        "monitoring",
        "prometheus-adapter",
        selector={"app.kubernetes.io/name": "prometheus-adapter"},
        ports=[{"name": "https", "port": 443, "targetPort": "https"}],
        cluster_ip=ADAPTER_IP,
    )
    emu.register_aggregated_backend(
        "custom.metrics.k8s.io",
        "v1beta1",
        [
            {
                "name": "namespaces/http_requests_per_second",
                "singularName": "",
                "namespaced": False,
                "kind": "MetricValueList",
                "verbs": ["get"],
            }
        ],
    )
    api.apiservice("custom.metrics.k8s.io", "v1beta1", svc_ns="monitoring", svc_name="prometheus-adapter")
    run_for(emu, 30)
    ns = "analytics"
    api.namespace(ns)
    app(api, ns, "dashboards", replicas=1, grace=10)
    run_for(emu, 15)
    # a network policy change cut the API server off from the adapter for a few minutes
    emu.knobs.unreachable_services.add("monitoring/prometheus-adapter")
    run_for(emu, 20)
    api.delete_namespace(ns)
    run_for(emu, 360, step=30)
    # ...and was reverted: the APIService is Available again, but the namespace controller is
    # backing off (up to 60 s) and its conditions still show the old discovery failure.
    emu.knobs.unreachable_services.discard("monitoring/prometheus-adapter")
    emu.settle()


def _just_deleted(emu: Any) -> None:
    api = _start(emu)
    api.namespace("preview-1234")
    app(api, "preview-1234", "preview", replicas=1)
    run_for(emu, 30)
    api.delete_namespace("preview-1234")
    run_for(emu, 2, step=2)  # two seconds later: the namespace controller has not synced yet (5 s delay)


def _argocd_uninstalled(emu: Any) -> None:
    api = _start(emu)
    api.crd("argoproj.io", "applications", "Application", version="v1alpha1")
    api.namespace("team-apps")
    api.custom(
        "argoproj.io",
        "v1alpha1",
        "applications",
        "team-apps",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "guestbook", "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps", "path": "guestbook"},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "team-apps"},
            },
        },
    )
    run_for(emu, 30)
    # `kubectl delete -f install.yaml`: Argo CD and its CRDs go; the Application keeps its finalizer
    api.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/applications.argoproj.io")
    run_for(emu, 30)
    api.delete_namespace("team-apps")
    run_for(emu, 60, step=30)


def _deleted_without_kube_controller_manager(emu: Any, ns: str, workload: str, *, for_seconds: int) -> None:
    """A namespace with one app, deleted after kube-controller-manager stopped (its Lease goes stale,
    no namespace controller writes a condition), then `for_seconds` of the cluster's time."""
    api = _start(emu)
    api.namespace(ns)
    app(api, ns, workload, replicas=1)
    run_for(emu, 30)
    ctrls = controllers_of(emu)
    if ctrls is not None:
        ctrls.stop_kube_controller_manager()
    api.delete_namespace(ns)
    run_for(emu, for_seconds, step=60)


def _kcm_down(emu: Any) -> None:
    _deleted_without_kube_controller_manager(emu, "staging", "api", for_seconds=120)


def _incomplete_forbidden(emu: Any) -> None:
    api = _start(emu)
    api.crd("acme.cert-manager.io", "challenges", "Challenge")
    ns = "cert-test"
    api.namespace(ns)
    app(api, ns, "echo", replicas=1)
    api.custom(
        "acme.cert-manager.io",
        "v1",
        "challenges",
        ns,
        {
            "apiVersion": "acme.cert-manager.io/v1",
            "kind": "Challenge",
            "metadata": {"name": "echo-tls-1-2818463021-1093428", "finalizers": ["finalizer.acme.cert-manager.io"]},
            "spec": {"dnsName": "echo.example.com", "type": "HTTP-01", "token": "t0k3n", "key": "k3y"},
        },
    )
    run_for(emu, 30)
    # cert-manager was uninstalled; the CRDs stayed
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)
    # the diagnosing identity may not list secrets in this namespace
    emu.knobs.forbid("secrets", verbs=("list", "get", "watch"), namespace=ns)


def _incomplete_timeout(emu: Any) -> None:
    api = _start(emu, nodes=3)
    api.crd("monitoring.coreos.com", "servicemonitors", "ServiceMonitor")
    ns = "ingest"
    api.namespace(ns)
    app(api, ns, "collector", node="node-3", replicas=1)
    api.custom(
        "monitoring.coreos.com",
        "v1",
        "servicemonitors",
        ns,
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "collector"},
            "spec": {"selector": {"matchLabels": {"app": "collector"}}, "endpoints": [{"port": "http"}]},
        },
    )
    run_for(emu, 30)
    api.node_lost("node-3")
    run_for(emu, 40, step=30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)
    # reads of the monitoring.coreos.com group hang for the diagnosing identity
    emu.knobs.latency(TIMEOUT_LATENCY_MS, match=r"^GET /apis/monitoring\.coreos\.com/")


TIMEOUT_LATENCY_MS = 10_000


def _namespace_spec_finalizer(emu: Any) -> None:
    api = _start(emu)
    ns = "ci-runner-42"
    api.http.post(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns},
            "spec": {"finalizers": ["kubernetes", "ci.example.com/cleanup"]},
        },
    )
    api.configmap(ns, "job-env", data={"RUN": "42"})
    run_for(emu, 15)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


def _namespace_spec_foreground(emu: Any) -> None:
    # kubernetes/kubernetes#77086: foregroundDeletion put in spec.finalizers (a standard name, so the API
    # server takes it), where only `kubernetes` is processed: the namespace controller removes its own
    # and the garbage collector never looks there
    api = _start(emu)
    ns = "batch-jobs"
    api.http.post(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns},
            "spec": {"finalizers": ["kubernetes", "foregroundDeletion"]},
        },
    )
    api.configmap(ns, "settings", data={"MODE": "batch"})
    run_for(emu, 15)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


# --------------------------------------------------------------------------------------------
# The registry.

_METRICS_ADAPTER_MSG = 'service/prometheus-adapter in "monitoring" is not present'


def _failed_discovery(ip: str, group: str, version: str) -> str:
    url = f"https://{ip}:443/apis/{group}/{version}"
    return (
        f'failing or missing response from {url}: Get "{url}": '
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )


def _metrics_unreachable_expected(style: str) -> Expected:
    """Seeds 001 and 004: one incident, told with the legacy or the stale discovery error text."""
    return Expected(
        namespace="tobedeletedb",
        state="terminating",
        causes=("apiservice_unavailable",),
        blocking=(ObjectRef("APIService", "v1beta1.metrics.k8s.io", api_version="apiregistration.k8s.io/v1"),),
        first_remedy="restore_backend",
        acceptable_remedies=("delete_apiservice",),
        conditions=conditions(discovery=_unavailable("metrics.k8s.io/v1beta1", style)),
        apiservices=(
            APIServiceExpectation(
                "v1beta1.metrics.k8s.io",
                "False",
                "FailedDiscoveryCheck",
                _failed_discovery(METRICS_IP, "metrics.k8s.io", "v1beta1"),
            ),
        ),
    )


_WIDGET_REMAINING = "Some resources are remaining: widgets.example.com has 1 resource instances"
_WIDGET_FINALIZERS = (
    f"Some content in the namespace has finalizers remaining: {WIDGET_FINALIZER} in 1 resource instances"
)
_WIDGET = ObjectRef("Widget", "storefront", "shop", "example.com/v1")


def _widget_config(kind: str = "ValidatingWebhookConfiguration") -> ObjectRef:
    return ObjectRef(kind, "widget-operator", api_version="admissionregistration.k8s.io/v1")


def _widget_scenarios() -> list[Scenario]:
    """An uninstalled operator's finalizer and its left-over webhook: which fixes the webhook rejects."""
    finalizer_stuck = conditions(remaining=_WIDGET_REMAINING, finalizers=_WIDGET_FINALIZERS)
    blocked = {
        "validating": ("a validating webhook", "ValidatingWebhookConfiguration", WIDGET_HOOK),
        "mutating": ("a mutating webhook with rule */*", "MutatingWebhookConfiguration", "mutate.widgets.example.com"),
    }
    out = []
    for variant, (what, kind, hook) in blocked.items():
        out.append(
            Scenario(
                name=f"finalizer-blocked-by-{variant}-webhook",
                title=f"an orphaned finalizer whose removal {what} with a dead backend would reject",
                description=(
                    f"The widget operator was uninstalled: Widget storefront keeps {WIDGET_FINALIZER}, and {what} "
                    "(failurePolicy Fail, UPDATE of widgets) has no Service any more, so the finalizer patch fails "
                    "with `failed calling webhook`: the webhook goes first."
                ),
                build=functools.partial(_widget_operator_gone, variant=variant),
                expected=Expected(
                    namespace="shop",
                    state="terminating",
                    causes=("orphaned_finalizer",),
                    blocking=(_WIDGET, _widget_config(kind)),
                    # its backend was uninstalled: deleting the left-over configuration comes first
                    first_remedy="delete_webhook_configuration",
                    acceptable_remedies=("restore_backend",),
                    conditions=finalizer_stuck,
                    blocked=(("remove_finalizer", hook),),
                ),
            )
        )
    unblocked = {
        "ignore": "the webhook has failurePolicy Ignore",
        "ready": "the webhook's backend is ready",
        "other-group": "the webhook's rules are for another API group",
        "object-selector": "the webhook's object selector does not match the Widget",
    }
    for variant, why in unblocked.items():
        out.append(
            Scenario(
                name=f"finalizer-webhook-{variant}",
                title=f"an orphaned finalizer and a webhook that blocks nothing: {why}",
                description=f"As finalizer-blocked-by-validating-webhook, but {why}: the finalizer patch is admitted.",
                build=functools.partial(_widget_operator_gone, variant=variant),
                expected=Expected(
                    namespace="shop",
                    state="terminating",
                    causes=("orphaned_finalizer",),
                    blocking=(_WIDGET,),
                    # the webhook's Service is gone (the operator is dead), except where its backend runs:
                    # then nothing shows whether the controller runs, and finding out comes first
                    first_remedy="fix_controller" if variant == "ready" else "remove_finalizer",
                    acceptable_remedies=("remove_finalizer",) if variant == "ready" else (),
                    conditions=finalizer_stuck,
                ),
            )
        )
    out.append(
        Scenario(
            name="finalizer-webhook-delete-only",
            title="a dead fail-closed webhook on DELETE of the left-over Widget: the Widget named, its patch admitted",
            description=(
                "The widget operator's webhook intercepts DELETE of widgets only and its Service is gone: the "
                "namespace controller's deletes of the Widget fail (the webhook and the Widget are named), while "
                "the finalizer patch, an UPDATE, is admitted."
            ),
            build=functools.partial(_widget_operator_gone, variant="delete-only"),
            expected=Expected(
                namespace="shop",
                state="terminating",
                causes=("webhook_blocks_delete", "orphaned_finalizer"),
                blocking=(_widget_config(), _WIDGET),
                first_remedy="delete_webhook_configuration",
                acceptable_remedies=("restore_backend", "remove_finalizer"),
                conditions=conditions(
                    content_failure="Failed to delete all resource types, 1 remaining: Internal error occurred: "
                    f'failed calling webhook "{WIDGET_HOOK}": failed to call webhook: Post '
                    '"https://widget-webhook.widget-system.svc:443/validate?timeout=10s": service "widget-webhook" '
                    "not found",
                ),
            ),
        )
    )
    return out


# --------------------------------------------------------------------------------------------
# Issue 23 §3, "stuck or slow": a namespace the namespace controller has not touched (its Lease
# tells running from stopped from unseen), pods past their grace period on Ready nodes read for
# progress (kubelet Events, container states, VolumeAttachments), pvc-protection that waits for a
# pod in its grace period or is orphaned by a stopped kube-controller-manager, and
# OrderedNamespaceDeletion on a 1.33 server. Status that components outside the emulator write
# (the attach/detach controller and the CSI external-attacher's VolumeAttachments, the
# StatefulSet controller's pod) is written through the API as they write it.

CSI_DRIVER = "ebs.csi.aws.com"


def _csi_postgres(
    api: Api, ns: str, *, node: str, stuck: str | None = None, grace: int = 30, attachment: str | None = None
) -> str:
    """A StatefulSet's postgres-0 on a dynamically provisioned CSI volume (PV `pvc-<claim uid>`), with
    its VolumeAttachment on ``node`` ("attached"; "detaching": deleted, held by the attacher's
    finalizer). Returns the PV's name."""
    claim = api.create(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-postgres-0", "labels": {"app": "postgres"}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "20Gi"}},
                "storageClassName": "gp3",
            },
        },
    )
    volume = f"pvc-{claim['metadata']['uid']}"
    # the external-provisioner's PV and the PV controller's binding
    api.create(
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume, "annotations": {"pv.kubernetes.io/provisioned-by": CSI_DRIVER}},
            "spec": {
                "capacity": {"storage": "20Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "gp3",
                "csi": {"driver": CSI_DRIVER, "volumeHandle": "vol-0c1d2e3f4a5b6c7d8", "fsType": "ext4"},
                "claimRef": {"namespace": ns, "name": "data-postgres-0", "uid": claim["metadata"]["uid"]},
            },
        },
    )
    api.put_status(f"/api/v1/persistentvolumes/{volume}", {"phase": "Bound"})
    claim_path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-postgres-0"
    bound = api.http.get(claim_path)
    api.http.put(claim_path, {**bound, "spec": {**bound["spec"], "volumeName": volume}})
    api.put_status(claim_path, {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "20Gi"}})
    statefulset = api.create(
        f"/apis/apps/v1/namespaces/{ns}/statefulsets",
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "postgres", "labels": {"app": "postgres"}},
            "spec": {
                "serviceName": "postgres",
                "replicas": 1,
                "selector": {"matchLabels": {"app": "postgres"}},
                "template": {
                    "metadata": {"labels": {"app": "postgres"}},
                    "spec": {"containers": [{"name": "postgres", "image": "postgres:17"}]},
                },
            },
        },
    )
    meta: JSON = {
        "name": "postgres-0",
        "labels": {"app": "postgres", "statefulset.kubernetes.io/pod-name": "postgres-0"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": "postgres",
                "uid": statefulset["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if stuck:
        meta["annotations"] = {STUCK_TERMINATING_ANNOTATION: stuck}
    api.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "postgres",
                        "image": "postgres:17",
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-postgres-0"}}],
            },
        },
    )
    if attachment:
        # the attach/detach controller's VolumeAttachment, attached by the CSI external-attacher
        name = "csi-" + hashlib.sha256(f"vol-0c1d2e3f4a5b6c7d8{CSI_DRIVER}{node}".encode()).hexdigest()
        api.create(
            "/apis/storage.k8s.io/v1/volumeattachments",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttachment",
                "metadata": {"name": name, "finalizers": [f"external-attacher/{CSI_DRIVER.replace('.', '-')}"]},
                "spec": {"attacher": CSI_DRIVER, "nodeName": node, "source": {"persistentVolumeName": volume}},
            },
        )
        api.put_status(
            f"/apis/storage.k8s.io/v1/volumeattachments/{name}",
            {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdba"}},
        )
        if attachment == "detaching":
            api.delete(f"/apis/storage.k8s.io/v1/volumeattachments/{name}")
    return volume


def _namespace_controller_not_yet(emu: Any) -> None:
    api = _start(emu)
    ns = "review-881"
    api.namespace(ns)
    app(api, ns, "review", replicas=1)
    run_for(emu, 30)
    # kube-controller-manager runs (its Lease is renewed) but its namespace controller has not got to
    # this namespace yet (a restarted controller still syncing its informers, a long queue)
    ctrls = controllers_of(emu)
    if ctrls is not None:
        ctrls.namespace.enabled = False
    api.delete_namespace(ns)
    run_for(emu, 120, step=30)


def _namespace_controller_unseen(emu: Any) -> None:
    _deleted_without_kube_controller_manager(emu, "sandbox-7", "sandbox", for_seconds=600)


def _pod_no_progress(emu: Any) -> None:
    api = _start(emu)
    ns = "ledger"
    api.namespace(ns)
    _csi_postgres(api, ns, node="node-2", stuck="true", attachment="attached")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 720, step=60)  # twelve minutes past the grace period: the kubelet says nothing


def _pod_volume_teardown(emu: Any) -> None:
    api = _start(emu)
    ns = "orders"
    api.namespace(ns)
    _csi_postgres(api, ns, node="node-2", stuck="volumes", attachment="detaching")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


def _pvc_pod_in_grace(emu: Any) -> None:
    api = _start(emu)
    ns = "warehouse"
    api.namespace(ns)
    _postgres(api, ns, node="node-2", grace=600)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)  # postgres-0 has ten minutes to shut down cleanly


def _pvc_protection_down(emu: Any) -> None:
    api = _start(emu)
    ns = "archive"
    api.namespace(ns)
    _postgres(api, ns, node="node-2")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 10, step=10)  # the namespace controller deleted everything; postgres-0 is in its grace
    ctrls = controllers_of(emu)
    if ctrls is not None:
        ctrls.stop_kube_controller_manager()  # ...and kube-controller-manager stopped
    run_for(emu, 120, step=30)  # the kubelet removed postgres-0; nobody removes pvc-protection


def _old_server_not_yet(emu: Any) -> None:
    api = _start(emu)
    ctrls = controllers_of(emu)
    if ctrls is not None:
        ctrls.stop_kube_controller_manager()  # restarting: nothing of it runs for now
    # a CI job's namespace, created and deleted at once: nothing was ever created in it
    api.namespace("ci-build-77")
    api.delete_namespace("ci-build-77")
    run_for(emu, 120, step=30)


# --------------------------------------------------------------------------------------------
# Issue 37 §5: pods the kubelet of a Ready node cannot finish (pod_not_terminating). The pods hang in the
# emulator's kubelet as on a node whose unmount cannot complete (``stuck-terminating: volumes``: the
# containers stop at the end of the grace period, the volumes never come down); what their volumes need
# is built the way it comes to be: an NFS server in the namespace being deleted, a CSI driver whose node
# plugin left the node (its CSINode, as the kubelet's plugin registration writes it), a VolumeAttachment
# whose detach never finished.


def _nfs_share(emu: Any, ns: str, *, minutes: int) -> None:
    """An NFS server (Deployment and Service) in ``ns``, a PersistentVolume on its share, and a client pod on
    node-2 that mounts it; the namespace deleted and left ``minutes`` of the emulator's time. With
    OrderedNamespaceDeletion the server's pod goes first (its kubelet finishes it), the client hangs."""
    api = _start(emu)
    api.namespace(ns)
    api.deployment(
        ns,
        "nfs-server",
        node="node-1",
        image="registry.k8s.io/volume-nfs:0.8",
        ports=[{"name": "nfs", "containerPort": 2049, "protocol": "TCP"}],
        labels={"app": "nfs-server"},
    )
    api.service(ns, "nfs-server", selector={"app": "nfs-server"}, ports=[{"name": "nfs", "port": 2049}])
    api.create(
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{ns}-shared"},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "nfs": {"server": f"nfs-server.{ns}.svc.cluster.local", "path": "/exports"},
                "claimRef": {"namespace": ns, "name": "shared"},
            },
        },
    )
    api.create(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "5Gi"}},
                "volumeName": f"{ns}-shared",
                "storageClassName": "",
            },
        },
    )
    api.put_status(f"/api/v1/persistentvolumes/{ns}-shared", {"phase": "Bound"})
    api.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "report-writer", "annotations": {STUCK_TERMINATING_ANNOTATION: "volumes"}},
            "spec": {
                "nodeName": "node-2",
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": "writer",
                        "image": "busybox:1.37",
                        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                    }
                ],
                "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}],
            },
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, minutes * 60, step=300)


def _csi_node(api: Api, node: str, *drivers: str) -> None:
    """The CSINode the kubelet writes as CSI node plugins register on ``node``."""
    api.create(
        "/apis/storage.k8s.io/v1/csinodes",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": d, "nodeID": f"{node}-{d.split('.')[0]}"} for d in drivers]},
        },
    )


def _csi_no_node_plugin(emu: Any) -> None:
    api = _start(emu)
    ns = "billing"
    api.namespace(ns)
    # the EBS CSI node plugin left node-2 (its DaemonSet was removed with the driver's release): only the
    # EFS driver is registered there now
    _csi_node(api, "node-2", "efs.csi.aws.com")
    _csi_postgres(api, ns, node="node-2", stuck="volumes", attachment="attached")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 40 * 60, step=300)


def _detach_stuck(emu: Any) -> None:
    api = _start(emu)
    ns = "invoices"
    api.namespace(ns)
    _csi_node(api, "node-2", CSI_DRIVER)
    # the volume's detach began and never finished (the attacher cannot reach the cloud's API)
    _csi_postgres(api, ns, node="node-2", stuck="volumes", attachment="detaching")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 40 * 60, step=300)


def _kubelet_scenarios() -> list[Scenario]:
    v133 = MappingProxyType({"server_version": "1.33.1"})
    return [
        Scenario(
            name="pod-nfs-server-gone",
            title="a pod on a Ready node whose NFS server went first, forty minutes without progress",
            description=(
                "report-writer mounts an NFS share served from the same namespace; the namespace's deletion took "
                "the server's pod first, the client's unmount hangs, and its kubelet never finishes it: "
                "pod_not_terminating, restore the NFS server first."
            ),
            build=lambda emu: _nfs_share(emu, "reports", minutes=40),
            options=v133,
            expected=Expected(
                namespace="reports",
                state="terminating",
                causes=("pod_not_terminating",),
                blocking=(ObjectRef("Pod", "report-writer", "reports"),),
                first_remedy="restore_backend",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("reports")),
            ),
        ),
        Scenario(
            name="pod-nfs-server-gone-within-bound",
            title="the same pod a quarter of an hour after its grace period: not yet past the bound",
            description=(
                "As pod-nfs-server-gone, twenty minutes after the delete: the report says how long the pod has "
                "stood still and that its NFS server is gone, asks to look at the kubelet, and does not call it "
                "stuck yet."
            ),
            build=lambda emu: _nfs_share(emu, "reports", minutes=20),
            options=v133,
            expected=Expected(
                namespace="reports",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="investigate",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("reports")),
            ),
        ),
        Scenario(
            name="pod-csi-no-node-plugin",
            title="a StatefulSet pod on a CSI volume whose driver has no node plugin on the pod's Ready node",
            description=(
                "postgres-0's volume is served by ebs.csi.aws.com, whose node plugin is no longer registered on "
                "node-2 (its CSINode lists only efs.csi.aws.com): the kubelet cannot unmount it; forty minutes "
                "later, pod_not_terminating naming the driver and the node."
            ),
            build=_csi_no_node_plugin,
            options=v133,
            expected=Expected(
                namespace="billing",
                state="terminating",
                causes=("pod_not_terminating",),
                blocking=(ObjectRef("Pod", "postgres-0", "billing"),),
                first_remedy="restore_backend",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("billing")),
            ),
        ),
        Scenario(
            name="pod-volume-detach-stuck",
            title="a pod whose volume has been detaching for forty minutes",
            description=(
                "postgres-0's containers stopped; its VolumeAttachment was deleted forty minutes ago and is still "
                "there (the attacher never finished): no longer progress, pod_not_terminating naming the "
                "VolumeAttachment."
            ),
            build=_detach_stuck,
            options=v133,
            expected=Expected(
                namespace="invoices",
                state="terminating",
                causes=("pod_not_terminating",),
                blocking=(ObjectRef("Pod", "postgres-0", "invoices"),),
                first_remedy="restore_backend",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("invoices")),
            ),
        ),
    ]


def _stuck_or_slow_scenarios() -> list[Scenario]:
    v133 = MappingProxyType({"server_version": "1.33.1"})
    unordered = MappingProxyType({"server_version": "1.32.4", "ordered_namespace_deletion": False})
    return [
        Scenario(
            name="namespace-controller-not-yet",
            title="no conditions two minutes after the delete, while kube-controller-manager's Lease is renewed",
            description=(
                "kube-controller-manager runs (its Lease is fresh) but its namespace controller has not got to "
                "this namespace yet: slow, not stuck."
            ),
            build=_namespace_controller_not_yet,
            options=v133,
            expected=Expected(
                namespace="review-881",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=None,
            ),
        ),
        Scenario(
            name="namespace-controller-unseen",
            title="no conditions ten minutes after the delete, and no kube-controller-manager Lease at all",
            description=(
                "A control plane without a visible leader-election Lease: whether the namespace controller runs "
                "cannot be seen, so the report says so and asks to check it."
            ),
            build=_namespace_controller_unseen,
            options=MappingProxyType({**v133, "controller_manager_lease": False}),
            expected=Expected(
                namespace="sandbox-7",
                state="terminating",
                causes=("unknown",),
                blocking=(),
                first_remedy="investigate",
                conditions=None,
            ),
        ),
        Scenario(
            name="pod-teardown-no-progress",
            title="a StatefulSet pod twelve minutes past its grace period on a Ready node, and no sign of its kubelet",
            description=(
                "postgres-0 (CSI volume still attached) stays Terminating on Ready node-2; no container stopped, no "
                "Event (none can be created in a terminating namespace), no error: no progress for ten minutes, look "
                "at the kubelet before any force-delete, which is high risk here."
            ),
            build=_pod_no_progress,
            options=v133,
            expected=Expected(
                namespace="ledger",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="investigate",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("ledger")),
            ),
        ),
        Scenario(
            name="pod-volume-teardown",
            title="a pod past its grace period whose containers stopped and whose volume is detaching",
            description=(
                "postgres-0's containers stopped at the end of its grace period; its CSI volume is detaching from "
                "node-2 (its VolumeAttachment is being deleted): progress, content still being deleted."
            ),
            build=_pod_volume_teardown,
            options=v133,
            expected=Expected(
                namespace="orders",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(content_failure=_unexpected_pods("orders")),
            ),
        ),
        Scenario(
            name="pvc-pod-in-grace",
            title="a PVC with pvc-protection whose pod is inside its ten-minute grace period",
            description=(
                "A 1.32 cluster deletes everything at once; data-postgres-0 waits for postgres-0, which is "
                "shutting down within its grace period: not blocking."
            ),
            build=_pvc_pod_in_grace,
            options=unordered,
            expected=Expected(
                namespace="warehouse",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(
                    remaining="Some resources are remaining: persistentvolumeclaims. has 1 resource instances, "
                    "pods. has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "kubernetes.io/pvc-protection in 1 resource instances",
                ),
            ),
        ),
        Scenario(
            name="pvc-protection-controller-down",
            title="a PVC no pod uses keeps pvc-protection after kube-controller-manager stopped",
            description=(
                "The pod is gone; kube-controller-manager (and its pvc-protection controller) stopped, its "
                "Lease lapsed: the finalizer is orphaned until it is back."
            ),
            build=_pvc_protection_down,
            options=unordered,
            expected=Expected(
                namespace="archive",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(ObjectRef("PersistentVolumeClaim", "data-postgres-0", "archive"),),
                first_remedy="fix_controller",
                conditions=conditions(
                    remaining="Some resources are remaining: persistentvolumeclaims. has 1 resource instances, "
                    "pods. has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "kubernetes.io/pvc-protection in 1 resource instances",
                ),
            ),
        ),
        Scenario(
            name="old-server-namespace-not-yet",
            title="a 1.15 cluster: an empty namespace deleted two minutes ago, no conditions",
            description=(
                "Before 1.16 the namespace controller writes no conditions and this control plane shows no "
                "Lease: an empty namespace younger than the controller's 5-minute resync is still being deleted."
            ),
            build=_old_server_not_yet,
            options=MappingProxyType({"server_version": "1.15.12", "controller_manager_lease": False}),
            expected=Expected(
                namespace="ci-build-77",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=None,
            ),
        ),
        Scenario(
            name="pod-on-notready-node-1-15",
            title="a 1.15 cluster: pods on a NotReady node, and no namespace conditions to say so",
            description=(
                "As pod-on-notready-node on a server before 1.16: the namespace controller runs and writes no "
                "conditions; the pods and their node tell the cause."
            ),
            build=_lost_node_not_ready,
            options=MappingProxyType({"server_version": "1.15.12", "controller_manager_lease": False}),
            expected=Expected(
                namespace="batch-jobs",
                state="terminating",
                causes=("pod_on_lost_node",),
                blocking=(ObjectRef("Pod", "worker-*", "batch-jobs"),),
                first_remedy="force_delete_pod",
                conditions=None,
            ),
        ),
        Scenario(
            name="pod-on-notready-node-ordered",
            title="a 1.33 cluster: pods on a NotReady node hold the whole namespace (OrderedNamespaceDeletion)",
            description=(
                "As pod-on-notready-node, on a server whose version has OrderedNamespaceDeletion on: nothing but "
                "the pods has been deleted, and the report says the pods hold everything else."
            ),
            build=_lost_node_not_ready,
            options=v133,
            expected=Expected(
                namespace="batch-jobs",
                state="terminating",
                causes=("pod_on_lost_node",),
                blocking=(ObjectRef("Pod", "worker-*", "batch-jobs"),),
                first_remedy="force_delete_pod",
                conditions=conditions(content_failure=_unexpected_pods("batch-jobs")),
            ),
        ),
    ]


# --------------------------------------------------------------------------------------------
# Issue 22: controllers judged by proof (alive, dead or unknown), and the live controller that cannot
# finish (finalizer_deadlock). Each controller that is not part of the emulator acts here through the
# same HTTP API it would use, under its own field manager, at the moment it would.


def _rfc3339(emu: Any) -> str:
    return str(emu.clock.now().strftime("%Y-%m-%dT%H:%M:%S.000000Z"))


def _lease(api: Api, ns: str, name: str, holder: str, *, duration: int = 60) -> None:
    """A leader-election Lease, acquired (or renewed) now by `holder`, as client-go's leaderelection does."""
    api.ensure_namespace(ns)
    now = _rfc3339(api.emu)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    current = api.http.get_or_none(f"{path}/{name}")
    spec: JSON = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    if current is None:
        api.create(
            path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
        )
    else:
        spec["acquireTime"] = current["spec"].get("acquireTime", now)
        api.http.request(
            "PUT",
            f"{path}/{name}",
            query={"fieldManager": holder.split("_", maxsplit=1)[0]},
            body={**current, "spec": spec},
        )


def _event(api: Api, ns: str, name: str, about: JSON, *, reason: str, message: str, reporter: str) -> None:
    """A core v1 Event about `about`, as client-go's event recorder writes it: created once, then its
    count and lastTimestamp updated for each repeat (a terminating namespace refuses the create, never
    the update)."""
    now = _rfc3339(api.emu)
    path = f"/api/v1/namespaces/{ns}/events"
    current = api.http.get_or_none(f"{path}/{name}")
    if current is None:
        meta = about["metadata"]
        api.create(
            path,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": {
                    "apiVersion": about["apiVersion"],
                    "kind": about["kind"],
                    "name": meta["name"],
                    "namespace": ns,
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message,
                "type": "Normal",
                "source": {"component": reporter},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "reportingComponent": reporter,
            },
        )
        return
    api.http.put(f"{path}/{name}", {**current, "count": int(current.get("count") or 1) + 1, "lastTimestamp": now})


def _crd_with_status(api: Api, group: str, plural: str, kind: str) -> None:
    """A CRD whose custom resources have a /status subresource (as most operators' CRDs do)."""
    api.crd(group, plural, kind)
    name = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}"
    current = api.http.get(name)
    versions = [{**v, "subresources": {"status": {}}} for v in current["spec"]["versions"]]
    api.http.put(name, {**current, "spec": {**current["spec"], "versions": versions}})


def _gadget(api: Api, ns: str, name: str, finalizer: str) -> JSON:
    return api.custom(
        "example.io",
        "v1",
        "gadgets",
        ns,
        {
            "apiVersion": "example.io/v1",
            "kind": "Gadget",
            "metadata": {"name": name, "finalizers": [finalizer]},
            "spec": {"size": 1},
        },
    )


def _cert_manager_outside(emu: Any) -> None:
    """cert-manager runs outside the cluster (no workload of it here); its Lease shows it at work."""
    api = _start(emu)
    api.crd("acme.cert-manager.io", "challenges", "Challenge")
    ns = "edge-certs"
    api.namespace(ns)
    api.custom(
        "acme.cert-manager.io",
        "v1",
        "challenges",
        ns,
        {
            "apiVersion": "acme.cert-manager.io/v1",
            "kind": "Challenge",
            "metadata": {"name": "edge-tls-1-2818463021-1093428", "finalizers": ["finalizer.acme.cert-manager.io"]},
            "spec": {"type": "HTTP-01", "dnsName": "edge.example.com"},
        },
    )
    _lease(api, "kube-system", "cert-manager-controller", "cert-manager-7f9c7d_0b1e")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 30)
    _lease(api, "kube-system", "cert-manager-controller", "cert-manager-7f9c7d_0b1e")  # renewed a moment ago
    run_for(emu, 5, step=5)


def _kiali_events(emu: Any) -> None:
    """The Kiali operator runs outside the cluster; an Event it keeps updating about the Kiali shows it.

    The Kiali was deleted first (`kubectl delete kiali kiali`), while the namespace still accepted new
    Events; then the namespace. Ordered namespace deletion waits for the console's pod (a 10-minute grace
    period) before deleting anything else, Events included, so the operator's Event is still there and
    can still be updated (a terminating namespace refuses new Events, not updates)."""
    api = _start(emu)
    _kiali_crd(api)
    ns = "mesh-console"
    api.namespace(ns)
    app(api, ns, "console", replicas=1, grace=600)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    path = f"/apis/kiali.io/v1alpha1/namespaces/{ns}/kialis/kiali"
    api.delete(path)
    kiali = api.http.get(path)
    _event(
        api, ns, "kiali.17f3a", kiali, reason="Deleting", message="removing Kiali resources", reporter="kiali-operator"
    )
    run_for(emu, 5, step=5)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)
    _event(
        api, ns, "kiali.17f3a", kiali, reason="Deleting", message="removing Kiali resources", reporter="kiali-operator"
    )
    run_for(emu, 5, step=5)


def _gadget_status(emu: Any) -> None:
    """A controller nothing names (no catalogue entry, no workload, no Lease) writes the Gadget's status."""
    api = _start(emu)
    _crd_with_status(api, "example.io", "gadgets", "Gadget")
    ns = "gadget-lab"
    api.namespace(ns)
    _gadget(api, ns, "probe", "gadgets.example.io/teardown")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)
    path = f"/apis/example.io/v1/namespaces/{ns}/gadgets/probe"
    current = api.http.get(path)
    api.http.request(
        "PUT",
        f"{path}/status",
        query={"fieldManager": "gadget-controller"},
        body={**current, "status": {"phase": "TearingDown", "observedGeneration": 2}},
    )
    run_for(emu, 5, step=5)


def _gadget_unknown(emu: Any) -> None:
    """The same Gadget, but nothing shows its controller at all."""
    api = _start(emu)
    _crd_with_status(api, "example.io", "gadgets", "Gadget")
    ns = "gadget-lab"
    api.namespace(ns)
    _gadget(api, ns, "probe", "gadgets.example.io/teardown")
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


def _kiali_scaled_to_zero(emu: Any) -> None:
    """The Kiali operator's Deployment exists, scaled to zero."""
    api = _start(emu)
    _kiali_crd(api)
    api.namespace("kiali-operator")
    api.deployment(
        "kiali-operator",
        "kiali-operator",
        node="node-1",
        replicas=0,
        image="quay.io/kiali/kiali-operator:v2.17.0",
        labels={"app.kubernetes.io/name": "kiali-operator"},
    )
    ns = "observability"
    api.namespace(ns)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


def _job_tracking_pod(emu: Any, *, stop_manager: bool = False) -> None:
    """A finished Job's pod keeps batch.kubernetes.io/job-tracking: kube-controller-manager's Job controller
    removes it (the Job itself was deleted with --cascade=orphan)."""
    api = _start(emu)
    ns = "nightly"
    api.namespace(ns)
    api.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "report-28466160-x7k2p",
                "labels": {"batch.kubernetes.io/job-name": "report-28466160"},
                "finalizers": ["batch.kubernetes.io/job-tracking"],
            },
            "spec": {
                "nodeName": "node-1",
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "report", "image": "busybox:1.36"}],
            },
        },
    )
    run_for(emu, 30)
    if stop_manager:
        ctrls = controllers_of(emu)
        if ctrls is not None:
            ctrls.stop_kube_controller_manager()
    api.delete_namespace(ns)
    run_for(emu, 90, step=30)


HELM_REMOVE = "wrangler.cattle.io/on-helm-chart-remove"


def _helm_chart_deadlock(emu: Any) -> None:
    """The helm-controller, alive, must run a helm-delete Job in the HelmChart's namespace to remove its
    finalizer; the terminating namespace refuses the Job, and the controller reports the refusal in the
    HelmChart's status (an older helm-controller, which retries for ever)."""
    api = _start(emu)
    _crd_with_status(api, "helm.cattle.io", "helmcharts", "HelmChart")
    api.namespace("helm-controller")
    api.deployment(
        "helm-controller",
        "helm-controller",
        node="node-1",
        image="rancher/helm-controller:v0.15.4",
        labels={"app": "helm-controller"},
    )
    ns = "edge-ingress"
    api.namespace(ns)
    api.custom(
        "helm.cattle.io",
        "v1",
        "helmcharts",
        ns,
        {
            "apiVersion": "helm.cattle.io/v1",
            "kind": "HelmChart",
            "metadata": {"name": "traefik", "finalizers": [HELM_REMOVE]},
            "spec": {"chart": "traefik", "repo": "https://traefik.github.io/charts", "targetNamespace": ns},
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 30)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "helm-delete-traefik"},
        "spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "helm", "image": "x"}]}}},
    }
    try:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)
        refusal = ""
    except ApiError as err:
        refusal = err.client_go_text
    path = f"/apis/helm.cattle.io/v1/namespaces/{ns}/helmcharts/traefik"
    current = api.http.get(path)
    now = _rfc3339(emu)
    api.http.request(
        "PUT",
        f"{path}/status",
        query={"fieldManager": "helm-controller"},
        body={
            **current,
            "status": {
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "Error",
                        "message": refusal,
                        "lastTransitionTime": now,
                    }
                ]
            },
        },
    )
    run_for(emu, 5, step=5)


# the operator's pod in cleanup-failing-live-operator, whose log the scenario stores (a test may store another)
CLEANUP_FAILING_OPERATOR = ("kiali-operator", "kiali-operator")


def cleanup_failing_log(namespace: str, deleted: datetime, credential: str) -> list[tuple[datetime, str]]:
    """The Kiali operator's log lines about `namespace`/kiali after its deletion: an API it calls refuses it,
    again and again, and each line carries `credential` as a bearer token (redacted wherever nsstuck quotes it)."""
    line = (
        '{{"level":"error","msg":"Reconciler error","Kiali":{{"name":"kiali","namespace":"{ns}"}},'
        '"error":"failed to remove the Kiali resources of {ns}/kiali: 401 Unauthorized '
        '(Authorization: Bearer {credential})"}}'
    )
    return [
        (deleted + timedelta(minutes=10 + 60 * i), line.format(ns=namespace, credential=credential)) for i in range(3)
    ]


def operator_pod(emu: Any, namespace: str) -> str:
    pods = Api(emu).http.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return str(pods[0]["metadata"]["name"])


def _cleanup_failing(emu: Any) -> None:
    """The Kiali operator runs (Ready) but cannot finish its cleanup of a Kiali CR: for 3 h its log has said
    that an API it calls refuses it (401), and the CR has stood still."""
    api = _start(emu)
    _kiali_crd(api)
    api.namespace("kiali-operator")
    api.deployment(
        "kiali-operator",
        "kiali-operator",
        node="node-1",
        image="quay.io/kiali/kiali-operator:v2.17.0",
        labels={"app.kubernetes.io/name": "kiali-operator"},
    )
    ns = "kiali-broken"
    api.namespace(ns)
    _kiali_cr(api, ns)
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 30)
    deleted = emu.clock.now()
    emu.clock.advance(3 * 3600)
    emu.settle()
    lines = cleanup_failing_log(ns, deleted, "eyJhbGciOiJub25lIn0.c2NlbmFyaW8tdG9rZW4.c2lnbmF0dXJlLXNjZW5hcmlv")
    emu.pod_logs.set("kiali-operator", operator_pod(emu, "kiali-operator"), lines)


_GADGET_REMAINING = "Some resources are remaining: gadgets.example.io has 1 resource instances"
_GADGET_FINALIZERS = (
    "Some content in the namespace has finalizers remaining: gadgets.example.io/teardown in 1 resource instances"
)
_KIALI_REMAINING = "Some resources are remaining: kialis.kiali.io has 1 resource instances"
_KIALI_FINALIZERS = "Some content in the namespace has finalizers remaining: kiali.io/finalizer in 1 resource instances"
_GADGET = ObjectRef("Gadget", "probe", "gadget-lab", "example.io/v1")
_KIALI_IN_OBSERVABILITY = ObjectRef("Kiali", "kiali", "observability", "kiali.io/v1alpha1")


def _controller_scenarios() -> list[Scenario]:
    job_pod = ObjectRef("Pod", "report-28466160-x7k2p", "nightly")
    return [
        Scenario(
            name="controller-alive-by-lease",
            title="cert-manager runs outside the cluster: only its renewed Lease shows it alive",
            description=(
                "No workload of cert-manager exists in the cluster, but kube-system/cert-manager-controller is "
                "renewed: the Challenge's finalizer is content still being deleted, not an orphan."
            ),
            build=_cert_manager_outside,
            expected=Expected(
                namespace="edge-certs",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(
                    remaining="Some resources are remaining: challenges.acme.cert-manager.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "finalizer.acme.cert-manager.io in 1 resource instances",
                ),
                controller="alive",
            ),
        ),
        Scenario(
            name="controller-alive-by-events",
            title="the Kiali operator runs outside the cluster: only its Events show it alive",
            description=(
                "No workload and no Lease of the Kiali operator; it keeps updating an Event about the Kiali "
                "(created before the deletion: a terminating namespace accepts no new Event, only updates)."
            ),
            build=_kiali_events,
            expected=Expected(
                namespace="mesh-console",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                # ordered deletion waits for the console's pod: no content totals yet (kubernetes#138208)
                conditions=ALL_OK,
                controller="alive",
            ),
        ),
        Scenario(
            name="controller-alive-by-status",
            title="a controller nothing names: only its recent status write shows it alive",
            description=(
                "gadgets.example.io/teardown is in no catalogue and no workload or Lease looks like its "
                "controller, but the Gadget's status was written through /status a moment ago by "
                "gadget-controller (managedFields)."
            ),
            build=_gadget_status,
            expected=Expected(
                namespace="gadget-lab",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(remaining=_GADGET_REMAINING, finalizers=_GADGET_FINALIZERS),
                controller="alive",
            ),
        ),
        Scenario(
            name="controller-unknown",
            title="a controller nothing shows: no workload, no Lease, no Event, no status change",
            description=(
                "As controller-alive-by-status without the status write: nothing proves the controller dead "
                "either, so finding it comes before removing the finalizer."
            ),
            build=_gadget_unknown,
            expected=Expected(
                namespace="gadget-lab",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(_GADGET,),
                first_remedy="fix_controller",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(remaining=_GADGET_REMAINING, finalizers=_GADGET_FINALIZERS),
                controller="unknown",
            ),
        ),
        Scenario(
            name="controller-dead-scaled-to-zero",
            title="the Kiali operator's Deployment is scaled to zero",
            description="Its Deployment exists with replicas 0: dead; scaling it up comes first.",
            build=_kiali_scaled_to_zero,
            expected=Expected(
                namespace="observability",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(_KIALI_IN_OBSERVABILITY,),
                first_remedy="fix_controller",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(remaining=_KIALI_REMAINING, finalizers=_KIALI_FINALIZERS),
                controller="dead",
            ),
        ),
        Scenario(
            name="control-plane-controller-with-lease",
            title="a pod keeps the Job controller's finalizer; kube-controller-manager's Lease is renewed",
            description=(
                "batch.kubernetes.io/job-tracking is removed by kube-controller-manager, whose Lease is fresh: "
                "content still being deleted (the emulator runs no Job controller, so the finalizer stays)."
            ),
            build=_job_tracking_pod,
            expected=Expected(
                namespace="nightly",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                acceptable_remedies=("investigate",),
                # ordered deletion: while pods remain, the conditions carry no content totals (kubernetes#138208)
                conditions=ALL_OK,
                controller="alive",
            ),
        ),
        Scenario(
            name="control-plane-controller-without-lease",
            title="the same pod where kube-controller-manager keeps no Lease (leader election off)",
            description=(
                "No kube-system/kube-controller-manager Lease: whether the Job controller runs is unknown, "
                "never dead for want of a workload."
            ),
            build=_job_tracking_pod,
            options=MappingProxyType({"controller_manager_lease": False}),
            expected=Expected(
                namespace="nightly",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(job_pod,),
                first_remedy="fix_controller",
                acceptable_remedies=("remove_finalizer",),
                # ordered deletion: while pods remain, the conditions carry no content totals (kubernetes#138208)
                conditions=ALL_OK,
                controller="unknown",
            ),
        ),
        Scenario(
            name="finalizer-deadlock-helm-chart",
            title="the helm-controller is alive but its helm-delete Job is refused in the terminating namespace",
            description=(
                "HelmChart traefik keeps wrangler.cattle.io/on-helm-chart-remove; the running helm-controller "
                "must create a helm-delete Job in edge-ingress, which is being deleted, and reports the refusal "
                "in the HelmChart's conditions. Uninstalling the release by hand, then removing the finalizer."
            ),
            build=_helm_chart_deadlock,
            expected=Expected(
                namespace="edge-ingress",
                state="terminating",
                causes=("finalizer_deadlock",),
                blocking=(ObjectRef("HelmChart", "traefik", "edge-ingress", "helm.cattle.io/v1"),),
                first_remedy="investigate",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(
                    remaining="Some resources are remaining: helmcharts.helm.cattle.io has 1 resource instances",
                    finalizers=f"Some content in the namespace has finalizers remaining: {HELM_REMOVE} in 1 "
                    "resource instances",
                ),
                controller="alive",
            ),
        ),
        Scenario(
            name="cleanup-failing-live-operator",
            title="the Kiali operator is alive, but its cleanup has kept failing for 3 h (its log says why)",
            description=(
                "Kiali kiali keeps kiali.io/finalizer; the running Kiali operator's log names it in a repeated "
                "401 Unauthorized from an API it calls, and nothing has changed on it since its deletion began. "
                "Fixing what it fails on first (the command reads the log), removing the finalizer later."
            ),
            build=_cleanup_failing,
            expected=Expected(
                namespace="kiali-broken",
                state="terminating",
                causes=("cleanup_failing",),
                blocking=(ObjectRef("Kiali", "kiali", "kiali-broken", "kiali.io/v1alpha1"),),
                first_remedy="investigate",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(remaining=_KIALI_REMAINING, finalizers=_KIALI_FINALIZERS),
                controller="alive",
            ),
        ),
    ]


# Issue 37 §3: a finalizer in no catalogue, whose controller the finalizer's name does not find (no workload
# carries a word of its domain), found from the cluster: RBAC, the CRD's Helm release, OLM.
_GIZMO_REMAINING = "Some resources are remaining: gizmos.acme.dev has 1 resource instances"
_GIZMO_FINALIZERS = "Some content in the namespace has finalizers remaining: acme.dev/teardown in 1 resource instances"
_GIZMO = ObjectRef("Gizmo", "press-7", "assembly-line", "acme.dev/v1")
_RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _grant(api: Api, name: str, rules: list[JSON], *, sa_ns: str, sa: str) -> None:
    """A ClusterRole with these rules, bound to a service account (as an operator's manifests install it)."""
    api.create(
        f"{_RBAC}/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
    )
    api.create(
        f"{_RBAC}/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}],
        },
    )


def _argocd_everywhere(api: Api) -> None:
    """Argo CD's application controller, Ready, allowed everything (`*` groups, resources and verbs): a grant
    that names no resource, which finding a controller through RBAC must ignore."""
    api.namespace("argocd")
    api.service_account("argocd", "argocd-application-controller")
    _grant(
        api,
        "argocd-application-controller",
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
        sa_ns="argocd",
        sa="argocd-application-controller",
    )
    api.deployment(
        "argocd",
        "argocd-application-controller",
        node="node-1",
        image="quay.io/argoproj/argocd:v2.13.1",
        service_account="argocd-application-controller",
    )


def _gizmo_line(emu: Any, *, reconciler: bool) -> None:
    """A Gizmo keeps acme.dev/teardown, a finalizer of no catalogue. Its controller, `reconciler` in
    platform-ops (no word of acme.dev in its name, labels or image), runs as a service account a ClusterRole
    lets update gizmos and gizmos/finalizers; Argo CD's wildcard grant is there too. Without `reconciler`,
    only that wildcard grant is left."""
    api = _start(emu)
    _crd_with_status(api, "acme.dev", "gizmos", "Gizmo")
    _argocd_everywhere(api)
    if reconciler:
        api.namespace("platform-ops")
        api.service_account("platform-ops", "reconciler")
        _grant(
            api,
            "gizmo-editor",
            [
                {
                    "apiGroups": ["acme.dev"],
                    "resources": ["gizmos", "gizmos/status", "gizmos/finalizers"],
                    "verbs": ["get", "list", "watch", "update", "patch"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
            sa_ns="platform-ops",
            sa="reconciler",
        )
        api.deployment(
            "platform-ops",
            "reconciler",
            node="node-1",
            image="ghcr.io/platform-team/reconciler:1.4.2",
            service_account="reconciler",
        )
    ns = "assembly-line"
    api.namespace(ns)
    api.custom(
        "acme.dev",
        "v1",
        "gizmos",
        ns,
        {
            "apiVersion": "acme.dev/v1",
            "kind": "Gizmo",
            "metadata": {"name": "press-7", "finalizers": ["acme.dev/teardown"]},
            "spec": {"tonnage": 40},
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


_SHIPMENT_REMAINING = "Some resources are remaining: shipments.fulfilment.example.net has 1 resource instances"
_SHIPMENT_FINALIZERS = (
    "Some content in the namespace has finalizers remaining: fulfilment.example.net/shipment-cleanup in 1 "
    "resource instances"
)
_SHIPMENT = ObjectRef("Shipment", "order-1042", "checkout", "fulfilment.example.net/v1")


def _shipment_release(emu: Any) -> None:
    """Helm release `storefront` (in storefront-system) installed the Shipment CRD (its meta.helm.sh
    annotations) and its controller, the Deployment order-manager (no word of the finalizer's domain in its
    name or image), which carries the release's app.kubernetes.io/instance label and is scaled to zero."""
    api = _start(emu)
    release = {"meta.helm.sh/release-name": "storefront", "meta.helm.sh/release-namespace": "storefront-system"}
    helm_labels = {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "storefront"}
    api.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "shipments.fulfilment.example.net", "labels": helm_labels, "annotations": release},
            "spec": {
                "group": "fulfilment.example.net",
                "names": {
                    "plural": "shipments",
                    "singular": "shipment",
                    "kind": "Shipment",
                    "listKind": "ShipmentList",
                },
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        },
    )
    api.namespace("storefront-system")
    api.deployment(
        "storefront-system",
        "order-manager",
        node="node-1",
        replicas=0,
        image="ghcr.io/storefront/order-manager:3.2.0",
        labels={**helm_labels, "app.kubernetes.io/name": "order-manager"},
    )
    ns = "checkout"
    api.namespace(ns)
    api.custom(
        "fulfilment.example.net",
        "v1",
        "shipments",
        ns,
        {
            "apiVersion": "fulfilment.example.net/v1",
            "kind": "Shipment",
            "metadata": {"name": "order-1042", "finalizers": ["fulfilment.example.net/shipment-cleanup"]},
            "spec": {"carrier": "rail"},
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


_RETENTION_REMAINING = "Some resources are remaining: retentions.archive.mycorp.io has 1 resource instances"
_RETENTION_FINALIZERS = (
    "Some content in the namespace has finalizers remaining: archive.mycorp.io/purge in 1 resource instances"
)


def _retention_operator(emu: Any) -> None:
    """OLM installed the operator of Retentions: ClusterServiceVersion retention-operator.v1.3.0 in
    `operators` owns the CRD and installs two Deployments; retention-controller-manager is Ready (no word of
    archive.mycorp.io in its name or image), retention-webhook does not exist. A Ready workload is never dead."""
    api = _start(emu)
    api.crd("operators.coreos.com", "clusterserviceversions", "ClusterServiceVersion", version="v1alpha1")
    _crd_with_status(api, "archive.mycorp.io", "retentions", "Retention")
    api.namespace("operators")
    api.custom(
        "operators.coreos.com",
        "v1alpha1",
        "clusterserviceversions",
        "operators",
        {
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "retention-operator.v1.3.0"},
            "spec": {
                "displayName": "Retention Operator",
                "version": "1.3.0",
                "customresourcedefinitions": {
                    "owned": [{"name": "retentions.archive.mycorp.io", "version": "v1", "kind": "Retention"}]
                },
                "install": {
                    "strategy": "deployment",
                    "spec": {"deployments": [{"name": "retention-controller-manager"}, {"name": "retention-webhook"}]},
                },
            },
        },
    )
    api.deployment("operators", "retention-controller-manager", node="node-1", image="quay.io/retention/manager:1.3.0")
    ns = "records"
    api.namespace(ns)
    api.custom(
        "archive.mycorp.io",
        "v1",
        "retentions",
        ns,
        {
            "apiVersion": "archive.mycorp.io/v1",
            "kind": "Retention",
            "metadata": {"name": "ledger-7y", "finalizers": ["archive.mycorp.io/purge"]},
            "spec": {"years": 7},
        },
    )
    run_for(emu, 30)
    api.delete_namespace(ns)
    run_for(emu, 60, step=30)


def _owner_discovery_scenarios() -> list[Scenario]:
    return [
        Scenario(
            name="controller-found-by-rbac",
            title="a finalizer no catalogue knows: its Ready controller found through RBAC, Argo CD's wildcard ignored",
            description=(
                "acme.dev/teardown is in no catalogue and no workload carries a word of its domain; a ClusterRole "
                "lets platform-ops/reconciler update gizmos and gizmos/finalizers, and Deployment reconciler "
                "runs as it, Ready: alive, content still being deleted. Argo CD's `*` grant names nothing."
            ),
            build=functools.partial(_gizmo_line, reconciler=True),
            expected=Expected(
                namespace="assembly-line",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                acceptable_remedies=("investigate",),
                conditions=conditions(remaining=_GIZMO_REMAINING, finalizers=_GIZMO_FINALIZERS),
                controller="alive",
                found_by="rbac",
            ),
        ),
        Scenario(
            name="controller-rbac-wildcard-only",
            title="the same finalizer where only Argo CD's wildcard grant lets anyone update gizmos",
            description=(
                "No role names gizmos: Argo CD's `*` grant does not make it the controller, so the controller "
                "is unknown (found by nothing but the finalizer's name), and finding it comes first."
            ),
            build=functools.partial(_gizmo_line, reconciler=False),
            expected=Expected(
                namespace="assembly-line",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(_GIZMO,),
                first_remedy="fix_controller",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(remaining=_GIZMO_REMAINING, finalizers=_GIZMO_FINALIZERS),
                controller="unknown",
                found_by="name",
            ),
        ),
        Scenario(
            name="controller-found-by-helm",
            title="the CRD's Helm release names its controller, scaled to zero",
            description=(
                "The Shipment CRD carries Helm release storefront-system/storefront; the release's Deployment "
                "order-manager (its instance label) is scaled to zero: dead, and bringing it back comes first."
            ),
            build=_shipment_release,
            expected=Expected(
                namespace="checkout",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(_SHIPMENT,),
                first_remedy="fix_controller",
                acceptable_remedies=("remove_finalizer",),
                conditions=conditions(remaining=_SHIPMENT_REMAINING, finalizers=_SHIPMENT_FINALIZERS),
                controller="dead",
                found_by="helm",
            ),
        ),
        Scenario(
            name="controller-found-by-olm",
            title="OLM's ClusterServiceVersion names the controller: one Deployment Ready, one missing",
            description=(
                "retention-operator.v1.3.0 owns the Retention CRD; of its two Deployments one is Ready and the "
                "other does not exist. A Ready workload is never called dead: alive, content still being deleted."
            ),
            build=_retention_operator,
            expected=Expected(
                namespace="records",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                acceptable_remedies=("investigate",),
                conditions=conditions(remaining=_RETENTION_REMAINING, finalizers=_RETENTION_FINALIZERS),
                controller="alive",
                found_by="olm",
            ),
        ),
    ]


def _scenarios() -> list[Scenario]:
    return [
        Scenario(
            name="seed000-metrics-missing-endpoints",
            title="metrics-server has no ready endpoints; its APIService is False (MissingEndpoints)",
            description=(
                "metrics-server crash-loops, so v1beta1.metrics.k8s.io is unavailable and discovery of "
                "metrics.k8s.io/v1beta1 fails; ack-system-e2e-test-0 is empty but stays Terminating."
            ),
            seed="000_95c7197c51b472e0",
            build=_seed000,
            expected=Expected(
                namespace="ack-system-e2e-test-0",
                state="terminating",
                causes=("apiservice_unavailable",),
                blocking=(ObjectRef("APIService", "v1beta1.metrics.k8s.io", api_version="apiregistration.k8s.io/v1"),),
                first_remedy="restore_backend",
                acceptable_remedies=("fix_controller", "delete_apiservice"),
                conditions=conditions(discovery=_unavailable("metrics.k8s.io/v1beta1")),
                apiservices=(
                    APIServiceExpectation(
                        "v1beta1.metrics.k8s.io",
                        "False",
                        "MissingEndpoints",
                        'endpointslices for service/metrics-server in "kube-system" have no addresses with '
                        'port name "https"',
                    ),
                ),
            ),
        ),
        Scenario(
            name="seed001-metrics-unreachable",
            title="metrics-server is healthy but the API server cannot reach it (FailedDiscoveryCheck)",
            description=(
                "A missing VPC route cuts the API server off from the metrics-server pod; the namespace "
                "controller fails discovery of metrics.k8s.io/v1beta1 and tobedeletedb stays Terminating."
            ),
            seed="001_2a786de849a15492",
            build=_metrics_unreachable,
            expected=_metrics_unreachable_expected("legacy"),
        ),
        Scenario(
            name="seed004-metrics-unreachable-stale",
            title="seed 001's incident on a cluster whose controller manager uses aggregated discovery",
            description=(
                "Same as seed001 (the Alibaba Cloud write-up of the same incident), but the namespace "
                "controller reports the newer 'stale GroupVersion discovery' error text."
            ),
            seed="004_e0a18edc6802d154",
            build=_metrics_unreachable,
            options=MappingProxyType({"discovery_error_style": "stale"}),
            expected=_metrics_unreachable_expected("stale"),
        ),
        Scenario(
            name="seed002-configmap-finalizer",
            title="a ConfigMap keeps a finalizer that no controller handles",
            description=(
                "ConfigMap mymap was created with finalizers: [kubernetes] and deleted; the ownerReferences "
                "cascade removed mymap-child, --cascade=orphan left mymap-child2. The namespace waits on mymap."
            ),
            seed="002_863af213790da13f",
            build=_seed002,
            expected=Expected(
                namespace="finalizer-demo",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(ObjectRef("ConfigMap", "mymap", "finalizer-demo"),),
                first_remedy="remove_finalizer",
                conditions=conditions(
                    remaining="Some resources are remaining: configmaps. has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: kubernetes in 1 resource "
                    "instances",
                ),
            ),
        ),
        Scenario(
            name="seed003-kubesphere-namespace-finalizer",
            title="the namespace keeps finalizers.kubesphere.io/namespaces after KubeSphere was uninstalled",
            description=(
                "The namespace controller removed all content and its own finalizer, but metadata.finalizers "
                "still holds KubeSphere's, and the owning Workspace kind no longer exists."
            ),
            seed="003_a4462261a960d9c7",
            build=_seed003_kubesphere,
            expected=Expected(
                namespace="kubesphere-sample",
                state="terminating",
                causes=("namespace_finalizer",),
                blocking=(ObjectRef("Namespace", "kubesphere-sample"),),
                first_remedy="remove_finalizer",
                conditions=ALL_OK,
                spec_finalizers=(),
                metadata_finalizers=("finalizers.kubesphere.io/namespaces",),
            ),
        ),
        Scenario(
            name="seed003-kiali-orphaned-finalizer",
            title="a Kiali CR keeps kiali.io/finalizer after the Kiali operator was uninstalled",
            description="istio-system stays Terminating on kialis.kiali.io/kiali; no operator removes the finalizer.",
            seed="003_a4462261a960d9c7",
            build=_seed003_kiali,
            expected=Expected(
                namespace="istio-system",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(ObjectRef("Kiali", "kiali", "istio-system", "kiali.io/v1alpha1"),),
                first_remedy="remove_finalizer",
                conditions=conditions(
                    remaining="Some resources are remaining: kialis.kiali.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: kiali.io/finalizer in 1 "
                    "resource instances",
                ),
            ),
        ),
        Scenario(
            name="gitops-owned-orphaned-finalizer",
            title="a namespace Argo CD and Flux deploy to, held by a Kiali CR whose operator is gone",
            description="storefront stays Terminating on kialis.kiali.io/kiali; Argo CD (selfHeal, "
            "CreateNamespace) and Flux would re-create what the delete removes.",
            build=_gitops_owned,
            expected=Expected(
                namespace="storefront",
                state="terminating",
                causes=("orphaned_finalizer", "gitops_owner"),
                blocking=(ObjectRef("Kiali", "kiali", "storefront", "kiali.io/v1alpha1"),),
                first_remedy="investigate",
                conditions=conditions(
                    remaining="Some resources are remaining: kialis.kiali.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: kiali.io/finalizer in 1 "
                    "resource instances",
                ),
            ),
        ),
        Scenario(
            name="seed003-prometheus-adapter-service-not-found",
            title="v1beta1.metrics.k8s.io points at a deleted prometheus-adapter (ServiceNotFound)",
            description="prometheus-adapter was removed but its APIService stayed; discovery keeps failing.",
            seed="003_a4462261a960d9c7",
            build=_seed003_adapter,
            expected=Expected(
                namespace="dev-sandbox",
                state="terminating",
                causes=("apiservice_unavailable",),
                blocking=(ObjectRef("APIService", "v1beta1.metrics.k8s.io", api_version="apiregistration.k8s.io/v1"),),
                first_remedy="delete_apiservice",
                acceptable_remedies=("restore_backend",),
                conditions=conditions(discovery=_unavailable("metrics.k8s.io/v1beta1")),
                apiservices=(
                    APIServiceExpectation("v1beta1.metrics.k8s.io", "False", "ServiceNotFound", _METRICS_ADAPTER_MSG),
                ),
            ),
        ),
        Scenario(
            name="namespace-spec-finalizer",
            title="spec.finalizers keeps a third-party entry after the namespace controller removed its own",
            description="ci-runner-42 was created with spec.finalizers [kubernetes, ci.example.com/cleanup].",
            build=_namespace_spec_finalizer,
            expected=Expected(
                namespace="ci-runner-42",
                state="terminating",
                causes=("namespace_finalizer",),
                blocking=(ObjectRef("Namespace", "ci-runner-42"),),
                # removing just ci.example.com/cleanup (PUT /finalize keeping "kubernetes") is narrower
                # than force-finalizing, which would also skip the namespace controller's own cleanup
                first_remedy="remove_finalizer",
                acceptable_remedies=("force_finalize_namespace",),
                conditions=ALL_OK,
                spec_finalizers=("ci.example.com/cleanup",),
            ),
        ),
        Scenario(
            name="namespace-spec-foreground-deletion",
            title="spec.finalizers keeps foregroundDeletion, which only means something in metadata.finalizers",
            description=(
                "batch-jobs was created with spec.finalizers [kubernetes, foregroundDeletion]; the namespace "
                "controller removed its own, and nothing processes foregroundDeletion there."
            ),
            build=_namespace_spec_foreground,
            expected=Expected(
                namespace="batch-jobs",
                state="terminating",
                causes=("namespace_finalizer",),
                blocking=(ObjectRef("Namespace", "batch-jobs"),),
                first_remedy="remove_finalizer",
                acceptable_remedies=("force_finalize_namespace",),
                conditions=ALL_OK,
                spec_finalizers=("foregroundDeletion",),
            ),
        ),
        Scenario(
            name="webhook-blocks-delete",
            title="a fail-closed validating webhook without endpoints blocks deleting ConfigMaps",
            description=(
                "policy-webhook (failurePolicy Fail, DELETE on configmaps) has no ready pods, so the namespace "
                "controller's DELETECOLLECTION of configmaps in payments fails with a 500."
            ),
            build=_webhook_blocks,
            expected=Expected(
                namespace="payments",
                state="terminating",
                causes=("webhook_blocks_delete",),
                blocking=(
                    ObjectRef(
                        "ValidatingWebhookConfiguration",
                        "policy-webhook",
                        api_version="admissionregistration.k8s.io/v1",
                    ),
                ),
                # the webhook's backend is installed but has no ready pods: as with an APIService whose
                # backend is broken (seed 000), fixing the backend comes before removing the webhook
                first_remedy="restore_backend",
                acceptable_remedies=("delete_webhook_configuration",),
                conditions=conditions(
                    content_failure="Failed to delete all resource types, 1 remaining: Internal error occurred: "
                    'failed calling webhook "validate.policy.example.com": failed to call webhook: Post '
                    '"https://policy-webhook.policy-system.svc:443/validate?timeout=10s": no endpoints available '
                    'for service "policy-webhook"',
                ),
            ),
        ),
        *_widget_scenarios(),
        *_stuck_or_slow_scenarios(),
        *_kubelet_scenarios(),
        *_controller_scenarios(),
        *_owner_discovery_scenarios(),
        Scenario(
            name="pod-on-notready-node",
            title="pods on a NotReady node keep their deletionTimestamp",
            description=(
                "node-3's kubelet stopped posting status; the namespace controller deleted the pods, but no "
                "kubelet confirms it. With OrderedNamespaceDeletion nothing else is deleted meanwhile, and "
                "the content conditions read OK (kubernetes#138208)."
            ),
            build=_lost_node_not_ready,
            expected=Expected(
                namespace="batch-jobs",
                state="terminating",
                causes=("pod_on_lost_node",),
                blocking=(ObjectRef("Pod", "worker-*", "batch-jobs"),),
                first_remedy="force_delete_pod",
                conditions=conditions(content_failure=_unexpected_pods("batch-jobs")),
            ),
        ),
        Scenario(
            name="pod-on-missing-node",
            title="a pod bound to a Node that no longer exists (PodGC not running)",
            description="node-3 was deleted; kube-controller-manager runs without podgc, so nothing removes the pod.",
            build=_lost_node_missing,
            options=MappingProxyType({"pod_gc_orphans": False}),
            expected=Expected(
                namespace="reports",
                state="terminating",
                causes=("pod_on_lost_node",),
                blocking=(ObjectRef("Pod", "renderer-*", "reports"),),
                first_remedy="force_delete_pod",
                conditions=conditions(content_failure=_unexpected_pods("reports")),
            ),
        ),
        Scenario(
            name="pvc-in-use",
            title="a PVC keeps kubernetes.io/pvc-protection because a pod on a lost node still uses it",
            description=(
                "A 1.32 cluster (OrderedNamespaceDeletion off): everything is deleted at once, postgres-0 "
                "hangs on NotReady node-3 and pins data-postgres-0."
            ),
            build=_pvc_in_use,
            options=MappingProxyType({"ordered_namespace_deletion": False}),
            expected=Expected(
                namespace="database",
                state="terminating",
                causes=("pod_on_lost_node", "pvc_in_use"),
                blocking=(
                    ObjectRef("Pod", "postgres-0", "database"),
                    ObjectRef("PersistentVolumeClaim", "data-postgres-0", "database"),
                ),
                first_remedy="force_delete_pod",
                conditions=conditions(
                    content_failure=_unexpected_pods("database"),
                    remaining="Some resources are remaining: persistentvolumeclaims. has 1 resource instances, "
                    "pods. has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "kubernetes.io/pvc-protection in 1 resource instances",
                ),
            ),
        ),
        Scenario(
            name="pod-stuck-terminating-ready-node",
            title="a pod on a Ready node that its kubelet cannot finish tearing down",
            description=(
                "postgres-0 sits on Ready node-2 with a deletionTimestamp long past, and its kubelet records "
                "FailedKillPod (the container runtime times out): a kubelet error, quoted; look at the kubelet "
                "before any force-delete (the pod holds a volume)."
            ),
            build=_pod_stuck_terminating,
            options=MappingProxyType({"server_version": "1.33.1"}),
            expected=Expected(
                namespace="legacy-app",
                state="terminating",
                causes=("deletion_error",),
                blocking=(ObjectRef("Pod", "postgres-0", "legacy-app"),),
                first_remedy="investigate",
                acceptable_remedies=("force_delete_pod",),
                conditions=conditions(content_failure=_unexpected_pods("legacy-app")),
            ),
        ),
        Scenario(
            name="discovery-failure-recovered",
            title="the discovery failure is stale: the APIService recovered, the controller is backing off",
            description=(
                "custom.metrics.k8s.io/v1beta1 was unreachable for six minutes; it is Available again, but "
                "the namespace controller's last attempt failed and it retries only after its back-off."
            ),
            build=_discovery_recovered,
            options=MappingProxyType({"discovery_error_style": "stale"}),
            expected=Expected(
                namespace="analytics",
                state="terminating",
                causes=("discovery_failure",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(discovery=_unavailable("custom.metrics.k8s.io/v1beta1", "stale")),
                apiservices=(
                    APIServiceExpectation("v1beta1.custom.metrics.k8s.io", "True", "Passed", "all checks passed"),
                ),
            ),
        ),
        Scenario(
            name="content-deleting",
            title="pods are still inside their 120 s grace period",
            description="Deleted 20 s ago; the pods are terminating normally on a Ready node. Not stuck yet.",
            build=_content_deleting,
            expected=Expected(
                namespace="web-frontend",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=ALL_OK,
            ),
        ),
        Scenario(
            name="live-operator-finalizer",
            title="a Kiali CR with kiali.io/finalizer while the Kiali operator is running",
            description=(
                "The finalizer's controller is alive (Deployment kiali-operator, RBAC on kiali.io): not orphaned."
            ),
            build=_live_operator,
            expected=Expected(
                namespace="observability",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=conditions(
                    remaining="Some resources are remaining: kialis.kiali.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: kiali.io/finalizer in 1 "
                    "resource instances",
                ),
            ),
        ),
        Scenario(
            name="just-deleted",
            title="deleted two seconds ago: no conditions yet",
            description="The namespace controller syncs a deleted namespace 5 s after it sees it. Not stuck.",
            build=_just_deleted,
            expected=Expected(
                namespace="preview-1234",
                state="terminating",
                causes=("content_deleting",),
                blocking=(),
                first_remedy="wait",
                conditions=None,
            ),
        ),
        Scenario(
            name="orphaned-finalizer-crd-deleting",
            title="Argo CD was uninstalled with its CRDs; an Application keeps its finalizer",
            description=(
                "applications.argoproj.io is Terminating (customresourcecleanup waits for the instances) and "
                "team-apps waits on Application guestbook's resources-finalizer.argocd.argoproj.io."
            ),
            build=_argocd_uninstalled,
            expected=Expected(
                namespace="team-apps",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(ObjectRef("Application", "guestbook", "team-apps", "argoproj.io/v1alpha1"),),
                first_remedy="remove_finalizer",
                conditions=conditions(
                    remaining="Some resources are remaining: applications.argoproj.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "resources-finalizer.argocd.argoproj.io in 1 resource instances",
                ),
                crds=(("applications.argoproj.io", "True", "InstanceDeletionInProgress"),),
            ),
        ),
        Scenario(
            name="controller-manager-down",
            title="Terminating with no conditions at all: the namespace controller is not running",
            description="kube-controller-manager stopped before the namespace was deleted; nothing was deleted.",
            build=_kcm_down,
            expected=Expected(
                namespace="staging",
                state="terminating",
                causes=("unknown",),
                blocking=(),
                first_remedy="fix_controller",
                acceptable_remedies=("wait",),
                conditions=None,
            ),
        ),
        Scenario(
            name="healthy-active",
            title="an Active namespace with a running application",
            description="Nothing to diagnose.",
            build=_healthy_active,
            expected=Expected(
                namespace="shop",
                state="active",
                causes=(),
                blocking=(),
                first_remedy="none",
                conditions=None,
            ),
        ),
        Scenario(
            name="deleted-cleanly",
            title="a namespace whose deletion finished",
            description="Deleted two minutes ago; the controllers removed everything and the namespace is gone.",
            build=_deleted_cleanly,
            expected=Expected(
                namespace="scratch",
                state="not_found",
                causes=(),
                blocking=(),
                first_remedy="none",
                conditions=None,
                spec_finalizers=(),
            ),
        ),
        Scenario(
            name="incomplete-forbidden-secrets",
            title="an orphaned cert-manager finalizer, diagnosed by an identity that may not list secrets",
            description="The evidence is incomplete (secrets are forbidden), so no force-finalize may be offered.",
            build=_incomplete_forbidden,
            expected=Expected(
                namespace="cert-test",
                state="terminating",
                causes=("orphaned_finalizer",),
                blocking=(
                    ObjectRef("Challenge", "echo-tls-1-2818463021-1093428", "cert-test", "acme.cert-manager.io/v1"),
                ),
                first_remedy="remove_finalizer",
                complete=False,
                gaps=("secrets",),
                conditions=conditions(
                    remaining="Some resources are remaining: challenges.acme.cert-manager.io has 1 resource instances",
                    finalizers="Some content in the namespace has finalizers remaining: "
                    "finalizer.acme.cert-manager.io in 1 resource instances",
                ),
            ),
        ),
        Scenario(
            name="incomplete-timeout-group",
            title="pods on a lost node, with one API group that times out for the diagnosing identity",
            description=(
                f"GETs under /apis/monitoring.coreos.com/ take {TIMEOUT_LATENCY_MS} ms for non-admin identities."
            ),
            build=_incomplete_timeout,
            expected=Expected(
                namespace="ingest",
                state="terminating",
                causes=("pod_on_lost_node",),
                blocking=(ObjectRef("Pod", "collector-*", "ingest"),),
                first_remedy="force_delete_pod",
                complete=False,
                gaps=("servicemonitors.monitoring.coreos.com",),
                conditions=conditions(content_failure=_unexpected_pods("ingest")),
            ),
        ),
    ]


# --------------------------------------------------------------------------------------------
# Issue 23 §1: discovery as the namespace controller sees it. kube-controller-manager (client-go 1.27+)
# reads aggregated discovery; the aggregator of 1.27.0-1.27.5 and 1.28.0-1.28.1 marks Stale a backend
# that ignores the Accept header of /apis (kubernetes/kubernetes#119662, Agones' allocation API),
# although its APIService is Available and /apis/allocation.agones.dev/v1 answers.

AGONES_IP = "10.96.88.15"
_AGONES_RESOURCES = [
    {
        "name": "gameserverallocations",
        "singularName": "gameserverallocation",
        "namespaced": True,
        "kind": "GameServerAllocation",
        "verbs": ["create"],
    }
]


def _agones(emu: Any, *, broken: bool = False) -> Api:
    """Agones' controller in agones-system serving allocation.agones.dev/v1 (its /apis ignores Accept)."""
    api = _start(emu)
    api.ensure_namespace("agones-system")
    api.deployment(
        "agones-system",
        "agones-controller",
        node="node-1",
        image="us-docker.pkg.dev/agones-images/release/agones-controller:1.31.0",
        ports=[{"name": "https", "containerPort": 8081, "protocol": "TCP"}],
        labels={"agones.dev/role": "controller"},
        annotations={CRASH_LOOP_ANNOTATION: "true"} if broken else None,
    )
    api.service(
        "agones-system",
        "agones-controller-service",
        selector={"agones.dev/role": "controller"},
        ports=[{"name": "https", "port": 443, "targetPort": "https"}],
        cluster_ip=AGONES_IP,
    )
    emu.register_aggregated_backend("allocation.agones.dev", "v1", _AGONES_RESOURCES, honours_discovery_accept=False)
    api.apiservice("allocation.agones.dev", "v1", svc_ns="agones-system", svc_name="agones-controller-service")
    run_for(emu, 60, step=30)
    api.namespace("game-servers")
    app(api, "game-servers", "lobby", replicas=1, grace=10)
    run_for(emu, 15)
    api.delete_namespace("game-servers")
    run_for(emu, 180, step=30)
    return api


_AGONES_APISERVICE = ObjectRef("APIService", "v1.allocation.agones.dev", api_version="apiregistration.k8s.io/v1")
_STALE = {"aggregated_discovery": True, "discovery_error_style": "stale"}


def _aggregated_discovery_scenarios() -> list[Scenario]:
    return [
        Scenario(
            name="aggregator-stale-defect",
            title="1.28.1: the aggregator marks Agones' available allocation API Stale (kubernetes#119662)",
            description=(
                "Agones' extension server answers /apis with its legacy APIGroupList whatever the Accept header; "
                "the 1.28.1 aggregator does not fall back to /apis/allocation.agones.dev/v1 and lists the "
                "version Stale in aggregated discovery, although the APIService is Available and the "
                "per-version document answers. kube-controller-manager fails discovery on it."
            ),
            build=_agones,
            options=MappingProxyType({**_STALE, "server_version": "1.28.1"}),
            expected=Expected(
                namespace="game-servers",
                state="terminating",
                causes=("aggregated_discovery_defect",),
                blocking=(_AGONES_APISERVICE,),
                first_remedy="restore_backend",
                conditions=conditions(discovery=_unavailable("allocation.agones.dev/v1", "stale")),
                apiservices=(APIServiceExpectation("v1.allocation.agones.dev", "True", "Passed", "all checks passed"),),
            ),
        ),
        Scenario(
            name="aggregator-stale-fixed",
            title="1.28.2: the same Agones backend, an aggregator with the fix: nothing is stuck",
            description=(
                "The aggregator of 1.28.2 (kubernetes#120359) falls back to the legacy per-version document of a "
                "backend that ignores Accept; allocation.agones.dev/v1 is Current and the namespace goes away."
            ),
            build=_agones,
            options=MappingProxyType({**_STALE, "server_version": "1.28.2"}),
            expected=Expected(
                namespace="game-servers",
                state="not_found",
                causes=(),
                blocking=(),
                first_remedy="none",
            ),
        ),
        Scenario(
            name="aggregated-stale-backend-down",
            title="1.28.1: allocation.agones.dev/v1 Stale because Agones' controller is crash-looping",
            description=(
                "Aggregated discovery lists the version Stale, and its APIService is not Available: the backend "
                "really is down. The defect of kubernetes#119662 is not the cause; the evidence chain is."
            ),
            build=functools.partial(_agones, broken=True),
            options=MappingProxyType({**_STALE, "server_version": "1.28.1"}),
            expected=Expected(
                namespace="game-servers",
                state="terminating",
                causes=("apiservice_unavailable",),
                blocking=(_AGONES_APISERVICE,),
                first_remedy="restore_backend",
                acceptable_remedies=("delete_apiservice",),
                # what allocation.agones.dev/v1 serves cannot be listed: a gap, no force-finalize
                complete=False,
                gaps=("allocation.agones.dev/v1",),
                conditions=conditions(discovery=_unavailable("allocation.agones.dev/v1", "stale")),
            ),
        ),
    ]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [*_scenarios(), *_aggregated_discovery_scenarios()]}


def apply_scenario(emu: Any, name: str) -> Scenario:
    """Build scenario ``name`` on a started emulator; returns it (with its expectations). Always the real
    build; what it leaves is also remembered for ``apply_scenario_once`` (when it can be: ``_remember``)."""
    scenario = _scenario(name)
    with untraced_here():
        _configure(emu, scenario)
        key = _once_key(emu, scenario)
        scenario.build(emu)
        _remember(key, emu, replace=True)
    return scenario


def apply_scenario_once(emu: Any, name: str) -> Scenario:
    """``apply_scenario``, built at most once per run for each scenario and starting state: the first
    time, the real build; after that, the state that build left restored into ``emu`` (``state.py``),
    which nothing read over HTTP or through kubectl tells apart from a build
    (``tests/emulator/test_scenario_states.py``). A few milliseconds instead of about 0.3 CPU-seconds.

    Once per process, kept in memory; once per run where the states are shared through files
    (``state_files.py``: the pytest plugin shares them between the run's processes): a process that
    finds no state of its own reads the one another process saved, or builds it (while others wanting
    it wait) and saves it. A file missing or unreadable means a build, as without one.

    The starting state is the emulator as the scenario's options leave it (seed, clock, options,
    controllers, knobs, store, ...): an emulator that already holds something else gets a build of its
    own. One that cannot be captured (a RealClock, a background controller loop, controllers of its
    own, a routed Service) always gets the real build. Tests of the build itself use ``apply_scenario``."""
    scenario = _scenario(name)
    with untraced_here():
        _configure(emu, scenario)
        key = _once_key(emu, scenario)
        if key is None:
            scenario.build(emu)
            return scenario
        state = _BUILT.get(key)
        if state is None:
            with state_files.building(key):
                state = state_files.load(key)
                if state is None:
                    scenario.build(emu)
                    _remember(key, emu, over_file=True)
                    return scenario
            _BUILT[key] = state
        restore(emu, state)
    return scenario


def _scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None


def _apply(emu: Any, scenario: Scenario) -> None:
    _configure(emu, scenario)
    scenario.build(emu)


def _configure(emu: Any, scenario: Scenario) -> None:
    options = getattr(emu, "options", None)
    for key, value in scenario.options.items():
        if isinstance(options, dict):
            options[key] = value
        if key == "discovery_error_style" and hasattr(emu, "discovery_error_style"):
            emu.discovery_error_style = value
    ctrls = controllers_of(emu)
    if ctrls is not None:
        ctrls.configure(**dict(scenario.options))


# (scenario, digest of the starting state) -> what the scenario's build left there
_BUILT: dict[tuple[str, str], EmulatorState] = {}


def _remember(key: tuple[str, str] | None, emu: Any, *, replace: bool = False, over_file: bool = False) -> None:
    """Keep what a build left for ``key``, here and in the run's shared folder (``replace``: even where a
    state is kept already, so that this process restores the very objects of its latest build;
    ``over_file``: over a file that could not be read)."""
    if key is None or (key in _BUILT and not replace):
        return
    try:
        state = capture(emu)
    except StateError:  # not capturable: later calls build again
        return
    _BUILT[key] = state
    state_files.save(key, state, replace=over_file)


def _once_key(emu: Any, scenario: Scenario) -> tuple[str, str] | None:
    """(scenario, a digest of everything of ``emu`` a build starts from), or None where no state is kept:
    not an Emulator on a FakeClock, or one whose controllers run in the background (what a build leaves
    then depends on timing)."""
    if not isinstance(emu, Emulator) or not isinstance(emu.clock, FakeClock) or emu._bg is not None:
        return None
    store, cluster = emu.cluster.store, emu.cluster
    digest = hashlib.sha256()
    with store.lock:
        for key in sorted(store.data):
            for name, entry in sorted(store.data[key].items()):
                digest.update(repr((key, name)).encode())
                digest.update(entry.raw)
        ctrls = controllers_of(emu)
        parts = (
            emu.seed,
            emu.clock.now().isoformat(),
            sorted(emu.options.items(), key=lambda kv: kv[0]),
            emu.discovery_error_style,
            store.rv,
            store.first_rv,
            len(store.events),
            store.rng.getstate(),
            sorted(cluster.types),
            sorted(cluster.backends.items()),
            cluster.rbac,
            cluster._next_ip,
            sorted(cluster.admin_users),
            sorted(cluster.service_routes.items()),
            sorted(emu.tokens.items()),
            sorted(emu.basic_auth.items()),
            emu.eks_auth,
            emu.knobs,
            sorted(emu.pod_logs._lines.items()),
            len(emu.journal.entries(admin=True)),
            [(type(c).__name__, getattr(c, "_last", None)) for c in emu.controllers],
            None if ctrls is None else [(type(c).__name__, sorted(vars(c).items())) for c in ctrls.all()],
        )
    digest.update(repr(parts).encode())
    return scenario.name, digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Before the delete (issue 27): a scenario's namespace as it stood right before `kubectl delete namespace`.


class _Stopped(Exception):
    """The test that held the build failed: the build stops at the delete instead of carrying on."""


class _Pause:
    """Holds a build at the DELETE of one namespace until the test lets it go on."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.reached = threading.Event()
        self.go_on = threading.Event()
        self.held = False
        self.stop = False

    def wait(self) -> None:
        self.held = True
        self.reached.set()
        self.go_on.wait()
        if self.stop:
            raise _Stopped


# emulator id -> the pause its build holds at (one build at a time per emulator)
_PAUSES: dict[int, _Pause] = {}


@contextmanager
def before_delete(emu: Any, scenario: Scenario) -> Iterator[Scenario]:
    """Build ``scenario`` on a started emulator up to the DELETE of its namespace, and yield there: the
    cluster as it stood right before ``kubectl delete namespace`` (nothing runs meanwhile: the controllers
    run only where the build settles them, and the FakeClock stands still). On leaving, the build goes on
    exactly as ``apply_scenario`` would have run it: the delete, then whatever follows it (the namespace
    controller and the others running, the clock advancing). ``scenario`` may be a library scenario with
    other options (``dataclasses.replace``). Raises if the build ends without deleting its namespace."""
    pause = _Pause(scenario.expected.namespace)
    failure: list[BaseException] = []

    def build() -> None:
        try:
            _apply(emu, scenario)
        except _Stopped:
            pass
        except BaseException as err:  # handed to the test's thread, which raises it
            failure.append(err)
        finally:
            pause.reached.set()

    _PAUSES[id(emu)] = pause
    worker = threading.Thread(target=untraced(build), name=f"scenario-{scenario.name}", daemon=True)
    worker.start()
    try:
        pause.reached.wait()
        if failure:
            raise failure[0]
        if not pause.held:
            raise RuntimeError(f"scenario {scenario.name} never deletes namespace {pause.namespace}")
        try:
            yield scenario
        except BaseException:
            pause.stop = True
            raise
    finally:
        pause.go_on.set()
        worker.join()
        _PAUSES.pop(id(emu), None)
    if failure:
        raise failure[0]


def pods_of(emu: Any, namespace: str) -> list[JSON]:
    """The pods of a namespace (for expectations that depend on generated names)."""
    return KubeHTTP(emu.url, emu.admin_token).list_items(f"/api/v1/namespaces/{namespace}/pods")


def snapshot(emu: Any) -> dict[str, Any]:
    """Every object of every listable type, as JSON text per (type, namespace/name), for comparisons."""
    from .controllers._inventory import take_inventory
    from .controllers.discovery_client import discover

    http = KubeHTTP(emu.url, emu.admin_token)
    inv = take_inventory(http, discover(http))
    out: dict[str, Any] = {}
    for res, obj in inv.objects:
        meta = obj.get("metadata") or {}
        key = f"{res.group}/{res.name}/{meta.get('namespace', '')}/{meta.get('name')}"
        out[key] = json.dumps(obj, sort_keys=True)
    return out
