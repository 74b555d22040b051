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


def _too_new(cluster: Cluster, svc: dict[str, Any]) -> bool:
    """A built-in group version the emulated release does not serve yet (events.k8s.io/v1 before 1.19):
    the APIService the emulator registers for it at start is not there on such a server. One a test or
    a case creates itself (a newer API server's, during an upgrade) is."""
    labels = (svc.get("metadata") or {}).get("labels") or {}
    if labels.get("kube-aggregator.kubernetes.io/automanaged") != "onstart":
        return False
    spec = svc.get("spec") or {}
    group, version = spec.get("group", ""), spec.get("version", "")
    known = [rt for (g, v, _), rt in cluster.types.items() if g == group and v == version]
    return bool(known) and not any(cluster.serves(rt) for rt in known)


def grouped_apiservices(cluster: Cluster) -> list[list[dict[str, Any]]]:
    """``apiregistration/v1/helper.SortedByGroupAndVersion``."""
    services = [e.obj for e in cluster.store.items(APISERVICES) if not _too_new(cluster, e.obj)]
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


# -- aggregated discovery (apidiscovery.k8s.io), behind the "aggregated_discovery" option ----------
# What a kube-apiserver of the emulated version (option `server_version`) serves at /api and /apis for
# an Accept list naming APIGroupDiscoveryList: nothing before 1.26 (the legacy documents only), v2beta1
# from 1.26 (alpha behind the AggregatedDiscoveryEndpoint gate, on by default from 1.27, which the
# option stands for) to 1.29, v2 from 1.30 (v2beta1 still served beside it). The ranges of the Accept
# header are tried in the client's order; the first one the server can serve wins, and a plain
# application/json range before any aggregated one means the legacy document.
def aggregated_content_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def minor_patch(server_version: object) -> tuple[int | None, int | None]:
    """(minor, patch) of "1.28.2", "v1.27.3-gke.100", "1.27" (patch None: not known)."""
    if not isinstance(server_version, str) or not server_version:
        return None, None
    parts = server_version.lstrip("v").split("-", 1)[0].split("+", 1)[0].split(".")
    try:
        minor = int(parts[1]) if len(parts) > 1 else None
    except ValueError:
        return None, None
    try:
        patch = int(parts[2]) if len(parts) > 2 else None
    except ValueError:
        patch = None
    return minor, patch


def served_aggregated_versions(server_version: object) -> tuple[str, ...]:
    """The apidiscovery.k8s.io versions a server of that version serves (no version given: the
    emulator's default, a 1.32 server)."""
    minor, _ = minor_patch(server_version)
    if minor is None:
        minor = 32
    if minor < 26:
        return ()
    if minor < 30:
        return ("v2beta1",)
    return ("v2", "v2beta1")


def negotiate_aggregated(accept: str, served: tuple[str, ...]) -> str | None:
    """The apidiscovery.k8s.io version to answer with, "" for the legacy document, None when no range
    of the Accept header can be served (the API server's 406 Not Acceptable)."""
    only_aggregated = True
    for part in accept.split(","):
        params = [p.strip() for p in part.split(";")]
        named = dict(p.split("=", 1) for p in params[1:] if "=" in p)
        if named.get("g") != "apidiscovery.k8s.io" or named.get("as") != "APIGroupDiscoveryList":
            if params[0] and "as" not in named:
                only_aggregated = False  # a plain range: the legacy document, if nothing comes before it
                if params[0].lower() in ("application/json", "application/*", "*/*"):
                    return ""
            continue
        if params[0].lower() == "application/json" and named.get("v") in served:
            return named["v"]
    return None if only_aggregated and accept.strip() else ""


def aggregator_has_accept_defect(options: dict[str, Any]) -> bool:
    """Whether the aggregator marks Stale a backend that ignores Accept on /apis (kubernetes/kubernetes
    #119662): the aggregator of 1.27 and 1.28 fell back to a backend's legacy /apis/<g>/<v> only on
    a 406, so a backend answering /apis with its legacy APIGroupList (200) or a 404 was a failure
    and its group version Stale. Fixed by #119870, cherry-picked as #120360 into v1.27.6 and as
    #120359 into v1.28.2 (CHANGELOG/CHANGELOG-1.27.md and CHANGELOG-1.28.md, "Fixed a regression in
    default 1.27 configurations in kube-apiserver ... aggregated API servers that do not check
    `Accept` headers when serving the `/apis` endpoint"). Option `aggregated_discovery_defect`
    (True/False) decides outright; otherwise the server version does, and a version without a patch
    number ("1.27") is not taken as having the defect."""
    explicit = options.get("aggregated_discovery_defect")
    if isinstance(explicit, bool):
        return explicit
    minor, patch = minor_patch(options.get("server_version"))
    if patch is None:
        return False
    return (minor == 27 and patch < 6) or (minor == 28 and patch < 2)


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


def aggregated_list(cluster: Cluster, *, legacy_core: bool, discovery_version: str = "v2") -> dict[str, Any]:
    """``/api`` (legacy_core) or ``/apis`` as an APIGroupDiscoveryList of apidiscovery.k8s.io/`discovery_version`.
    A non-Local APIService that is not Available is listed with ``freshness: Stale`` and no resources,
    as the aggregator does; so is an Available one whose backend ignores Accept on /apis, on an
    aggregator with the defect of kubernetes/kubernetes#119662 (`aggregator_has_accept_defect`)."""
    items: list[dict[str, Any]] = []
    defect = aggregator_has_accept_defect(cluster.options)
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
                    backend = cluster.backend(group, version)
                    if available and backend is not None and not (defect and not backend.honours_discovery_accept):
                        resources = _backend_resources(group, version, backend.resources)
                        versions.append({"version": version, "resources": resources, "freshness": "Current"})
                    else:
                        versions.append({"version": version, "freshness": "Stale"})
                items.append({"metadata": {"name": group}, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{discovery_version}",
        "metadata": {},
        "items": items,
    }
