"""APIService availability: every reason of kube-aggregator's remote availability controller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers.apiservice_availability import (
    endpoints_not_found,
    failed_discovery_status,
    failed_discovery_timeout,
    missing_endpoints,
)
from tests.fakes.kubeapi.controllers.kubelet import CRASH_LOOP_ANNOTATION
from tests.fakes.kubeapi.scenarios import Api, run_for

from ._scenario_support import new_emulator

NAME = "v1beta1.metrics.k8s.io"


def _available(api: Api, name: str = NAME) -> tuple[str, str, str, str]:
    obj = api.http.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
    cond = next(c for c in obj["status"]["conditions"] if c["type"] == "Available")
    return cond["status"], cond["reason"], cond["message"], cond["lastTransitionTime"]


def _make(**options: Any) -> Iterator[Api]:
    emu: Emulator = new_emulator(**options)
    api = Api(emu)
    api.node("node-1", "192.168.0.41")
    api.apiservice("metrics.k8s.io", "v1beta1", svc_ns="kube-system", svc_name="metrics-server")
    try:
        yield api
    finally:
        emu.stop()


@pytest.fixture
def api() -> Iterator[Api]:
    yield from _make()


@pytest.fixture
def legacy_api() -> Iterator[Api]:
    yield from _make(endpoint_style="endpoints")


def _service(api: Api, *, port: int = 443) -> None:
    api.service(
        "kube-system",
        "metrics-server",
        selector={"k8s-app": "metrics-server"},
        ports=[{"name": "https", "port": port, "targetPort": "https"}],
        cluster_ip="10.96.171.26",
    )


def _server(api: Api, *, broken: bool = False) -> None:
    api.deployment(
        "kube-system",
        "metrics-server",
        node="node-1",
        ports=[{"name": "https", "containerPort": 10250}],
        labels={"k8s-app": "metrics-server"},
        annotations={CRASH_LOOP_ANNOTATION: "true"} if broken else None,
    )


def test_local_apiservices_are_available(api: Api) -> None:
    api.emu.settle()
    assert _available(api, "v1.apps")[:3] == ("True", "Local", "Local APIServices are always available")


def test_service_not_found(api: Api) -> None:
    api.emu.settle()
    assert _available(api)[:3] == (
        "False",
        "ServiceNotFound",
        'service/metrics-server in "kube-system" is not present',
    )


def test_service_port_error(api: Api) -> None:
    _service(api, port=8443)
    api.emu.settle()
    assert _available(api)[:3] == (
        "False",
        "ServicePortError",
        'service/metrics-server in "kube-system" is not listening on port 443',
    )


def test_endpoint_slices_not_found_and_missing_endpoints(api: Api) -> None:
    # a Service without a selector gets no EndpointSlices from the controller
    api.create(
        "/api/v1/namespaces/kube-system/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "metrics-server"},
            "spec": {"ports": [{"name": "https", "port": 443}]},
        },
    )
    api.emu.settle()
    assert _available(api)[:3] == (
        "False",
        "EndpointsNotFound",
        'cannot find endpointslices for service/metrics-server in "kube-system"',
    )
    assert _available(api)[2] == endpoints_not_found("metrics-server", "kube-system", "endpointslices")


def test_missing_endpoints_when_the_pod_is_not_ready_then_passed(api: Api) -> None:
    _service(api)
    _server(api, broken=True)
    api.emu.settle()
    status, reason, message, since = _available(api)
    assert (status, reason) == ("False", "MissingEndpoints")
    assert (
        message == 'endpointslices for service/metrics-server in "kube-system" have no addresses with port name "https"'
    )
    # 404 from /apis/metrics.k8s.io/v1beta1 while unavailable: the aggregator's plain-text 503
    status_code, ctype, body = api.http.raw("GET", "/apis/metrics.k8s.io/v1beta1")
    assert (status_code, ctype, body) == (503, "text/plain; charset=utf-8", b"service unavailable\n")
    # fix the Deployment: a new ReplicaSet, a ready pod, and the APIService passes
    api.emu.clock.advance(60)
    deploy = api.http.get("/apis/apps/v1/namespaces/kube-system/deployments/metrics-server")
    deploy["spec"]["template"]["metadata"]["annotations"] = {}
    api.http.put("/apis/apps/v1/namespaces/kube-system/deployments/metrics-server", deploy)
    run_for(api.emu, 30, step=10)
    assert _available(api)[:3] == ("True", "Passed", "all checks passed")
    assert _available(api)[3] == "2026-11-20T08:01:00Z" != since
    # the old ReplicaSet was scaled down: only the fixed pod is left
    pods = api.http.list_items("/api/v1/namespaces/kube-system/pods")
    assert [p["metadata"].get("annotations") for p in pods if not p["metadata"].get("deletionTimestamp")] == [None]
    assert api.http.get("/apis/metrics.k8s.io/v1beta1")["groupVersion"] == "metrics.k8s.io/v1beta1"


def test_legacy_endpoints_wording(legacy_api: Api) -> None:
    _service(legacy_api)
    _server(legacy_api, broken=True)
    legacy_api.emu.settle()
    assert _available(legacy_api)[:3] == (
        "False",
        "MissingEndpoints",
        missing_endpoints("metrics-server", "kube-system", "https", "endpoints"),
    )
    assert _available(legacy_api)[2].startswith('endpoints for service/metrics-server in "kube-system"')


def test_unreachable_service_fails_the_discovery_check(api: Api) -> None:
    _service(api)
    _server(api)
    api.emu.settle()
    assert _available(api)[:2] == ("True", "Passed")
    api.emu.knobs.unreachable_services.add("kube-system/metrics-server")
    api.emu.settle()
    status, reason, message, _ = _available(api)
    assert (status, reason) == ("False", "FailedDiscoveryCheck")
    url = "https://10.96.171.26:443/apis/metrics.k8s.io/v1beta1"
    assert message == (
        f'failing or missing response from {url}: Get "{url}": '
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )
    assert message == failed_discovery_timeout(url)


def test_backend_that_does_not_serve_the_version_fails_with_404(api: Api) -> None:
    api.apiservice("widgets.example.com", "v1", svc_ns="kube-system", svc_name="metrics-server")
    _service(api)
    _server(api)
    api.emu.settle()
    url = "https://10.96.171.26:443/apis/widgets.example.com/v1"
    assert _available(api, "v1.widgets.example.com")[:3] == (
        "False",
        "FailedDiscoveryCheck",
        f"failing or missing response from {url}: bad status from {url}: 404",
    )
    assert _available(api, "v1.widgets.example.com")[2] == failed_discovery_status(url, 404)


def test_transition_time_is_kept_while_the_status_stays(api: Api) -> None:
    api.emu.settle()
    first = _available(api)
    api.emu.clock.advance(60)
    _service(api, port=8443)
    api.emu.settle()
    second = _available(api)
    assert (first[1], second[1]) == ("ServiceNotFound", "ServicePortError")
    assert first[3] == second[3]
