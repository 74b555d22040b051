"""A NamespaceSnapshot: everything the diagnosis rules read, collected once, serialisable.

Objects are kept as the API server returned them (plain JSON dicts), so that a stored snapshot can
be diagnosed again by newer rules, and a rule can be tested from a dict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.domain.controller_logs import ControllerLog
from bot.domain.findings import Gap
from bot.domain.refs import ClusterName, KubeObject, meta

SNAPSHOT_SCHEMA = "nsstuck.snapshot/v1"


@dataclass(frozen=True)
class ResourceType:
    """One namespaced resource type of the preferred version of its group."""

    group: str
    version: str
    resource: str  # plural, e.g. "kialis"
    kind: str
    namespaced: bool = True
    verbs: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """`kialis.kiali.io`, or `pods` for the core group (the namespace controller's spelling)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "version": self.version,
            "resource": self.resource,
            "kind": self.kind,
            "namespaced": self.namespaced,
            "verbs": list(self.verbs),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResourceType:
        return cls(
            group=data["group"],
            version=data["version"],
            resource=data["resource"],
            kind=data["kind"],
            namespaced=bool(data.get("namespaced", True)),
            verbs=tuple(data.get("verbs", ())),
        )


@dataclass(frozen=True)
class GroupVersionStatus:
    """Whether one group version answered discovery, and how it failed if not."""

    group_version: str
    available: bool
    status_code: int | None = None
    error: str | None = None  # the message a client sees, e.g. "the server is currently unable to ..."
    body: str | None = None  # the raw body when it was not a Status (the aggregator's "service unavailable")
    # aggregated discovery (issue 23 §1): the apidiscovery.k8s.io version ("v2", "v2beta1") whose
    # APIGroupDiscoveryList listed this group version, and its freshness there ("Current", "Stale");
    # None: the server answered the legacy documents. A Stale version is failing (`available` False),
    # as the namespace controller sees it, whatever its per-version document says.
    aggregated: str | None = None
    freshness: str | None = None
    # whether its per-version document (/apis/<g>/<v>) answered 200 when we asked it; None: not asked
    # (a Current version of aggregated discovery needs no request). For a Stale version this is the
    # second opinion: the probe's status, error and body are in status_code, error and body.
    legacy_answered: bool | None = None

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]

    @property
    def stale(self) -> bool:
        return self.freshness == "Stale"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group_version": self.group_version,
            "available": self.available,
            "status_code": self.status_code,
            "error": self.error,
            "body": self.body,
        }
        if self.aggregated is not None or self.freshness is not None or self.legacy_answered is not None:
            out.update(aggregated=self.aggregated, freshness=self.freshness, legacy_answered=self.legacy_answered)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupVersionStatus:
        return cls(
            group_version=data["group_version"],
            available=bool(data["available"]),
            status_code=data.get("status_code"),
            error=data.get("error"),
            body=data.get("body"),
            aggregated=data.get("aggregated"),
            freshness=data.get("freshness"),
            legacy_answered=data.get("legacy_answered"),
        )


@dataclass(frozen=True)
class Observation:
    """What an earlier snapshot of the same incident saw, for progress (issue 37 §1): when, the namespace
    controller's count of remaining objects (None: not counted), and each held object's resourceVersion
    by uid."""

    at: datetime
    remaining: int | None
    versions: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "remaining": self.remaining, "versions": dict(self.versions)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Observation:
        return cls(
            at=datetime.fromisoformat(data["at"]),
            remaining=data.get("remaining"),
            versions=dict(data.get("versions") or {}),
        )


# how many earlier observations an open incident keeps (the first, for the trend since the first
# look, and the newest ones), and how many held objects' resourceVersions each keeps
KEPT_OBSERVATIONS = 8
KEPT_VERSIONS = 500


def kept_observations(observations: tuple[Observation, ...], new: Observation) -> tuple[Observation, ...]:
    """`observations` with `new` added, oldest first, bounded: the first and the newest are kept."""
    together = tuple(sorted((*observations, new), key=lambda o: o.at))
    if len(together) <= KEPT_OBSERVATIONS:
        return together
    return (together[0], *together[-(KEPT_OBSERVATIONS - 1) :])


@dataclass(frozen=True)
class Earlier:
    """What a diagnosis of an open incident takes from the incident's earlier looks: the namespace UID
    they were of (a namespace recreated under the same name is another one) and the observations."""

    namespace_uid: str
    observations: tuple[Observation, ...] = ()


_OBJECT_LISTS = (
    "apiservices",
    "services",
    "endpoint_slices",
    "endpoints",
    "backend_pods",
    "webhook_configurations",
    "admission_policies",
    "crds",
    "workloads",
    "leases",
    "events",
    "volume_attachments",
    "persistent_volumes",
    "roles",
    "role_bindings",
    "cluster_service_versions",
    "gitops_owners",
)


@dataclass(frozen=True)
class NamespaceSnapshot:
    cluster: ClusterName
    namespace: str
    observed_at: datetime
    namespace_object: KubeObject | None
    group_versions: tuple[GroupVersionStatus, ...] = ()
    resource_types: tuple[ResourceType, ...] = ()
    # objects inside the namespace, per ResourceType.key
    contents: Mapping[str, tuple[KubeObject, ...]] = field(default_factory=dict)
    apiservices: tuple[KubeObject, ...] = ()
    # Services behind APIServices and webhooks (any namespace), their endpoints and their pods
    services: tuple[KubeObject, ...] = ()
    endpoint_slices: tuple[KubeObject, ...] = ()
    endpoints: tuple[KubeObject, ...] = ()
    backend_pods: tuple[KubeObject, ...] = ()
    # Validating- and MutatingWebhookConfigurations (kind tells them apart)
    webhook_configurations: tuple[KubeObject, ...] = ()
    # ValidatingAdmissionPolicies and their bindings (kind tells them apart); empty on a server without them
    admission_policies: tuple[KubeObject, ...] = ()
    crds: tuple[KubeObject, ...] = ()
    # nodes of the pods that are being deleted; None: the Node object does not exist
    nodes: Mapping[str, KubeObject | None] = field(default_factory=dict)
    # cluster-wide Deployments, StatefulSets and DaemonSets, for controller attribution
    workloads: tuple[KubeObject, ...] = ()
    # the API server's /version document (gitVersion, major, minor...); None: not read
    server_version: Mapping[str, Any] | None = None
    # every Lease of the cluster outside kube-node-lease (leader election: is a controller renewing?)
    leases: tuple[KubeObject, ...] = ()
    # Events in the namespace (events.k8s.io/v1, or core v1 on servers without it): the newest ones
    # and those about objects being deleted, newest first (`bot.domain.events` reads either form)
    events: tuple[KubeObject, ...] = ()
    # VolumeAttachments on the nodes of deleting pods, or of the namespace's claims' volumes
    volume_attachments: tuple[KubeObject, ...] = ()
    # issue 37 §5, the volumes of deleting pods past their grace period: the PersistentVolumes bound to
    # their claims (`trim_volume`: the source's server or CSI driver, the claim), and the CSINode of their
    # nodes (which CSI drivers have a node plugin registered there; None: the node has no CSINode)
    persistent_volumes: tuple[KubeObject, ...] = ()
    csi_nodes: Mapping[str, KubeObject | None] = field(default_factory=dict)
    # finding a finalizer's controller that neither the catalogue nor its name finds (issue 37 §3), read only
    # for such finalizers: the ClusterRoles and Roles (of this namespace) that let someone update or patch a
    # type of the objects being deleted, the bindings of those roles to service accounts, and OLM's
    # ClusterServiceVersions (not the copies OLM makes in every namespace); `owner_reads` names the reads
    # made ("rbac", "olm"), so that nothing found is told apart from nothing asked
    roles: tuple[KubeObject, ...] = ()
    role_bindings: tuple[KubeObject, ...] = ()
    cluster_service_versions: tuple[KubeObject, ...] = ()
    owner_reads: tuple[str, ...] = ()
    # issue 38 §5: the Argo CD Applications, Flux Kustomizations and HelmReleases of the kinds the namespace's
    # or its content's labels and annotations name (`bot.domain.gitops`), trimmed (`trim_owner`); listed only
    # for such marks, and `gitops_reads` names the lists that answered (resource names): a kind marked
    # but not read had no CRD (404) or is a gap
    gitops_owners: tuple[KubeObject, ...] = ()
    gitops_reads: tuple[str, ...] = ()
    gaps: tuple[Gap, ...] = ()
    # what the controllers of blocking objects logged about them (quoted, redacted lines and counts only,
    # never the log), or why their logs could not be read (issue 37 §2)
    controller_logs: tuple[ControllerLog, ...] = ()
    # earlier snapshots of the same incident, oldest first, as far as progress needs them
    earlier: tuple[Observation, ...] = ()
    # an Active namespace collected whole (contents, discovery, webhooks, controllers, nodes of its pods),
    # so that the rules can predict whether deleting it would get stuck; False for a snapshot of the
    # namespace object alone (one stored before predictions existed)
    for_prediction: bool = False

    @property
    def exists(self) -> bool:
        return self.namespace_object is not None

    @property
    def complete(self) -> bool:
        return not self.gaps

    def objects(self, key: str) -> tuple[KubeObject, ...]:
        return tuple(self.contents.get(key, ()))

    def all_contents(self) -> Iterator[tuple[ResourceType, KubeObject]]:
        """Every object in the namespace with its type, in a stable order."""
        types = {t.key: t for t in self.resource_types}
        for key in sorted(self.contents):
            rtype = types.get(key) or _type_from_key(key)
            for obj in self.contents[key]:
                yield rtype, obj

    def resource_type(self, key: str) -> ResourceType | None:
        return next((t for t in self.resource_types if t.key == key), None)

    def lease(self, namespace: str, name: str) -> KubeObject | None:
        return next(
            (x for x in self.leases if meta(x).get("namespace") == namespace and meta(x).get("name") == name), None
        )

    def failing_group_versions(self) -> tuple[GroupVersionStatus, ...]:
        return tuple(gv for gv in self.group_versions if not gv.available)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SNAPSHOT_SCHEMA,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "observed_at": self.observed_at.isoformat(),
            "namespace_object": self.namespace_object,
            "group_versions": [g.to_json() for g in self.group_versions],
            "resource_types": [t.to_json() for t in self.resource_types],
            "contents": {k: list(v) for k, v in sorted(self.contents.items())},
            "nodes": dict(self.nodes),
            "server_version": dict(self.server_version) if self.server_version is not None else None,
            "csi_nodes": dict(self.csi_nodes),
            "gaps": [g.to_json() for g in self.gaps],
        }
        if self.for_prediction:
            out["for_prediction"] = True
        if self.owner_reads:
            out["owner_reads"] = list(self.owner_reads)
        if self.gitops_reads:
            out["gitops_reads"] = list(self.gitops_reads)
        if self.controller_logs:
            out["controller_logs"] = [c.to_json() for c in self.controller_logs]
        if self.earlier:
            out["earlier"] = [o.to_json() for o in self.earlier]
        for name in _OBJECT_LISTS:
            out[name] = list(getattr(self, name))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NamespaceSnapshot:
        if data.get("schema") != SNAPSHOT_SCHEMA:
            raise ValueError(f"not a {SNAPSHOT_SCHEMA} document: schema is {data.get('schema')!r}")
        lists = {name: tuple(data.get(name) or ()) for name in _OBJECT_LISTS}
        return cls(
            cluster=data["cluster"],
            namespace=data["namespace"],
            observed_at=datetime.fromisoformat(data["observed_at"]),
            namespace_object=data.get("namespace_object"),
            group_versions=tuple(GroupVersionStatus.from_json(g) for g in data.get("group_versions", ())),
            resource_types=tuple(ResourceType.from_json(t) for t in data.get("resource_types", ())),
            contents={k: tuple(v) for k, v in (data.get("contents") or {}).items()},
            nodes=dict(data.get("nodes") or {}),
            server_version=data.get("server_version"),
            csi_nodes=dict(data.get("csi_nodes") or {}),
            gaps=tuple(Gap.from_json(g) for g in data.get("gaps", ())),
            for_prediction=bool(data.get("for_prediction", False)),
            owner_reads=tuple(str(r) for r in data.get("owner_reads") or ()),
            gitops_reads=tuple(str(r) for r in data.get("gitops_reads") or ()),
            controller_logs=tuple(ControllerLog.from_json(c) for c in data.get("controller_logs") or ()),
            earlier=tuple(Observation.from_json(o) for o in data.get("earlier") or ()),
            **lists,
        )


def _type_from_key(key: str) -> ResourceType:
    resource, _, group = key.partition(".")
    return ResourceType(group=group, version="", resource=resource, kind="")


def labels_of(obj: KubeObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in (meta(obj).get("labels") or {}).items()}
