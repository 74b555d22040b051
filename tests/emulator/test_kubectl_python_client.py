"""The official Python client (typed APIs and DynamicClient) sees the scenario state.

Not a kubectl test, but the same agreement check with the other client nsstuck uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from tests.fakes.kubeapi.pytest_plugin import make_api_client

from ._scenario_support import AppliedScenarios, restored_scenarios

__all__ = ["restored_scenarios"]


@pytest.fixture
def kiali(restored_scenarios: AppliedScenarios) -> Any:
    return restored_scenarios.get("seed003-kiali-orphaned-finalizer")


def test_typed_client_reads_the_conditions(kiali: Any) -> None:
    api = make_api_client(kiali.emu)
    try:
        ns = client.CoreV1Api(api).read_namespace("istio-system")
    finally:
        api.close()
    assert ns.status.phase == "Terminating"
    assert ns.spec.finalizers == ["kubernetes"]
    by_type = {c.type: c for c in ns.status.conditions}
    assert by_type["NamespaceContentRemaining"].message == (
        "Some resources are remaining: kialis.kiali.io has 1 resource instances"
    )
    assert by_type["NamespaceFinalizersRemaining"].reason == "SomeFinalizersRemain"
    assert by_type["NamespaceDeletionDiscoveryFailure"].status == "False"
    assert ns.status.conditions[0].last_transition_time.year == 2026


def test_typed_custom_objects_api_lists_the_blocking_cr(kiali: Any) -> None:
    api = make_api_client(kiali.emu)
    try:
        items = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "kiali.io", "v1alpha1", "istio-system", "kialis"
        )["items"]
    finally:
        api.close()
    assert [(i["metadata"]["name"], i["metadata"]["finalizers"]) for i in items] == [("kiali", ["kiali.io/finalizer"])]
    assert items[0]["metadata"]["deletionTimestamp"]


def test_dynamic_client_discovers_and_lists(kiali: Any, tmp_path: Path) -> None:
    api = make_api_client(kiali.emu)
    try:
        dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
        kialis = dyn.resources.get(api_version="kiali.io/v1alpha1", kind="Kiali")
        listed = kialis.get(namespace="istio-system")
        assert [item.metadata.name for item in listed.items] == ["kiali"]
        namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
        ns = namespaces.get(name="istio-system")
        assert ns.status.phase == "Terminating"
    finally:
        api.close()


def test_dynamic_client_skips_the_unavailable_metrics_group(
    restored_scenarios: AppliedScenarios, tmp_path: Path
) -> None:
    applied = restored_scenarios.get("seed000-metrics-missing-endpoints")
    api = make_api_client(applied.emu)
    try:
        dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
        pods = dyn.resources.get(api_version="v1", kind="Pod")
        assert pods.get(namespace="ack-system-e2e-test-0").items == []
        with pytest.raises(dynamic.exceptions.ResourceNotFoundError):
            dyn.resources.get(api_version="metrics.k8s.io/v1beta1", kind="PodMetrics")
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as err:
            core.api_client.call_api(
                "/apis/metrics.k8s.io/v1beta1",
                "GET",
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        assert err.value.status == 503
        assert err.value.body in ("service unavailable\n", b"service unavailable\n")
        apiservice = client.ApiregistrationV1Api(api).read_api_service("v1beta1.metrics.k8s.io")
        available = [c for c in apiservice.status.conditions if c.type == "Available"]
        assert [(c.status, c.reason) for c in available] == [("False", "MissingEndpoints")]
    finally:
        api.close()
