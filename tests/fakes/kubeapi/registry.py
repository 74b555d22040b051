"""The resource types the emulated API server serves (built-ins, custom resources, aggregated APIs)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

ALL_VERBS: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
STATUS_VERBS: tuple[str, ...] = ("get", "patch", "update")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # subresource name -> (verbs, kind)
    subresources: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    return_deleted_object: bool = False
    custom: bool = False  # a custom resource served for a CRD
    graceful: bool = False  # pods: graceful deletion
    uses_generation: bool = False
    status_subresource: bool = False
    # an aggregated API (served by a registered backend behind a non-Local APIService)
    aggregated: bool = False
    # the store of another type that holds these objects (events.k8s.io Events live in core's)
    storage: tuple[str, str] | None = None
    # the first minor release of Kubernetes that serves it (0: every release the emulator plays);
    # an emulator whose option `server_version` is older does not serve it
    since_minor: int = 0

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per (group, resource), shared by every served version."""
        return self.storage or (self.group, self.plural)

    @property
    def gr(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def sub_verbs(self, sub: str) -> tuple[str, ...] | None:
        for name, verbs, _kind in self.subresources:
            if name == sub:
                return verbs
        return None

    def base_path(self, namespace: str | None) -> str:
        root = "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def discovery(self) -> list[dict[str, Any]]:
        """The APIResource entries for this type and its subresources (legacy discovery)."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        for name, verbs, kind in self.subresources:
            entry: dict[str, Any] = {
                "name": f"{self.plural}/{name}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind or self.kind,
                "verbs": list(verbs),
            }
            if kind and kind != self.kind and "." in kind:
                pass
            out.append(entry)
        return out


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    *,
    verbs: tuple[str, ...] = ALL_VERBS,
    short: tuple[str, ...] = (),
    cats: tuple[str, ...] = (),
    subs: tuple[tuple[str, tuple[str, ...], str], ...] = (),
    status: bool = False,
    rdo: bool = False,
    graceful: bool = False,
    generation: bool = False,
) -> ResourceType:
    if status and not any(s[0] == "status" for s in subs):
        subs = (*subs, ("status", STATUS_VERBS, kind))
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        verbs=verbs,
        short_names=short,
        categories=cats,
        subresources=tuple(sorted(subs)),
        return_deleted_object=rdo,
        graceful=graceful,
        uses_generation=generation,
        status_subresource=status,
    )


_SCALE = ("scale", ("get", "patch", "update"), "Scale")
_ALL = ("all",)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _rt("", "v1", "bindings", "Binding", verbs=("create",)),
    _rt("", "v1", "componentstatuses", "ComponentStatus", False, verbs=("get", "list"), short=("cs",)),
    _rt("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _rt("", "v1", "endpoints", "Endpoints", short=("ep",)),
    _rt("", "v1", "events", "Event", short=("ev",)),
    _rt("", "v1", "limitranges", "LimitRange", short=("limits",)),
    _rt(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        verbs=NO_COLLECTION,
        short=("ns",),
        subs=(("finalize", ("update",), "Namespace"),),
        status=True,
        rdo=True,
    ),
    _rt(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        short=("no",),
        subs=(("proxy", ("create", "delete", "get", "patch", "update"), "NodeProxyOptions"),),
        status=True,
    ),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), status=True, rdo=True),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, short=("pv",), status=True, rdo=True),
    _rt(
        "",
        "v1",
        "pods",
        "Pod",
        short=("po",),
        cats=_ALL,
        subs=(
            ("binding", ("create",), "Binding"),
            ("ephemeralcontainers", ("get", "patch", "update"), "Pod"),
            ("eviction", ("create",), "Eviction"),
            ("log", ("get",), "Pod"),
        ),
        status=True,
        rdo=True,
        graceful=True,
    ),
    _rt("", "v1", "podtemplates", "PodTemplate"),
    _rt(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        short=("rc",),
        cats=_ALL,
        subs=(_SCALE,),
        status=True,
    ),
    _rt("", "v1", "resourcequotas", "ResourceQuota", short=("quota",), status=True),
    _rt("", "v1", "secrets", "Secret"),
    _rt(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        short=("sa",),
        subs=(("token", ("create",), "TokenRequest"),),
        rdo=True,
    ),
    _rt(
        "",
        "v1",
        "services",
        "Service",
        short=("svc",),
        cats=_ALL,
        subs=(("proxy", ("create", "delete", "get", "patch", "update"), "ServiceProxyOptions"),),
        status=True,
        rdo=True,
    ),
    # admissionregistration.k8s.io/v1
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        cats=("api-extensions",),
        generation=True,
    ),
    # ValidatingAdmissionPolicies and their bindings: GA (admissionregistration.k8s.io/v1) in 1.30
    replace(
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            False,
            cats=("api-extensions",),
            status=True,
            generation=True,
        ),
        since_minor=30,
    ),
    replace(
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            False,
            cats=("api-extensions",),
            generation=True,
        ),
        since_minor=30,
    ),
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        cats=("api-extensions",),
        generation=True,
    ),
    # apiextensions.k8s.io/v1
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short=("crd", "crds"),
        cats=("api-extensions",),
        status=True,
        generation=True,
    ),
    # apiregistration.k8s.io/v1
    _rt("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, cats=("api-extensions",), status=True),
    # apps/v1
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision"),
    _rt("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), cats=_ALL, status=True, generation=True),
    _rt(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short=("deploy",),
        cats=_ALL,
        subs=(_SCALE,),
        status=True,
        generation=True,
    ),
    _rt(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short=("rs",),
        cats=_ALL,
        subs=(_SCALE,),
        status=True,
        generation=True,
    ),
    _rt(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short=("sts",),
        cats=_ALL,
        subs=(_SCALE,),
        status=True,
        generation=True,
    ),
    # authentication.k8s.io/v1 and authorization.k8s.io/v1: create-only reviews, never stored
    _rt("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, verbs=("create",)),
    _rt("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=("create",)),
    _rt("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", verbs=("create",)),
    _rt("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=("create",)),
    _rt("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False, verbs=("create",)),
    _rt("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)),
    # autoscaling/v2
    _rt(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short=("hpa",),
        cats=_ALL,
        status=True,
    ),
    # batch/v1
    _rt("batch", "v1", "cronjobs", "CronJob", short=("cj",), cats=_ALL, status=True, generation=True),
    _rt("batch", "v1", "jobs", "Job", cats=_ALL, status=True, generation=True),
    # coordination.k8s.io/v1
    _rt("coordination.k8s.io", "v1", "leases", "Lease"),
    # discovery.k8s.io/v1
    _rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    # networking.k8s.io/v1
    _rt("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    _rt("networking.k8s.io", "v1", "ingresses", "Ingress", short=("ing",), status=True, generation=True),
    _rt("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",), generation=True),
    # policy/v1
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), status=True, generation=True),
    # rbac.authorization.k8s.io/v1
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    # scheduling.k8s.io/v1
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    # storage.k8s.io/v1
    _rt("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    _rt("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=("sc",), rdo=True),
    _rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, status=True),
    # the core Events, seen through events.k8s.io/v1 (events_v1.py converts)
    ResourceType(
        group="events.k8s.io",
        version="v1",
        plural="events",
        singular="event",
        kind="Event",
        namespaced=True,
        short_names=("ev",),
        storage=("", "events"),
        since_minor=19,
    ),
)

# Built-in groups in the order the real /apis lists them (by APIService group priority).
BUILTIN_GROUP_ORDER: tuple[str, ...] = (
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io",
)


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority_key(version: str) -> tuple[int, int, int, str]:
    """Sort key that puts versions in Kubernetes priority order (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other)."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


@dataclass
class AggregatedBackend:
    """What an available non-Local APIService serves."""

    group: str
    version: str
    resources: list[dict[str, Any]] = field(default_factory=list)
    # False: its /apis ignores the Accept header and answers the legacy APIGroupList (or 404), as Agones'
    # extension server did; an aggregator without the fix of kubernetes/kubernetes#119870 marks it Stale
    honours_discovery_accept: bool = True


def crd_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of a CRD as ResourceTypes."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    plural = names.get("plural", "")
    kind = names.get("kind", "")
    singular = names.get("singular") or kind.lower()
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        subs_spec = v.get("subresources") or spec.get("subresources") or {}
        subs: list[tuple[str, tuple[str, ...], str]] = []
        if "scale" in subs_spec:
            subs.append(("scale", ("get", "patch", "update"), "Scale"))
        has_status = "status" in subs_spec
        if has_status:
            subs.append(("status", STATUS_VERBS, kind))
        out.append(
            ResourceType(
                group=group,
                version=v.get("name", ""),
                plural=plural,
                singular=singular,
                kind=kind,
                namespaced=namespaced,
                verbs=ALL_VERBS,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(sorted(subs)),
                custom=True,
                uses_generation=True,
                status_subresource=has_status,
            )
        )
    return out
