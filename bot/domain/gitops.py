"""GitOps owners (issue 38 §5): the marks Argo CD and Flux leave on what they manage, and the lists that
confirm them. Shared by the collector (which lists only what an object's marks ask for) and the rule.

Read from the tools' sources:
- Argo CD (argoproj/argo-cd common/common.go, util/argo/resource_tracking.go): the annotation
  `argocd.argoproj.io/tracking-id`, `<app>:<group>/<kind>:<namespace>/<name>` (the default since 3.0), where
  `<app>` is the Application's name, or `<its namespace>_<name>` for an Application outside Argo CD's own
  namespace; or the label `app.kubernetes.io/instance` (2.x's default), which Helm charts set too. The
  Application (argoproj.io/v1alpha1) says where it deploys in `spec.destination` {server, name, namespace}.
- Flux (fluxcd/kustomize-controller, fluxcd/helm-controller): the labels `<group>/name` and `<group>/namespace`
  naming the Kustomization (kustomize.toolkit.fluxcd.io/v1) or HelmRelease (helm.toolkit.fluxcd.io/v2) that
  applied the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.domain.refs import KubeObject, meta

TRACKING_ID = "argocd.argoproj.io/tracking-id"
INSTANCE = "app.kubernetes.io/instance"


@dataclass(frozen=True)
class OwnerKind:
    tool: str
    kind: str
    group: str
    version: str
    resource: str

    @property
    def path(self) -> str:
        """The cluster-wide list."""
        return f"/apis/{self.group}/{self.version}/{self.resource}"

    @property
    def name_label(self) -> str:
        return f"{self.group}/name"

    @property
    def namespace_label(self) -> str:
        return f"{self.group}/namespace"


APPLICATIONS = OwnerKind("Argo CD", "Application", "argoproj.io", "v1alpha1", "applications")
KUSTOMIZATIONS = OwnerKind("Flux", "Kustomization", "kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
HELM_RELEASES = OwnerKind("Flux", "HelmRelease", "helm.toolkit.fluxcd.io", "v2", "helmreleases")
OWNER_KINDS = (APPLICATIONS, KUSTOMIZATIONS, HELM_RELEASES)
FLUX_KINDS = (KUSTOMIZATIONS, HELM_RELEASES)


def marked_kinds(obj: KubeObject) -> set[OwnerKind]:
    """The owner kinds whose list the object's labels and annotations ask for."""
    data = meta(obj)
    labels = data.get("labels") or {}
    annotations = data.get("annotations") or {}
    out = set()
    if TRACKING_ID in annotations or INSTANCE in labels:
        out.add(APPLICATIONS)
    out.update(kind for kind in FLUX_KINDS if kind.name_label in labels)
    return out


@dataclass(frozen=True)
class Tracking:
    """A parsed `argocd.argoproj.io/tracking-id`."""

    app: str  # the Application's instance name: `name`, or `namespace_name`
    group: str
    kind: str
    namespace: str
    name: str


def parse_tracking_id(value: str) -> Tracking | None:
    """`<app>:<group>/<kind>:<namespace>/<name>`, as Argo CD's ParseAppInstanceValue reads it; None when not."""
    parts = value.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    group, slash, kind = parts[1].partition("/")
    namespace, slash2, name = parts[2].partition("/")
    if not slash or not slash2:
        return None
    return Tracking(app=parts[0], group=group, kind=kind, namespace=namespace, name=name)


def trim_owner(obj: KubeObject) -> KubeObject:
    """What the rule reads of an Application, Kustomization or HelmRelease: its name and the few spec fields
    that say where it deploys and whether it re-creates (never its sources, values or status)."""
    data = meta(obj)
    spec = obj.get("spec") or {}
    kept: dict[str, Any] = {}
    for key in ("destination", "syncPolicy", "interval", "suspend", "targetNamespace", "prune", "releaseName"):
        if key in spec:
            kept[key] = spec[key]
    if isinstance(spec.get("driftDetection"), dict):
        kept["driftDetection"] = {"mode": spec["driftDetection"].get("mode")}
    if isinstance(kept.get("destination"), dict):
        kept["destination"] = {k: v for k, v in kept["destination"].items() if k in ("server", "name", "namespace")}
    if isinstance(kept.get("syncPolicy"), dict):
        policy = kept["syncPolicy"]
        kept["syncPolicy"] = {k: v for k, v in policy.items() if k in ("automated", "syncOptions")}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: data[k] for k in ("name", "namespace", "uid", "deletionTimestamp") if k in data},
        "spec": kept,
    }
