"""What the informers of kube-controller-manager would hold: discovery plus every listed object.

The real controllers watch; these list on each pass. To keep passes cheap, the full discovery walk
is reused while its inputs (``/api``, ``/apis``, the APIServices and the CRDs) are unchanged.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from ._http import JSON, ApiError, KubeHTTP
from ._util import meta
from .discovery_client import APIResource, DiscoveryError, DiscoveryErrorStyle, DiscoveryResult, discover


@dataclass
class _CacheEntry:
    fingerprint: str
    result: DiscoveryResult


_cache: weakref.WeakKeyDictionary[KubeHTTP, dict[str, _CacheEntry]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def _fingerprint(client: KubeHTTP) -> str:
    parts: list[Any] = [client.get("/api"), client.get("/apis")]
    for path in (
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ):
        try:
            items = client.list_items(path)
        except ApiError:
            items = []
        parts.append(sorted((str(meta(i).get("name")), str(meta(i).get("resourceVersion"))) for i in items))
    return json.dumps(parts, sort_keys=True)


def cached_discovery(client: KubeHTTP, *, style: DiscoveryErrorStyle = "legacy") -> DiscoveryResult:
    """``discover`` but reused while nothing that feeds discovery changed. Raises DiscoveryError."""
    try:
        fingerprint = _fingerprint(client)
    except ApiError as err:
        raise DiscoveryError(err.client_go_text) from err
    with _cache_lock:
        entry = _cache.get(client, {}).get(style)
        if entry is not None and entry.fingerprint == fingerprint:
            return entry.result
    result = discover(client, style=style)
    with _cache_lock:
        _cache.setdefault(client, {})[style] = _CacheEntry(fingerprint, result)
    return result


@dataclass
class Inventory:
    discovery: DiscoveryResult
    objects: list[tuple[APIResource, JSON]] = field(default_factory=list)
    by_uid: dict[str, tuple[APIResource, JSON]] = field(default_factory=dict)
    dependents: dict[str, list[tuple[APIResource, JSON]]] = field(default_factory=dict)  # owner uid -> deps


def take_inventory(client: KubeHTTP, discovery: DiscoveryResult) -> Inventory:
    """List every object of every resource that supports list and delete (GetDeletableResources)."""
    inv = Inventory(discovery=discovery)
    for res in discovery.resources:
        if not all(v in res.verbs for v in ("list", "delete")):
            continue
        root = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
        try:
            items = client.list_items(f"{root}/{res.name}")
        except ApiError:
            continue
        for item in items:
            inv.objects.append((res, item))
            uid = str(meta(item).get("uid") or "")
            if uid:
                inv.by_uid[uid] = (res, item)
    for res, item in inv.objects:
        for ref in meta(item).get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid"):
                inv.dependents.setdefault(str(ref["uid"]), []).append((res, item))
    return inv


def object_url(res: APIResource, obj: JSON) -> str:
    root = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
    ns = meta(obj).get("namespace")
    name = meta(obj).get("name")
    if res.namespaced and ns:
        return f"{root}/namespaces/{ns}/{res.name}/{name}"
    return f"{root}/{res.name}/{name}"
