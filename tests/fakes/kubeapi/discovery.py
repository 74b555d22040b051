"""Legacy discovery documents (``/api``, ``/apis``, ``/apis/<g>``, ``/api/v1``, ``/apis/<g>/<v>``), built
the way kube-apiserver + kube-aggregator build them: ``/apis`` comes from the APIService objects."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .registry import version_priority_key

if TYPE_CHECKING:
    from .apiserver import Cluster

APISERVICES = ("apiregistration.k8s.io", "apiservices")


def api_versions(cluster: Cluster) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": cluster.server_address}],
    }


def _cmp_group(a: dict[str, Any], b: dict[str, Any]) -> int:
    pa = int(a["spec"].get("groupPriorityMinimum", 0))
    pb = int(b["spec"].get("groupPriorityMinimum", 0))
    if pa != pb:
        return -1 if pa > pb else 1
    na, nb = str(a["metadata"]["name"]), str(b["metadata"]["name"])
    return (na > nb) - (na < nb)


def _version_sort_key(svc: dict[str, Any]) -> tuple[int, tuple[int, int, int, str]]:
    return (-int(svc["spec"].get("versionPriority", 0)), version_priority_key(svc["spec"].get("version", "")))


def grouped_apiservices(cluster: Cluster) -> list[list[dict[str, Any]]]:
    """``apiregistration/v1/helper.SortedByGroupAndVersion``."""
    services = [e.obj for e in cluster.store.items(APISERVICES)]
    services.sort(key=functools.cmp_to_key(_cmp_group))
    groups: list[list[dict[str, Any]]] = []
    index: dict[str, int] = {}
    for svc in services:
        g = svc["spec"].get("group", "")
        if g in index:
            groups[index[g]].append(svc)
        else:
            index[g] = len(groups)
            groups.append([svc])
    for grp in groups:
        grp.sort(key=_version_sort_key)
    return groups


def _group_doc(services: list[dict[str, Any]], *, with_type_meta: bool) -> dict[str, Any]:
    group = services[0]["spec"].get("group", "")
    versions = [
        {"groupVersion": f"{group}/{s['spec'].get('version', '')}", "version": s["spec"].get("version", "")}
        for s in services
    ]
    doc: dict[str, Any] = {}
    if with_type_meta:
        doc.update({"kind": "APIGroup", "apiVersion": "v1"})
    doc.update({"name": group, "versions": versions, "preferredVersion": versions[0]})
    return doc


def api_group_list(cluster: Cluster) -> dict[str, Any]:
    with cluster.store.lock:
        groups = [
            _group_doc(g, with_type_meta=False) for g in grouped_apiservices(cluster) if g[0]["spec"].get("group")
        ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(cluster: Cluster, group: str) -> dict[str, Any] | None:
    with cluster.store.lock:
        for grp in grouped_apiservices(cluster):
            if grp[0]["spec"].get("group", "") == group and group:
                return _group_doc(grp, with_type_meta=True)
    return None


def api_resource_list(cluster: Cluster, group: str, version: str) -> dict[str, Any] | None:
    types = cluster.types_for(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.extend(rt.discovery())
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def backend_resource_list(group: str, version: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": [dict(r) for r in resources],
    }


# -- aggregated discovery (apidiscovery.k8s.io/v2), behind the "aggregated_discovery" option ---------
AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str) -> bool:
    for part in accept.split(","):
        params = [p.strip() for p in part.split(";")]
        if "g=apidiscovery.k8s.io" in params and "v=v2" in params and "as=APIGroupDiscoveryList" in params:
            return True
    return False


def _aggregated_resources(cluster: Cluster, group: str, version: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rt in cluster.types_for(group, version):
        entry: dict[str, Any] = {
            "resource": rt.plural,
            "responseKind": {"group": group, "version": version, "kind": rt.kind},
            "scope": "Namespaced" if rt.namespaced else "Cluster",
            "singularResource": rt.singular,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        subs = [
            {
                "subresource": name,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": list(verbs),
            }
            for name, verbs, kind in rt.subresources
        ]
        if subs:
            entry["subresources"] = subs
        out.append(entry)
    return out


def _backend_resources(group: str, version: str, resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "resource": r.get("name", ""),
            "responseKind": {"group": group, "version": version, "kind": r.get("kind", "")},
            "scope": "Namespaced" if r.get("namespaced") else "Cluster",
            "singularResource": r.get("singularName", ""),
            "verbs": list(r.get("verbs") or []),
        }
        for r in resources
    ]


def aggregated_list(cluster: Cluster, *, legacy_core: bool) -> dict[str, Any]:
    """``/api`` (legacy_core) or ``/apis`` as an APIGroupDiscoveryList. A non-Local APIService that is
    not Available is listed with ``freshness: Stale`` and no resources, as the aggregator does."""
    items: list[dict[str, Any]] = []
    with cluster.store.lock:
        if legacy_core:
            items.append(
                {
                    "metadata": {"name": ""},
                    "versions": [
                        {"version": "v1", "resources": _aggregated_resources(cluster, "", "v1"), "freshness": "Current"}
                    ],
                }
            )
        else:
            for services in grouped_apiservices(cluster):
                group = services[0]["spec"].get("group", "")
                if not group:
                    continue
                versions = []
                for svc in services:
                    version = svc["spec"].get("version", "")
                    if not (svc.get("spec") or {}).get("service"):
                        resources = _aggregated_resources(cluster, group, version)
                        versions.append({"version": version, "resources": resources, "freshness": "Current"})
                        continue
                    conds = (svc.get("status") or {}).get("conditions") or []
                    available = any(c.get("type") == "Available" and c.get("status") == "True" for c in conds)
                    backend = cluster.backends.get((group, version))
                    if available and backend is not None:
                        resources = _backend_resources(group, version, backend.resources)
                        versions.append({"version": version, "resources": resources, "freshness": "Current"})
                    else:
                        versions.append({"version": version, "freshness": "Stale"})
                items.append({"metadata": {"name": group}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
