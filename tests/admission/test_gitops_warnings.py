"""Issue 38 §5 in the delete path: a namespace that Argo CD or Flux would re-create gets a warning naming the
Application, Kustomization or HelmRelease to delete or suspend instead, printed by the real kubectl when the
emulator calls `nsstuck admission serve` (a process) on the namespace DELETE.

The owners have the real CRDs' shapes: argoproj.io/v1alpha1 Application (spec.destination.namespace,
spec.syncPolicy.automated/syncOptions), kustomize.toolkit.fluxcd.io/v1 Kustomization (spec.interval),
helm.toolkit.fluxcd.io/v2 HelmRelease (spec.driftDetection.mode); the marks are the ones the tools leave (the
`argocd.argoproj.io/tracking-id` annotation, Flux's `<group>/name` and `<group>/namespace` labels). An owner
that would not re-create (no automated sync, CreateNamespace alone; drift detection disabled) gets none.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis.gitops import Recreating
from bot.domain.refs import ObjectRef
from bot.services.admission import MAX_WARNING, owner_warning
from tests._cli import run_nsstuck
from tests.admission._endpoint import KUBECTL, Endpoint, configure, endpoint, kubectl, post, review
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, apply_scenario

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

JSON = dict[str, Any]
ARGO, KUSTOMIZE, HELM = "argoproj.io", "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"
APPS = f"/apis/{ARGO}/v1alpha1/namespaces/argocd/applications"
TRACKING = "argocd.argoproj.io/tracking-id"


def application(api: Api, name: str, sync_policy: JSON) -> None:
    api.create(
        APPS,
        {
            "apiVersion": f"{ARGO}/v1alpha1",
            "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://git.example.com/apps.git", "path": name, "targetRevision": "HEAD"},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
                "syncPolicy": sync_policy,
            },
        },
    )


def kustomization(api: Api, name: str, target: str) -> None:
    api.create(
        f"/apis/{KUSTOMIZE}/v1/namespaces/flux-system/kustomizations",
        {
            "apiVersion": f"{KUSTOMIZE}/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {
                "interval": "10m",
                "path": f"./apps/{name}",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                "targetNamespace": target,
            },
        },
    )


def helm_release(api: Api, name: str, target: str, drift: str) -> None:
    api.create(
        f"/apis/{HELM}/v2/namespaces/flux-system/helmreleases",
        {
            "apiVersion": f"{HELM}/v2",
            "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {
                "interval": "5m",
                "releaseName": name,
                "targetNamespace": target,
                "chart": {"spec": {"chart": "redis", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                "driftDetection": {"mode": drift},
            },
        },
    )


def flux_marked(api: Api, ns: str, group: str, owner: str) -> None:
    """A ConfigMap carrying the labels Flux's controller sets on what it applies."""
    labels = {f"{group}/name": owner, f"{group}/namespace": "flux-system"}
    api.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{owner}-settings", "labels": labels}},
    )


def build(api: Api) -> None:
    api.crd(ARGO, "applications", "Application", version="v1alpha1")
    api.crd(KUSTOMIZE, "kustomizations", "Kustomization", version="v1")
    api.crd(HELM, "helmreleases", "HelmRelease", version="v2")
    api.crd("kiali.io", "kialis", "Kiali", version="v1alpha1")  # its operator is not installed
    for ns in ("argocd", "flux-system"):
        api.ensure_namespace(ns)
    # Argo CD 3: the tracking annotation on the namespace, an Application with automated sync and selfHeal
    application(api, "webshop", {"automated": {"prune": True, "selfHeal": True}})
    api.namespace("webshop", annotations={TRACKING: "webshop:/Namespace:/webshop"})
    # an Application that syncs only when asked, CreateNamespace=true or not: nothing comes back on its own
    application(api, "manual", {"syncOptions": ["CreateNamespace=true"]})
    api.namespace("manual", annotations={TRACKING: "manual:/Namespace:/manual"})
    # Flux: a Kustomization on its interval; a HelmRelease with drift detection on, and one with it off
    kustomization(api, "podinfo", "podinfo")
    api.namespace("podinfo")
    flux_marked(api, "podinfo", KUSTOMIZE, "podinfo")
    helm_release(api, "drifty", "drifty", "enabled")
    api.namespace("drifty")
    flux_marked(api, "drifty", HELM, "drifty")
    helm_release(api, "steady", "steady", "disabled")
    api.namespace("steady")
    flux_marked(api, "steady", HELM, "steady")
    # all three at once, and a Kiali whose finalizer nothing will remove: the owners and the reason it sticks
    application(api, "storefront", {"automated": {"selfHeal": True}, "syncOptions": ["CreateNamespace=true"]})
    api.namespace("storefront", annotations={TRACKING: "storefront:/Namespace:/storefront"})
    kustomization(api, "storefront-infra", "storefront")
    flux_marked(api, "storefront", KUSTOMIZE, "storefront-infra")
    helm_release(api, "storefront-cache", "storefront", "enabled")
    flux_marked(api, "storefront", HELM, "storefront-cache")
    api.create(
        "/apis/kiali.io/v1alpha1/namespaces/storefront/kialis",
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]},
        },
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path, Endpoint]]:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        build(Api(emu))
        emu.settle()
        directory = tmp_path_factory.mktemp("gitops-warnings")
        kubeconfig = emu.write_kubeconfig(directory / "kubeconfig")
        with endpoint(kubeconfig, directory, "--budget", "8") as served:
            configure(emu, "nsstuck", served.url(), served.ca_bundle)
            yield emu, kubeconfig, served


def delete(cluster: tuple[Emulator, Path, Endpoint], name: str, *args: str) -> list[str]:
    """`kubectl delete ns NAME`: the warnings it printed; the delete went ahead."""
    _, kubeconfig, _ = cluster
    result = kubectl(kubeconfig, "delete", "ns", name, "--wait=false", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f'namespace "{name}" deleted')
    return [line.removeprefix("Warning: ") for line in result.stderr.splitlines() if line.startswith("Warning: ")]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "webshop",
            "nsstuck: Argo CD Application argocd/webshop syncs ns webshop (self-heal): delete or suspend it instead",
        ),
        (
            "podinfo",
            "nsstuck: Flux Kustomization flux-system/podinfo syncs ns podinfo (every 10m): delete or suspend it "
            "instead",
        ),
        (
            "drifty",
            "nsstuck: Flux HelmRelease flux-system/drifty syncs ns drifty (drift detection): delete or suspend it "
            "instead",
        ),
    ],
    ids=["argo-cd-self-heal", "flux-kustomization", "flux-helmrelease-drift-detection"],
)
def test_kubectl_prints_the_owner_that_would_re_create_it(
    cluster: tuple[Emulator, Path, Endpoint], name: str, said: str
) -> None:
    assert delete(cluster, name) == [said]
    assert len(said) <= MAX_WARNING


@pytest.mark.parametrize("name", ["manual", "steady"], ids=["argo-cd-no-automated-sync", "helmrelease-no-drift"])
def test_an_owner_that_would_not_re_create_it_gets_no_warning(
    cluster: tuple[Emulator, Path, Endpoint], name: str
) -> None:
    _, kubeconfig, _ = cluster
    result = kubectl(kubeconfig, "delete", "ns", name, "--wait=false")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_the_owner_comes_first_then_the_reason_it_would_stick_within_three(
    cluster: tuple[Emulator, Path, Endpoint],
) -> None:
    _, kubeconfig, served = cluster
    # the review (the answer kubectl's dry run gets too): three warnings, the owners around the reason
    status, data, _ = post(served, review("storefront", dryRun=True))
    assert status == 200
    response = json.loads(data)["response"]
    assert response["allowed"] is True
    expected = [
        "nsstuck: Argo CD Application argocd/storefront syncs it (self-heal, CreateNamespace): delete or suspend "
        "it instead",
        "nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck storefront`",
        # "syncs ns storefront" would pass 119 characters: the namespace's name goes first
        "nsstuck: Flux HelmRelease flux-system/storefront-cache syncs it (drift detection): delete or suspend it "
        "instead",
    ]
    assert response["warnings"] == expected
    assert all(len(w) <= MAX_WARNING for w in expected)
    # precheck says the same owners, and the Kustomization the third slot had no room for
    done = run_nsstuck("precheck", "storefront", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == 4, done.stderr
    summaries = [f["summary"] for f in json.loads(done.stdout)["prediction"]["findings"]]
    for owner in ("Application argocd/storefront", "HelmRelease flux-system/storefront-cache"):
        assert any(owner in s and "would re-create what the delete removes" in s for s in summaries), summaries
    assert any("Kustomization flux-system/storefront-infra" in s for s in summaries)
    # and kubectl prints the same, in the same order
    assert delete(cluster, "storefront") == expected


@pytest.mark.parametrize("namespace", ["a", "n" * 63])
@pytest.mark.parametrize("name", ["shop", "o" * 60, "o" * 253])
def test_the_owner_warning_stays_under_120_characters(namespace: str, name: str) -> None:
    owner = Recreating("Argo CD", ObjectRef(f"{ARGO}/v1alpha1", "Application", name, "argocd"), "self-heal")
    text = owner_warning(namespace, owner)
    assert len(text) <= MAX_WARNING < 120
    assert text.startswith("nsstuck: ")
    assert text.endswith(": delete or suspend it instead")
    assert "Application argocd/" in text
    assert text.isprintable()
