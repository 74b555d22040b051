"""Issue 38 §5, GitOps owners: through the real command line (`precheck` and `diagnose`, in-process) against
the Kubernetes emulator, with the CRDs of Argo CD (argoproj.io/v1alpha1 Application) and Flux
(kustomize.toolkit.fluxcd.io/v1 Kustomization, helm.toolkit.fluxcd.io/v2 HelmRelease) installed and objects
of their real shapes (spec.destination, spec.syncPolicy.automated/syncOptions; spec.interval/suspend/prune/
targetNamespace; spec.suspend/driftDetection.mode/releaseName), and the marks each tool leaves: the
`argocd.argoproj.io/tracking-id` annotation (`<app>:<group>/<kind>:<namespace>/<name>`), the
`app.kubernetes.io/instance` label, and Flux's `<group>/name` and `<group>/namespace` labels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, apply_scenario

JSON = dict[str, Any]
ARGO = "argoproj.io"
KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
HELM = "helm.toolkit.fluxcd.io"


def _application(name: str, destination: str, sync_policy: JSON) -> JSON:
    return {
        "apiVersion": f"{ARGO}/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://example.com/apps.git", "path": name, "targetRevision": "HEAD"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": destination},
            "syncPolicy": sync_policy,
        },
    }


def _configmap(api: Api, ns: str, name: str, *, labels: dict[str, str] | None = None, **annotations: str) -> None:
    metadata: JSON = {"name": name, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    api.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})


def _flux(kind: str, group: str, version: str, plural: str, name: str, *, spec: JSON) -> tuple[str, JSON]:
    body = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": name, "namespace": "flux-system"}}
    return f"/apis/{group}/{version}/namespaces/flux-system/{plural}", {**body, "spec": spec}


def _build(api: Api) -> None:
    api.crd(ARGO, "applications", "Application", version="v1alpha1")
    api.crd(KUSTOMIZE, "kustomizations", "Kustomization", version="v1")
    api.crd(HELM, "helmreleases", "HelmRelease", version="v2")
    for ns in ("argocd", "flux-system"):
        api.ensure_namespace(ns)
    apps = f"/apis/{ARGO}/v1alpha1/namespaces/argocd/applications"
    # Argo CD 3: the tracking annotation on the namespace and its content; automated sync with selfHeal
    api.create(
        apps,
        _application(
            "guestbook",
            "guestbook",
            {"automated": {"prune": True, "selfHeal": True}, "syncOptions": ["CreateNamespace=true"]},
        ),
    )
    api.namespace("guestbook", annotations={"argocd.argoproj.io/tracking-id": "guestbook:/Namespace:/guestbook"})
    _configmap(api, "guestbook", "ui", **{"argocd.argoproj.io/tracking-id": "guestbook:/ConfigMap:guestbook/ui"})
    # Argo CD 2.x: the instance label, confirmed by an Application deploying there (automated, no selfHeal)
    api.create(apps, _application("billing", "billing", {"automated": {"prune": False}}))
    api.namespace("billing")
    _configmap(api, "billing", "rates", labels={"app.kubernetes.io/instance": "billing"})
    # the instance label that no Application confirms (a Helm release sets it too)
    api.namespace("redis")
    _configmap(api, "redis", "redis-config", labels={"app.kubernetes.io/instance": "redis"})
    # an Application without automated sync
    api.create(apps, _application("manual", "manual", {}))
    api.namespace("manual")
    _configmap(api, "manual", "m", **{"argocd.argoproj.io/tracking-id": "manual:/ConfigMap:manual/m"})
    # Flux: a Kustomization on its interval, a suspended one, a HelmRelease with and without drift detection
    flux = [
        ("Kustomization", KUSTOMIZE, "v1", "kustomizations", "podinfo", "podinfo", {"suspend": False}),
        ("Kustomization", KUSTOMIZE, "v1", "kustomizations", "paused", "paused", {"suspend": True}),
        ("HelmRelease", HELM, "v2", "helmreleases", "drifty", "drifty", {"driftDetection": {"mode": "enabled"}}),
        ("HelmRelease", HELM, "v2", "helmreleases", "steady", "steady", {"driftDetection": {"mode": "disabled"}}),
    ]
    for kind, group, version, plural, name, ns, extra in flux:
        if kind == "Kustomization":
            spec = {
                "interval": "10m",
                "path": f"./apps/{name}",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                "targetNamespace": ns,
                **extra,
            }
        else:
            spec = {
                "interval": "5m",
                "releaseName": name,
                "targetNamespace": ns,
                "chart": {"spec": {"chart": name, "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                **extra,
            }
        path, body = _flux(kind, group, version, plural, name, spec=spec)
        api.create(path, body)
        api.namespace(ns)
        labels = {f"{group}/name": name, f"{group}/namespace": "flux-system"}
        _configmap(api, ns, f"{name}-config", labels=labels)
    # a namespace without any mark
    api.namespace("plain")
    _configmap(api, "plain", "c")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, str]]:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        api = Api(emu)
        _build(api)
        emu.settle()
        yield emu, str(emu.write_kubeconfig(tmp_path_factory.mktemp("gitops") / "kubeconfig"))


def _precheck(kubeconfig: str, namespace: str) -> tuple[JSON, str]:
    done = run_nsstuck("precheck", namespace, "--kubeconfig", kubeconfig, "-o", "json")
    assert done.returncode in (0, 4, 5), done.stderr
    text = run_nsstuck("precheck", namespace, "--kubeconfig", kubeconfig)
    return json.loads(done.stdout), text.stdout


def _owner(findings: list[JSON]) -> JSON:
    [finding] = [f for f in findings if f["cause"] == "gitops_owner"]
    return finding


def _said(finding: JSON) -> str:
    return "\n".join([finding["summary"], *finding["evidence"]])


def test_argo_cd_3_tracking_id_confirmed_by_an_application_with_automated_self_heal(
    cluster: tuple[Emulator, str],
) -> None:
    emu, kubeconfig = cluster
    emu.journal.clear()
    report, text = _precheck(kubeconfig, "guestbook")
    prediction = report["prediction"]
    finding = _owner(prediction["findings"])
    assert finding["blocking"] is False
    said = _said(finding)
    assert "Argo CD Application argocd/guestbook manages" in finding["summary"]
    assert "would re-create what the delete removes" in finding["summary"]
    assert "confirmed: Application argocd/guestbook deploys to namespace guestbook" in said
    assert "selfHeal" in said
    assert "CreateNamespace=true: it re-creates the namespace itself" in said
    [remedy] = finding["remedies"]
    assert remedy["description"].startswith("Delete or suspend the Application argocd/guestbook first")
    assert "argocd app delete argocd/guestbook" in remedy["commands"]
    assert "Application argocd/guestbook" in text
    # the read was one list of Applications, and nothing was written
    assert any(line.startswith(f"GET /apis/{ARGO}/v1alpha1/applications") for line in emu.journal.lines())
    flux_lists = (f"GET /apis/{KUSTOMIZE}/v1/kustomizations", f"GET /apis/{HELM}/v2/helmreleases")
    assert not any(line.startswith(flux_lists) for line in emu.journal.lines())
    assert [line for line in emu.journal.lines() if not line.startswith("GET ")] == []


def test_argo_cd_2_instance_label_confirmed(cluster: tuple[Emulator, str]) -> None:
    report, _ = _precheck(cluster[1], "billing")
    finding = _owner(report["prediction"]["findings"])
    said = _said(finding)
    assert "label app.kubernetes.io/instance=billing" in said
    assert "confirmed: Application argocd/billing deploys to namespace billing" in said
    assert "no selfHeal: it applies everything again on its next revision" in said
    assert finding["remedies"][0]["description"].startswith("Delete or suspend the Application argocd/billing")


def test_an_instance_label_no_application_confirms_is_said_unconfirmed_and_weak(cluster: tuple[Emulator, str]) -> None:
    report, _ = _precheck(cluster[1], "redis")
    finding = _owner(report["prediction"]["findings"])
    assert finding["summary"].startswith("unconfirmed:")
    said = _said(finding)
    assert "no Application of that name deploys to this namespace" in said
    assert "weak evidence: Helm charts set it too" in said
    assert [r["action"] for r in finding["remedies"]] == ["investigate"]
    assert report["prediction"]["complete"] is True  # the list was read: nothing missing


def test_an_application_without_automated_sync_does_not_re_create(cluster: tuple[Emulator, str]) -> None:
    report, _ = _precheck(cluster[1], "manual")
    finding = _owner(report["prediction"]["findings"])
    assert "would not re-create it on its own" in finding["summary"]
    assert "no automated sync" in _said(finding)


def test_flux_kustomization_on_its_interval(cluster: tuple[Emulator, str]) -> None:
    report, text = _precheck(cluster[1], "podinfo")
    finding = _owner(report["prediction"]["findings"])
    said = _said(finding)
    assert "Flux Kustomization flux-system/podinfo manages" in finding["summary"]
    assert "labels kustomize.toolkit.fluxcd.io/name=podinfo, kustomize.toolkit.fluxcd.io/namespace=flux-system" in said
    assert "confirmed: Kustomization flux-system/podinfo exists" in said
    assert "re-applies its content every 10m" in said
    assert "flux suspend kustomization podinfo -n flux-system" in finding["remedies"][0]["commands"]
    assert "Kustomization flux-system/podinfo" in text


def test_a_suspended_kustomization_does_not_re_create_and_says_so(cluster: tuple[Emulator, str]) -> None:
    report, _ = _precheck(cluster[1], "paused")
    finding = _owner(report["prediction"]["findings"])
    assert "would not re-create it on its own (it is suspended" in finding["summary"]
    assert not finding["remedies"][0]["description"].startswith("Delete or suspend")


def test_a_helm_release_re_creates_only_with_drift_detection_enabled(cluster: tuple[Emulator, str]) -> None:
    drifty = _owner(_precheck(cluster[1], "drifty")[0]["prediction"]["findings"])
    assert "HelmRelease flux-system/drifty manages" in drifty["summary"]
    assert "would re-create" in drifty["summary"]
    assert "drift detection enabled" in _said(drifty)
    steady = _owner(_precheck(cluster[1], "steady")[0]["prediction"]["findings"])
    assert "would not re-create it on its own" in steady["summary"]
    assert "drift detection is disabled" in _said(steady)


def test_an_unmarked_namespace_reads_no_owner(cluster: tuple[Emulator, str]) -> None:
    emu, kubeconfig = cluster
    emu.journal.clear()
    report, _ = _precheck(kubeconfig, "plain")
    assert report["prediction"]["findings"] == []
    lines = emu.journal.lines()
    assert lines
    cluster_wide = (f"GET /apis/{ARGO}/v1alpha1/applications", f"GET /apis/{KUSTOMIZE}/v1/", f"GET /apis/{HELM}/v2/")
    assert not any(line.startswith(cluster_wide) and "/namespaces/" not in line for line in lines)


def test_diagnose_of_a_terminating_namespace_names_the_owner_first(tmp_path: Path) -> None:
    # deleted ten minutes before the command line's real clock: past settling, an orphaned finalizer holds it
    with Emulator(clock=FakeClock(datetime.now(UTC) - timedelta(minutes=10)), seed=0) as emu:
        api = Api(emu)
        api.crd(ARGO, "applications", "Application", version="v1alpha1")
        api.ensure_namespace("argocd")
        apps = f"/apis/{ARGO}/v1alpha1/namespaces/argocd/applications"
        api.create(apps, _application("old", "old", {"automated": {"selfHeal": True}}))
        api.namespace("old")
        _configmap(api, "old", "o", **{"argocd.argoproj.io/tracking-id": "old:/ConfigMap:old/o"})
        api.http.post(
            "/api/v1/namespaces/old/configmaps", {"metadata": {"name": "held", "finalizers": ["example.com/held"]}}
        )
        api.delete("/api/v1/namespaces/old")
        emu.settle()
        kubeconfig = str(emu.write_kubeconfig(tmp_path / "kubeconfig"))
        done = run_nsstuck("diagnose", "old", "--kubeconfig", kubeconfig, "-o", "json")
        text = run_nsstuck("diagnose", "old", "--kubeconfig", kubeconfig).stdout
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["state"] == "terminating"
    finding = _owner(report["findings"])
    assert "Argo CD Application argocd/old manages" in finding["summary"]
    assert "re-creates what the delete removes" in finding["summary"]
    # ranked before the remedies that delete content: the blocking finding's first remedy is the owner's
    blocking = [f for f in report["findings"] if f["blocking"]]
    assert blocking
    assert blocking[0]["remedies"][0]["description"].startswith("Delete or suspend the Application argocd/old")
    assert any(r["action"] in ("remove_finalizer", "restore_controller") for r in blocking[0]["remedies"][1:]), (
        blocking[0]["remedies"]
    )
    assert "gitops_owner (not blocking): Argo CD Application argocd/old manages configmaps/o" in text


def test_a_forbidden_list_of_applications_is_a_named_gap(tmp_path: Path) -> None:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        api = Api(emu)
        _build(api)
        emu.settle()
        emu.knobs.forbid("applications", ARGO)
        kubeconfig = str(emu.write_kubeconfig(tmp_path / "kubeconfig"))
        done = run_nsstuck("precheck", "guestbook", "--kubeconfig", kubeconfig, "-o", "json")
    assert done.returncode == 5, done.stderr
    prediction = json.loads(done.stdout)["prediction"]
    # the GitOps read is named (the list of Applications in the namespace itself is refused too)
    assert ("list applications.argoproj.io (GitOps owners)", "forbidden") in {
        (g["what"], g["reason"]) for g in prediction["gaps"]
    }
    finding = _owner(prediction["findings"])
    assert finding["summary"].startswith("unconfirmed:")
    assert "the list of Applications could not be read (forbidden; see gaps)" in _said(finding)
