"""Discovery as client-go's ``ServerPreferredNamespacedResources`` does it, including partial failures.

The namespace controller copies the discovery error text verbatim into the
``NamespaceDeletionDiscoveryFailure`` condition, so the texts here follow client-go:

- ``ErrGroupDiscoveryFailed``: ``unable to retrieve the complete list of server APIs: `` + the
  sorted ``"<group/version>: <err>"`` entries joined with ``", "``;
- legacy discovery (``discovery_error_style="legacy"``): an aggregator 503 with a text body is
  ``the server is currently unable to handle the request``;
- aggregated discovery (``"stale"``): a version the aggregator could not fetch is marked Stale and
  reported as ``stale GroupVersion discovery: <group/version>`` (client-go >= 1.27).

Like client-go (1.27+), /api and /apis are asked for aggregated discovery first (``AGGREGATED_ACCEPT``);
when the server answers with an APIGroupDiscoveryList (its Content-Type says so), the resources come
from it and a version with ``freshness: Stale`` fails with ``stale GroupVersion discovery: <gv>``,
whatever the style, without asking its per-version document. When the server answers the legacy
documents, the "stale" style is modelled on top of the legacy walk: a group version that fails is
reported with the stale text, which is what a kube-controller-manager using aggregated discovery sees
for the same failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._http import JSON, ApiError, KubeHTTP

DiscoveryErrorStyle = Literal["legacy", "stale"]

# client-go's discovery client: v2, then v2beta1, then the legacy documents
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


@dataclass(frozen=True)
class APIResource:
    """One resource of a group version, as legacy discovery lists it."""

    group: str
    version: str
    name: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def gvr_text(self) -> str:
        """GroupVersionResource.String(): ``/v1, Resource=pods``, ``apps/v1, Resource=deployments``."""
        return f"{self.group}/{self.version}, Resource={self.name}"


class DiscoveryError(Exception):
    """Discovery failed outright (``/api`` or ``/apis`` itself); the text is the raw error."""


@dataclass
class GroupDiscoveryFailed(Exception):
    """client-go's ``*discovery.ErrGroupDiscoveryFailed``."""

    groups: dict[str, str] = field(default_factory=dict)  # "group/version" -> error text

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = sorted(f"{gv}: {err}" for gv, err in self.groups.items())
        return "unable to retrieve the complete list of server APIs: " + ", ".join(parts)


@dataclass
class DiscoveryResult:
    """Preferred-version resources (no subresources) plus the per-group-version failures."""

    resources: list[APIResource]
    failed: GroupDiscoveryFailed | None
    all_resources: list[APIResource] = field(default_factory=list)  # every version, for kind lookups

    def namespaced(self) -> list[APIResource]:
        return [r for r in self.resources if r.namespaced]

    def by_kind(self, api_version: str, kind: str) -> APIResource | None:
        group, _, version = api_version.rpartition("/")
        for res in self.all_resources:
            if res.group == group and res.version == version and res.kind == kind:
                return res
        for res in self.resources:
            if res.group == group and res.kind == kind:
                return res
        return None


def gv_error_text(err: ApiError, group_version: str, style: DiscoveryErrorStyle) -> str:
    if style == "stale":
        return f"stale GroupVersion discovery: {group_version}"
    return err.client_go_text


def discover(client: KubeHTTP, *, style: DiscoveryErrorStyle = "legacy") -> DiscoveryResult:
    """Walk ``/api``, ``/apis`` and every group version; keep going past failing group versions.

    Raises DiscoveryError when ``/api`` or ``/apis`` fails (not an ErrGroupDiscoveryFailed).
    """
    try:
        core, core_type = client.get_negotiated("/api", AGGREGATED_ACCEPT)
        groups_doc, groups_type = client.get_negotiated("/apis", AGGREGATED_ACCEPT)
    except ApiError as err:
        raise DiscoveryError(err.client_go_text) from err
    if "as=APIGroupDiscoveryList" in core_type and "as=APIGroupDiscoveryList" in groups_type:
        return _from_aggregated([*(core.get("items") or []), *(groups_doc.get("items") or [])])
    return _legacy_walk(client, core, groups_doc, style)


def _from_aggregated(items: list[Any]) -> DiscoveryResult:
    """client-go's aggregated discovery: resources from the document, Stale versions failed."""
    failed: dict[str, str] = {}
    fetched: dict[tuple[str, str], list[JSON]] = {}
    groups: list[tuple[str, list[str], str]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        group = str((item.get("metadata") or {}).get("name") or "")
        versions = [v for v in item.get("versions") or [] if isinstance(v, dict)]
        names = [str(v.get("version") or "") for v in versions]
        if not names:
            continue
        groups.append((group, names, names[0]))
        for v in versions:
            version = str(v.get("version") or "")
            gv = f"{group}/{version}" if group else version
            if v.get("freshness") == "Stale":
                failed[gv] = f"stale GroupVersion discovery: {gv}"
                continue
            fetched[(group, version)] = [
                {
                    "name": r.get("resource", ""),
                    "kind": (r.get("responseKind") or {}).get("kind", ""),
                    "namespaced": r.get("scope") == "Namespaced",
                    "verbs": list(r.get("verbs") or []),
                }
                for r in v.get("resources") or []
                if isinstance(r, dict)
            ]
    return _result(groups, fetched, failed)


def _legacy_walk(client: KubeHTTP, core: JSON, groups_doc: JSON, style: DiscoveryErrorStyle) -> DiscoveryResult:
    groups: list[tuple[str, list[str], str]] = []  # (group, versions in order, preferred version)
    core_versions = [str(v) for v in core.get("versions") or []]
    if core_versions:
        groups.append(("", core_versions, core_versions[0]))
    for group in groups_doc.get("groups") or []:
        if not isinstance(group, dict):
            continue
        versions = [str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, dict)]
        preferred = str((group.get("preferredVersion") or {}).get("version") or (versions or [""])[0])
        groups.append((str(group.get("name") or ""), versions, preferred))

    failed: dict[str, str] = {}
    fetched: dict[tuple[str, str], list[JSON]] = {}
    for group, versions, _preferred in groups:
        for version in versions:
            gv = f"{group}/{version}" if group else version
            path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            try:
                doc = client.get(path)
            except ApiError as err:
                failed[gv] = gv_error_text(err, gv, style)
                continue
            fetched[(group, version)] = [r for r in doc.get("resources") or [] if isinstance(r, dict)]
    return _result(groups, fetched, failed)


def _result(
    groups: list[tuple[str, list[str], str]], fetched: dict[tuple[str, str], list[JSON]], failed: dict[str, str]
) -> DiscoveryResult:
    preferred_resources: dict[tuple[str, str], APIResource] = {}  # (group, resource) -> chosen
    all_resources: list[APIResource] = []
    order: list[tuple[str, str]] = []
    for group, versions, preferred in groups:
        for version in versions:
            docs = fetched.get((group, version))
            if docs is None:
                continue
            for raw in docs:
                name = str(raw.get("name") or "")
                if not name or "/" in name:
                    continue
                res = APIResource(
                    group=group,
                    version=version,
                    name=name,
                    kind=str(raw.get("kind") or ""),
                    namespaced=bool(raw.get("namespaced")),
                    verbs=tuple(str(v) for v in raw.get("verbs") or []),
                )
                all_resources.append(res)
                key = (group, name)
                if key in preferred_resources and version != preferred:
                    continue
                if key not in preferred_resources:
                    order.append(key)
                preferred_resources[key] = res
    resources = [preferred_resources[key] for key in order]
    return DiscoveryResult(
        resources=resources,
        failed=GroupDiscoveryFailed(failed) if failed else None,
        all_resources=all_resources,
    )


def supports_all(resource: APIResource, *verbs: str) -> bool:
    """discovery.SupportsAllVerbs."""
    return all(verb in resource.verbs for verb in verbs)
