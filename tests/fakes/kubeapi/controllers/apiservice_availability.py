"""kube-aggregator's APIService availability controller (remote_available_controller.go).

For every APIService with ``spec.service`` it writes the ``Available`` condition via ``/status``:

- Service missing: False, ServiceNotFound, ``service/%s in %q is not present``;
- Service unreadable: Unknown, ServiceAccessError, ``service/%s in %q cannot be checked due to: %v``;
- no Service port equals spec.service.port: False, ServicePortError,
  ``service/%s in %q is not listening on port %d``;
- no EndpointSlices: False, EndpointsNotFound, ``cannot find endpointslices for service/%s in %q``;
- no ready address with the port's name: False, MissingEndpoints,
  ``endpointslices for service/%s in %q have no addresses with port name %q``;
- the discovery probe fails: False, FailedDiscoveryCheck, ``failing or missing response from %v: %v``;
- all good: True, Passed, ``all checks passed``.

``endpoint_style="endpoints"`` gives the <= 1.33 wording and reads Endpoints instead of
EndpointSlices. The endpoint checks apply to ClusterIP Services only. The probe is a GET of
``https://<clusterIP>:<port>/apis/<group>/<version>``: a Service in ``emu.knobs.unreachable_services``
("ns/name") never answers (``context deadline exceeded (Client.Timeout exceeded while awaiting
headers)``); a backend the emulator does not serve for that group version answers 404.
Local APIServices (no ``spec.service``) get ``Local`` / ``Local APIServices are always available``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import condition, get_path, meta, now_of, option, rfc3339

EndpointStyle = Literal["endpointslices", "endpoints"]

LOCAL_MESSAGE = "Local APIServices are always available"


def go_quote(text: str) -> str:
    """Go's %q for the plain ASCII names used here."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def service_not_found(name: str, ns: str) -> str:
    return f"service/{name} in {go_quote(ns)} is not present"


def service_access_error(name: str, ns: str, err: str) -> str:
    return f"service/{name} in {go_quote(ns)} cannot be checked due to: {err}"


def service_port_error(name: str, ns: str, port: int) -> str:
    return f"service/{name} in {go_quote(ns)} is not listening on port {port}"


def endpoints_not_found(name: str, ns: str, style: EndpointStyle) -> str:
    what = "endpointslices" if style == "endpointslices" else "endpoints"
    return f"cannot find {what} for service/{name} in {go_quote(ns)}"


def missing_endpoints(name: str, ns: str, port_name: str, style: EndpointStyle) -> str:
    what = "endpointslices" if style == "endpointslices" else "endpoints"
    return f"{what} for service/{name} in {go_quote(ns)} have no addresses with port name {go_quote(port_name)}"


def discovery_url(cluster_ip: str, port: int, group: str, version: str, apiservice_name: str) -> str:
    path = f"/api/{version}" if apiservice_name == "v1." else f"/apis/{group}/{version}"
    return f"https://{cluster_ip}:{port}{path}"


def failed_discovery_timeout(url: str) -> str:
    return (
        f"failing or missing response from {url}: Get {go_quote(url)}: "
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )


def failed_discovery_status(url: str, status: int) -> str:
    return f"failing or missing response from {url}: bad status from {url}: {status}"


def has_ready_address_endpointslices(slices: list[JSON], port_name: str) -> bool:
    for eps in slices:
        if not any(isinstance(p, dict) and (p.get("name") or "") == port_name for p in eps.get("ports") or []):
            continue
        for endpoint in eps.get("endpoints") or []:
            ready = get_path(endpoint, "conditions", "ready")
            if (ready is None or ready is True) and (endpoint.get("addresses") or []):
                return True
    return False


def has_ready_address_endpoints(endpoints: JSON, port_name: str) -> bool:
    for subset in endpoints.get("subsets") or []:
        if not isinstance(subset, dict) or not subset.get("addresses"):
            continue
        if any(isinstance(p, dict) and (p.get("name") or "") == port_name for p in subset.get("ports") or []):
            return True
    return False


BackendCheck = Callable[[str, str], bool]


def default_backend_check(emu: Any) -> BackendCheck:
    """Whether the emulator serves an aggregated backend for (group, version)."""

    def check(group: str, version: str) -> bool:
        holders = (getattr(emu, "cluster", None), emu)
        for holder, attr in ((h, a) for h in holders for a in ("backends", "aggregated_backends")):
            backends = getattr(holder, attr, None)
            if backends is None:
                continue
            if isinstance(backends, dict):
                if (group, version) in backends or f"{group}/{version}" in backends:
                    return True
                return any(
                    getattr(b, "group", None) == group and getattr(b, "version", None) == version
                    for b in backends.values()
                )
            return any(getattr(b, "group", None) == group and getattr(b, "version", None) == version for b in backends)
        return True  # cannot tell: assume it is served

    return check


def evaluate(
    client: KubeHTTP,
    apiservice: JSON,
    *,
    style: EndpointStyle,
    unreachable: set[str],
    backend_served: BackendCheck,
) -> tuple[str, str, str]:
    """(status, reason, message) of the Available condition for one APIService."""
    spec = apiservice.get("spec") or {}
    svc_ref = spec.get("service")
    if not isinstance(svc_ref, dict):
        return "True", "Local", LOCAL_MESSAGE
    ns = str(svc_ref.get("namespace") or "")
    name = str(svc_ref.get("name") or "")
    port = int(svc_ref.get("port") or 443)
    try:
        svc = client.get(f"/api/v1/namespaces/{ns}/services/{name}")
    except ApiError as err:
        if err.not_found:
            return "False", "ServiceNotFound", service_not_found(name, ns)
        return "Unknown", "ServiceAccessError", service_access_error(name, ns, err.client_go_text)
    svc_type = get_path(svc, "spec", "type") or "ClusterIP"
    if svc_type == "ClusterIP":
        port_name: str | None = None
        for sport in get_path(svc, "spec", "ports") or []:
            if isinstance(sport, dict) and sport.get("port") == port:
                port_name = str(sport.get("name") or "")
                break
        if port_name is None:
            return "False", "ServicePortError", service_port_error(name, ns, port)
        if style == "endpointslices":
            try:
                slices = client.list_items(
                    f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                    labelSelector=f"kubernetes.io/service-name={name}",
                )
            except ApiError as err:
                return "Unknown", "EndpointsAccessError", service_access_error(name, ns, err.client_go_text)
            if not slices:
                return "False", "EndpointsNotFound", endpoints_not_found(name, ns, style)
            if not has_ready_address_endpointslices(slices, port_name):
                return "False", "MissingEndpoints", missing_endpoints(name, ns, port_name, style)
        else:
            try:
                endpoints = client.get(f"/api/v1/namespaces/{ns}/endpoints/{name}")
            except ApiError as err:
                if err.not_found:
                    return "False", "EndpointsNotFound", endpoints_not_found(name, ns, style)
                return "Unknown", "EndpointsAccessError", service_access_error(name, ns, err.client_go_text)
            if not has_ready_address_endpoints(endpoints, port_name):
                return "False", "MissingEndpoints", missing_endpoints(name, ns, port_name, style)
    cluster_ip = str(get_path(svc, "spec", "clusterIP") or "")
    url = discovery_url(
        cluster_ip,
        port,
        str(spec.get("group") or ""),
        str(spec.get("version") or ""),
        str(meta(apiservice).get("name")),
    )
    if f"{ns}/{name}" in unreachable:
        return "False", "FailedDiscoveryCheck", failed_discovery_timeout(url)
    if not backend_served(str(spec.get("group") or ""), str(spec.get("version") or "")):
        return "False", "FailedDiscoveryCheck", failed_discovery_status(url, 404)
    return "True", "Passed", "all checks passed"


class APIServiceAvailabilityController:
    name = "apiservice-availability-controller"
    enabled = True

    def __init__(self, *, endpoint_style: EndpointStyle | None = None, backend_check: BackendCheck | None = None):
        self.endpoint_style = endpoint_style
        self.backend_check = backend_check

    def _style(self, emu: Any) -> EndpointStyle:
        style = self.endpoint_style or option(emu, "endpoint_style", "endpointslices")
        return "endpoints" if style == "endpoints" else "endpointslices"

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        unreachable = set(getattr(getattr(emu, "knobs", None), "unreachable_services", set()) or set())
        check = self.backend_check or default_backend_check(emu)
        changed = False
        for apiservice in client.list_items("/apis/apiregistration.k8s.io/v1/apiservices"):
            verdict = evaluate(
                client, apiservice, style=self._style(emu), unreachable=unreachable, backend_served=check
            )
            changed |= self._write(client, emu, apiservice, verdict)
        return changed

    def _write(self, client: KubeHTTP, emu: Any, apiservice: JSON, verdict: tuple[str, str, str]) -> bool:
        status, reason, message = verdict
        conditions = [dict(c) for c in get_path(apiservice, "status", "conditions") or [] if isinstance(c, dict)]
        old = condition(conditions, "Available")
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
            status,
            reason,
            message,
        ):
            return False
        new = {
            "type": "Available",
            "status": status,
            "lastTransitionTime": rfc3339(now_of(emu)),
            "reason": reason,
            "message": message,
        }
        if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
            new["lastTransitionTime"] = old["lastTransitionTime"]
        conditions = [c for c in conditions if c.get("type") != "Available"] + [new]
        body = {**apiservice, "status": {**(apiservice.get("status") or {}), "conditions": conditions}}
        try:
            client.put(f"/apis/apiregistration.k8s.io/v1/apiservices/{meta(apiservice).get('name')}/status", body)
        except ApiError as err:
            if err.not_found or err.conflict:
                return False
            raise
        return True
