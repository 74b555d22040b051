"""The Endpoints and EndpointSlice controllers: which pods back which Service.

For every Service with a selector, the pods of its namespace that match the selector and are
scheduled and not deleting become endpoints: ready ones (Ready condition True) as addresses,
others as not-ready addresses (Endpoints) or ``ready: false`` (EndpointSlice). Objects are written
only when their content changes. The EndpointSlice is named ``<service>-<5 chars>`` from a hash of
the Service UID and is owned by the Service (so the garbage collector removes it with the Service);
the Endpoints object is deleted by this controller when its Service goes away, as upstream does.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import condition, get_path, is_deleting, meta

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
_ALPHANUM = "bcdfghjklmnpqrstvwxz2456789"


def slice_name(service: JSON) -> str:
    digest = hashlib.sha256(str(meta(service).get("uid") or meta(service).get("name")).encode()).digest()
    suffix = "".join(_ALPHANUM[b % len(_ALPHANUM)] for b in digest[:5])
    return f"{meta(service).get('name')}-{suffix}"


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_is_ready(pod: JSON) -> bool:
    cond = condition(get_path(pod, "status", "conditions"), "Ready")
    return bool(cond and cond.get("status") == "True")


def _target_port(port: JSON, pod: JSON) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in get_path(pod, "spec", "containers") or []:
        for cport in (container or {}).get("ports") or []:
            if isinstance(cport, dict) and cport.get("name") == target:
                value = cport.get("containerPort")
                return int(value) if isinstance(value, int) else None
    return None


def desired_objects(service: JSON, pods: list[JSON]) -> tuple[JSON, JSON]:
    """(Endpoints, EndpointSlice) for a Service and the pods of its namespace."""
    ns = str(meta(service).get("namespace"))
    name = str(meta(service).get("name"))
    selector = get_path(service, "spec", "selector") or {}
    ports = [p for p in get_path(service, "spec", "ports") or [] if isinstance(p, dict)]
    members = [
        p
        for p in pods
        if selector
        and selector_matches(selector, meta(p).get("labels") or {})
        and get_path(p, "spec", "nodeName")
        and get_path(p, "status", "podIP")
        and not is_deleting(p)
    ]
    members.sort(key=lambda p: str(meta(p).get("name")))
    addresses: list[JSON] = []
    not_ready: list[JSON] = []
    slice_endpoints: list[JSON] = []
    port_numbers: dict[str, int] = {}
    for pod in members:
        ref = {
            "kind": "Pod",
            "namespace": ns,
            "name": meta(pod).get("name"),
            "uid": meta(pod).get("uid"),
        }
        address = {
            "ip": get_path(pod, "status", "podIP"),
            "nodeName": get_path(pod, "spec", "nodeName"),
            "targetRef": ref,
        }
        ready = pod_is_ready(pod)
        (addresses if ready else not_ready).append(address)
        slice_endpoints.append(
            {
                "addresses": [get_path(pod, "status", "podIP")],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "nodeName": get_path(pod, "spec", "nodeName"),
                "targetRef": ref,
            }
        )
        for port in ports:
            number = _target_port(port, pod)
            if number is not None:
                port_numbers.setdefault(str(port.get("name") or ""), number)
    ep_ports = [
        {"name": pname, "port": number, "protocol": "TCP"} if pname else {"port": number, "protocol": "TCP"}
        for pname, number in sorted(port_numbers.items())
    ]
    subsets: list[JSON] = []
    if addresses or not_ready:
        subset: JSON = {"ports": ep_ports}
        if addresses:
            subset["addresses"] = addresses
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        subsets.append(subset)
    endpoints: JSON = {
        "kind": "Endpoints",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "labels": dict(meta(service).get("labels") or {})},
    }
    if subsets:
        endpoints["subsets"] = subsets
    eps: JSON = {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {
            "name": slice_name(service),
            "namespace": ns,
            "labels": {SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": name,
                    "uid": meta(service).get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": "IPv4",
        "endpoints": slice_endpoints,
        "ports": [{"name": p.get("name", ""), "port": p["port"], "protocol": "TCP"} for p in ep_ports],
    }
    return endpoints, eps


class EndpointsController:
    name = "endpoints-controller"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        services = client.list_items("/api/v1/services")
        pods_by_ns: dict[str, list[JSON]] = {}
        for pod in client.list_items("/api/v1/pods"):
            pods_by_ns.setdefault(str(meta(pod).get("namespace")), []).append(pod)
        existing_eps = {
            (str(meta(e).get("namespace")), str(meta(e).get("name"))): e for e in client.list_items("/api/v1/endpoints")
        }
        existing_slices = {
            (str(meta(e).get("namespace")), str(meta(e).get("name"))): e
            for e in client.list_items("/apis/discovery.k8s.io/v1/endpointslices")
        }
        changed = False
        wanted_eps: set[tuple[str, str]] = set()
        for svc in services:
            if not get_path(svc, "spec", "selector"):
                continue
            ns = str(meta(svc).get("namespace"))
            endpoints, eps = desired_objects(svc, pods_by_ns.get(ns, []))
            wanted_eps.add((ns, str(meta(svc).get("name"))))
            changed |= _ensure(
                client,
                f"/api/v1/namespaces/{ns}/endpoints",
                endpoints,
                existing_eps.get((ns, str(meta(svc).get("name")))),
                ("subsets",),
            )
            changed |= _ensure(
                client,
                f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                eps,
                existing_slices.get((ns, slice_name(svc))),
                ("endpoints", "ports"),
            )
        for key, ep in existing_eps.items():
            if key in wanted_eps or is_deleting(ep):
                continue
            labels = meta(ep).get("labels") or {}
            if key[1] == "kubernetes" and key[0] == "default":
                continue
            if labels.get("endpoints.kubernetes.io/skip-mirror") or (meta(ep).get("annotations") or {}).get(
                "control-plane.alpha.kubernetes.io/leader"
            ):
                continue
            # the Service is gone: the endpoints controller deletes its Endpoints
            if not any(meta(s).get("namespace") == key[0] and meta(s).get("name") == key[1] for s in services):
                try:
                    client.delete(f"/api/v1/namespaces/{key[0]}/endpoints/{key[1]}")
                    changed = True
                except ApiError:
                    pass
        return changed


def _ensure(client: KubeHTTP, collection: str, desired: JSON, current: JSON | None, fields: tuple[str, ...]) -> bool:
    name = meta(desired)["name"]
    if current is None:
        try:
            client.post(collection, desired)
        except ApiError:
            # e.g. 403 in a terminating namespace, or a race with another writer
            return False
        return True
    if is_deleting(current):
        return False
    if all(current.get(f) == desired.get(f) for f in fields):
        return False
    body = {**current}
    for f in fields:
        if f in desired:
            body[f] = desired[f]
        else:
            body.pop(f, None)
    try:
        client.put(f"{collection}/{name}", body)
    except ApiError:
        return False
    return True
