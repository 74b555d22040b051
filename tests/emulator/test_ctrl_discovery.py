"""ServerPreferredNamespacedResources as the controllers do it, against canned discovery documents."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.kubeapi.controllers._http import ApiError, KubeHTTP
from tests.fakes.kubeapi.controllers.discovery_client import DiscoveryError, discover, supports_all

ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _res(name: str, kind: str, *, namespaced: bool = True, verbs: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs or ALL}


DOCS: dict[str, Any] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": "autoscaling",
                "versions": [
                    {"groupVersion": "autoscaling/v2", "version": "v2"},
                    {"groupVersion": "autoscaling/v1", "version": "v1"},
                ],
                "preferredVersion": {"groupVersion": "autoscaling/v2", "version": "v2"},
            },
            {
                "name": "metrics.k8s.io",
                "versions": [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}],
                "preferredVersion": {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"},
            },
        ],
    },
    "/api/v1": {
        "resources": [
            _res("pods", "Pod"),
            _res("pods/status", "Pod", verbs=["get", "patch", "update"]),
            _res("namespaces", "Namespace", namespaced=False, verbs=[v for v in ALL if v != "deletecollection"]),
            _res("events", "Event"),
        ]
    },
    "/apis/autoscaling/v2": {"resources": [_res("horizontalpodautoscalers", "HorizontalPodAutoscaler")]},
    "/apis/autoscaling/v1": {
        "resources": [_res("horizontalpodautoscalers", "HorizontalPodAutoscaler"), _res("legacyonly", "LegacyOnly")]
    },
}


class CannedClient(KubeHTTP):
    def __init__(self, docs: dict[str, Any], failures: dict[str, ApiError]) -> None:
        super().__init__("http://127.0.0.1:1", "t")
        self.docs = docs
        self.failures = failures

    def get(self, path: str, **query: str) -> dict[str, Any]:
        if path in self.failures:
            raise self.failures[path]
        return dict(self.docs[path])

    def get_negotiated(self, path: str, accept: str) -> tuple[dict[str, Any], str]:
        return self.get(path), "application/json"  # a server that answers the legacy documents


def _unavailable(path: str) -> ApiError:
    return ApiError(503, "GET", path, b"service unavailable\n", "text/plain; charset=utf-8")


def test_preferred_versions_subresources_and_failures() -> None:
    failing = "/apis/metrics.k8s.io/v1beta1"
    result = discover(CannedClient(DOCS, {failing: _unavailable(failing)}))
    names = [(r.group, r.version, r.name) for r in result.resources]
    assert ("autoscaling", "v2", "horizontalpodautoscalers") in names
    assert ("autoscaling", "v1", "horizontalpodautoscalers") not in names
    assert ("autoscaling", "v1", "legacyonly") in names  # only in a non-preferred version: kept
    assert all("/" not in r.name for r in result.resources)
    assert "namespaces" not in [r.name for r in result.namespaced()]
    assert result.failed is not None
    assert str(result.failed) == (
        "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: "
        "the server is currently unable to handle the request"
    )
    pods = next(r for r in result.resources if r.name == "pods")
    assert pods.gvr_text() == "/v1, Resource=pods"
    assert supports_all(pods, "delete", "deletecollection")
    assert result.by_kind("autoscaling/v1", "HorizontalPodAutoscaler") is not None


def test_stale_style_reports_the_group_version() -> None:
    failing = "/apis/metrics.k8s.io/v1beta1"
    result = discover(CannedClient(DOCS, {failing: _unavailable(failing)}), style="stale")
    assert result.failed is not None
    assert result.failed.groups == {"metrics.k8s.io/v1beta1": "stale GroupVersion discovery: metrics.k8s.io/v1beta1"}


def test_failing_group_list_is_a_plain_error() -> None:
    status = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","code":500}'
    err = ApiError(500, "GET", "/apis", status, "application/json")
    with pytest.raises(DiscoveryError, match=r"^etcd is down$"):
        discover(CannedClient(DOCS, {"/apis": err}))
