"""References to Kubernetes objects and the small helpers to read raw objects (plain dicts)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NewType

# names that are easy to mix up with any other string: a registered cluster's name (validated by the
# config file), and a Slack channel id
ClusterName = NewType("ClusterName", str)
ChannelId = NewType("ChannelId", str)

# A namespace's name (an RFC 1123 label): what the CLI and the Slack command accept, in one place.
NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# the namespaces the API server never deletes (NamespaceLifecycle admission: k8s.io/apiserver/pkg/admission/
# plugin/namespace/lifecycle)
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})

KubeObject = dict[str, Any]


@dataclass(frozen=True, order=True)
class ObjectRef:
    """One exact Kubernetes object: enough to find it again and to notice that it changed."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    finalizers: tuple[str, ...] = ()
    # the plural resource name and group, so that a remedy can address it without discovery
    resource: str | None = None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def plural(self) -> str:
        """The resource's plural: as discovery gave it, else the kind's lower case with an `s`."""
        return self.resource or self.kind.lower() + "s"

    @property
    def display(self) -> str:
        """`kialis.kiali.io/kiali`, `pods/web-0`, `apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io`."""
        return f"{self.kubectl_type}/{self.name}"

    @property
    def kubectl_type(self) -> str:
        """`kialis.kiali.io`, `pods`: the resource qualified by its group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind}
        if self.namespace is not None:
            out["namespace"] = self.namespace
        out["name"] = self.name
        if self.uid is not None:
            out["uid"] = self.uid
        if self.resource_version is not None:
            out["resourceVersion"] = self.resource_version
        if self.finalizers:
            out["finalizers"] = list(self.finalizers)
        if self.resource is not None:
            out["resource"] = self.resource
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ObjectRef:
        return cls(
            api_version=data.get("apiVersion", ""),
            kind=data["kind"],
            name=data["name"],
            namespace=data.get("namespace"),
            uid=data.get("uid"),
            resource_version=data.get("resourceVersion"),
            finalizers=tuple(data.get("finalizers", ())),
            resource=data.get("resource"),
        )

    @classmethod
    def of(cls, obj: KubeObject, *, resource: str | None = None) -> ObjectRef:
        """A reference to a raw object as the API server returned it."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=meta.get("namespace"),
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
            finalizers=tuple(meta.get("finalizers") or ()),
            resource=resource,
        )


def meta(obj: KubeObject) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name_of(obj: KubeObject) -> str:
    return str(meta(obj).get("name", ""))


def finalizers_of(obj: KubeObject) -> list[str]:
    return [str(f) for f in meta(obj).get("finalizers") or ()]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from the API (`2026-11-21T10:00:00Z`), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def deletion_time(obj: KubeObject) -> datetime | None:
    return parse_time(meta(obj).get("deletionTimestamp"))


def condition(obj: KubeObject, kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind`, if present."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def service_of_address(address: str) -> tuple[str, str] | None:
    """(namespace, name) of the Service a host name names in cluster DNS (`name.namespace.svc`,
    `name.namespace.svc.cluster.local`), None for any other address (an IP, an outside host)."""
    parts = address.strip().rstrip(".").split(".")
    if len(parts) >= 3 and parts[2] == "svc" and parts[0] and parts[1]:
        return parts[1], parts[0]
    return None
