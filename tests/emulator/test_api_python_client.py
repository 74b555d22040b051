"""The official ``kubernetes`` Python client against the emulator: typed APIs and DynamicClient."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

from tests.emulator._api_support import KIALI_CRD, Raw, admin, emu, user
from tests.emulator.test_api_aggregation_admission import METRICS_APISERVICE
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.pytest_plugin import make_api_client

__all__ = ["admin", "emu", "user"]


@pytest.fixture
def api(emu: Emulator) -> Any:
    c = make_api_client(emu)
    yield c
    c.close()


def test_typed_core_and_apps(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="typed")))
    ns = core.read_namespace("typed")
    assert ns.spec.finalizers == ["kubernetes"]
    assert ns.status.phase == "Active"
    core.create_namespaced_config_map(
        "typed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c"), data={"a": "b"})
    )
    assert [c.metadata.name for c in core.list_namespaced_config_map("typed").items] == ["c"]
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(node_name="n1", containers=[client.V1Container(name="c", image="busybox")]),
    )
    core.create_namespaced_pod("typed", pod)
    pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in pods.items] == ["p"]
    apps = client.AppsV1Api(api)
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
            ),
        ),
    )
    apps.create_namespaced_deployment("typed", dep)
    patched = apps.patch_namespaced_deployment("web", "typed", {"spec": {"replicas": 3}})
    assert patched.spec.replicas == 3
    assert patched.metadata.generation == 2

    # delete_namespace declares V1Status but the server answers with the Namespace: still no error
    status = core.delete_namespace("typed")
    assert isinstance(status, client.V1Status)
    ns = core.read_namespace("typed")
    assert ns.status.phase == "Terminating"
    ns.spec.finalizers = []
    finalized = core.replace_namespace_finalize("typed", ns)
    assert finalized.spec.finalizers == []
    with pytest.raises(ApiException) as err:
        core.read_namespace("typed")
    assert err.value.status == 404


def test_typed_errors_carry_status_bodies(api: Any) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as err:
        core.delete_namespace("kube-system")
    assert err.value.status == 403
    assert (
        json.loads(err.value.body)["message"]
        == 'namespaces "kube-system" is forbidden: this namespace may not be deleted'
    )


def test_discovery_models_are_strict_enough(api: Any) -> None:
    core = client.CoreV1Api(api)
    resources = core.get_api_resources()
    assert all(r.singular_name is not None for r in resources.resources)
    groups = client.ApisApi(api).get_api_versions()
    assert "apps" in [g.name for g in groups.groups]
    versions = client.CoreApi(api).get_api_versions()
    assert versions.versions == ["v1"]
    reg = client.ApiregistrationV1Api(api)
    services = reg.list_api_service()
    assert any(s.metadata.name == "v1.apps" for s in services.items)
    crds = client.ApiextensionsV1Api(api)
    crds.create_custom_resource_definition(KIALI_CRD)
    crd = crds.read_custom_resource_definition("kialis.kiali.io")
    assert crd.status.accepted_names.kind == "Kiali"
    custom = client.CustomObjectsApi(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="istio")))
    custom.create_namespaced_custom_object(
        "kiali.io",
        "v1alpha1",
        "istio",
        "kialis",
        {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": {"name": "k"}},
    )
    out = custom.list_namespaced_custom_object("kiali.io", "v1alpha1", "istio", "kialis")
    assert [i["metadata"]["name"] for i in out["items"]] == ["k"]
    assert out["items"][0]["kind"] == "Kiali"


def test_dynamic_client_with_an_unavailable_aggregated_api(emu: Emulator, admin: Raw, api: Any, tmp_path: Path) -> None:
    admin.post("/apis/apiregistration.k8s.io/v1/apiservices", METRICS_APISERVICE)
    admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", KIALI_CRD)
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    ns_api = dyn.resources.get(api_version="v1", kind="Namespace")
    assert "default" in [n.metadata.name for n in ns_api.get().items]
    kiali = dyn.resources.get(api_version="kiali.io/v1alpha1", kind="Kiali")
    assert kiali.namespaced
    deploy = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deploy.get(namespace="default").items == []
    # metrics.k8s.io answers 503: the dynamic client treats the group as having no resources
    with pytest.raises(dynamic.exceptions.ResourceNotFoundError):
        dyn.resources.get(api_version="metrics.k8s.io/v1beta1", kind="PodMetrics")


def test_kubeconfig_loading_works_for_the_python_client(emu: Emulator, tmp_path: Path) -> None:
    path = emu.write_kubeconfig(tmp_path / "kc")
    api = config.new_client_from_config(config_file=str(path))
    try:
        names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
        assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    finally:
        api.close()
    plain = emu.write_kubeconfig(tmp_path / "kc-http", tls=False, token=emu.admin_token)
    api = config.new_client_from_config(config_file=str(plain))
    try:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        api.close()


def test_pytest_plugin_fixtures(kube_emulator: Emulator, kube_api_client: Any, kubeconfig_path: Path) -> None:
    assert kube_emulator.clock.now().isoformat() == "2026-11-20T08:00:00+00:00"
    assert client.CoreV1Api(kube_api_client).read_namespace("default").status.phase == "Active"
    cfg = kubeconfig_path.read_text()
    assert kube_emulator.https_url in cfg
    assert kube_emulator.user_token in cfg
    assert kube_emulator._bg is None  # the background loop is off
