"""The real kubectl (v1.32) agrees with the emulator on the scenarios.

Read-only checks share the session's applied scenarios; checks that change the cluster build their
own emulator.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import SCENARIOS

from ._scenario_support import (
    Applied,
    AppliedScenarios,
    condition_tuples,
    fresh_scenario,
    kubectl,
    kubectl_available,
    restored_scenarios,
)

__all__ = ["restored_scenarios"]

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not kubectl_available(), reason="/usr/bin/kubectl is not installed"),
]

TERMINATING = sorted(n for n, s in SCENARIOS.items() if s.expected.state == "terminating")


def test_api_resources_reports_the_unavailable_metrics_api(
    restored_scenarios: AppliedScenarios, tmp_path: Path
) -> None:
    applied = restored_scenarios.get("seed000-metrics-missing-endpoints")
    result = kubectl(applied.emu, tmp_path, "api-resources", "--namespaced=true", "--verbs=delete")
    assert result.returncode == 1
    assert (
        "error: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: "
        "the server is currently unable to handle the request"
    ) in result.stderr
    assert "rolebindings" in result.stdout  # the rest of the list is still printed
    assert "namespaces " not in result.stdout  # --namespaced=true


def test_get_apiservice_shows_the_reason(restored_scenarios: AppliedScenarios, tmp_path: Path) -> None:
    applied = restored_scenarios.get("seed000-metrics-missing-endpoints")
    result = kubectl(applied.emu, tmp_path, "get", "apiservice", "v1beta1.metrics.k8s.io")
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert row.split()[:4] == ["v1beta1.metrics.k8s.io", "kube-system/metrics-server", "False", "(MissingEndpoints)"]


def test_get_ns_shows_terminating_and_get_all_shows_nothing(
    restored_scenarios: AppliedScenarios, tmp_path: Path
) -> None:
    applied = restored_scenarios.get("seed000-metrics-missing-endpoints")
    result = kubectl(applied.emu, tmp_path, "get", "ns", "ack-system-e2e-test-0", "--no-headers")
    assert result.stdout.split()[:2] == ["ack-system-e2e-test-0", "Terminating"]
    everything = kubectl(applied.emu, tmp_path, "get", "all", "-n", "ack-system-e2e-test-0")
    assert "No resources found in ack-system-e2e-test-0 namespace." in everything.stderr


@pytest.fixture(scope="module", params=TERMINATING)
def terminating(request: pytest.FixtureRequest) -> Iterator[Applied]:
    """One terminating scenario's state restored, stopped before the next: one idle emulator at a time
    instead of all of them (each polls, ``_scenario_support``)."""
    emu, scenario = fresh_scenario(request.param, once=True)
    try:
        yield Applied(emu, scenario, {})
    finally:
        emu.stop()


def test_get_ns_yaml_shows_the_controller_conditions(terminating: Applied, tmp_path: Path) -> None:
    applied = terminating
    expected = applied.scenario.expected
    # the admin identity: the incomplete-evidence scenarios slow or forbid the user on purpose
    result = kubectl(applied.emu, tmp_path, "get", "ns", expected.namespace, "-o", "yaml", admin=True)
    assert result.returncode == 0, result.stderr
    ns = yaml.safe_load(result.stdout)
    assert ns["status"]["phase"] == "Terminating"
    assert condition_tuples(ns) == expected.conditions
    assert tuple(ns["spec"].get("finalizers") or ()) == expected.spec_finalizers


def test_delete_again_returns_the_namespace_not_409(restored_scenarios: AppliedScenarios, tmp_path: Path) -> None:
    emu, _ = fresh_scenario("seed000-metrics-missing-endpoints", once=True)
    try:
        result = kubectl(emu, tmp_path, "delete", "ns", "ack-system-e2e-test-0", "--wait=false")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == 'namespace "ack-system-e2e-test-0" deleted'
    finally:
        emu.stop()


def test_patch_finalizers_null_releases_the_kiali_cr(tmp_path: Path) -> None:
    emu, _ = fresh_scenario("seed003-kiali-orphaned-finalizer", once=True)
    try:
        result = kubectl(
            emu,
            tmp_path,
            "patch",
            "kialis.kiali.io",
            "kiali",
            "-n",
            "istio-system",
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "kiali.kiali.io/kiali patched"
        emu.clock.advance(10)  # type: ignore[attr-defined]
        emu.settle()
        gone = kubectl(emu, tmp_path, "get", "ns", "istio-system")
        assert gone.returncode == 1
        assert 'Error from server (NotFound): namespaces "istio-system" not found' in gone.stderr
    finally:
        emu.stop()


def test_patch_releases_the_seed002_configmap(tmp_path: Path) -> None:
    emu, _ = fresh_scenario("seed002-configmap-finalizer", once=True)
    try:
        result = kubectl(
            emu, tmp_path, "patch", "configmap/mymap", "-n", "finalizer-demo", "--type=merge",
            "-p", '{"metadata":{"finalizers":null}}',
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        emu.clock.advance(10)  # type: ignore[attr-defined]
        emu.settle()
        assert KubeHTTP(emu.url, emu.admin_token).get_or_none("/api/v1/namespaces/finalizer-demo") is None
    finally:
        emu.stop()


def test_replace_raw_finalize_force_finalizes(tmp_path: Path) -> None:
    emu, _ = fresh_scenario("seed001-metrics-unreachable", once=True)
    try:
        got = kubectl(emu, tmp_path, "get", "ns", "tobedeletedb", "-o", "json")
        ns = json.loads(got.stdout)
        ns["spec"]["finalizers"] = []
        result = kubectl(
            emu, tmp_path, "replace", "--raw", "/api/v1/namespaces/tobedeletedb/finalize", "-f", "-",
            stdin=json.dumps(ns),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        answer = json.loads(result.stdout)
        assert answer["kind"] == "Namespace"
        assert not answer["spec"].get("finalizers")
        assert KubeHTTP(emu.url, emu.admin_token).get_or_none("/api/v1/namespaces/tobedeletedb") is None
    finally:
        emu.stop()


def test_finalize_with_metadata_finalizers_left_keeps_the_namespace(tmp_path: Path) -> None:
    emu, _ = fresh_scenario("namespace-spec-finalizer", once=True)
    try:
        ns = json.loads(kubectl(emu, tmp_path, "get", "ns", "ci-runner-42", "-o", "json").stdout)
        assert ns["spec"]["finalizers"] == ["ci.example.com/cleanup"]
        ns["spec"]["finalizers"] = []
        result = kubectl(
            emu, tmp_path, "replace", "--raw", "/api/v1/namespaces/ci-runner-42/finalize", "-f", "-",
            stdin=json.dumps(ns),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert KubeHTTP(emu.url, emu.admin_token).get_or_none("/api/v1/namespaces/ci-runner-42") is None
    finally:
        emu.stop()


@pytest.mark.parametrize("verb", ["replace", "apply"])
def test_edit_style_update_of_spec_finalizers_is_ignored(verb: str, tmp_path: Path) -> None:
    emu, _ = fresh_scenario("seed000-metrics-missing-endpoints", once=True)
    try:
        ns = json.loads(kubectl(emu, tmp_path, "get", "ns", "ack-system-e2e-test-0", "-o", "json").stdout)
        ns["spec"]["finalizers"] = []
        if verb == "apply":
            ns["metadata"].pop("resourceVersion", None)
        manifest = tmp_path / "ns.json"
        manifest.write_text(json.dumps(ns))
        result = kubectl(emu, tmp_path, verb, "-f", str(manifest))
        assert result.returncode == 0, result.stderr
        assert "namespace/ack-system-e2e-test-0" in result.stdout
        after = json.loads(kubectl(emu, tmp_path, "get", "ns", "ack-system-e2e-test-0", "-o", "json").stdout)
        assert after["spec"]["finalizers"] == ["kubernetes"]
        assert after["status"]["phase"] == "Terminating"
        emu.clock.advance(60)  # type: ignore[attr-defined]
        emu.settle()
        still = kubectl(emu, tmp_path, "get", "ns", "ack-system-e2e-test-0", "--no-headers")
        assert still.stdout.split()[:2] == ["ack-system-e2e-test-0", "Terminating"]
    finally:
        emu.stop()


def test_force_delete_of_a_pod_on_a_lost_node_lets_the_namespace_finish(tmp_path: Path) -> None:
    emu, _ = fresh_scenario("pod-on-notready-node", once=True)
    try:
        pods = kubectl(emu, tmp_path, "get", "pods", "-n", "batch-jobs", "-o", "name")
        names = pods.stdout.split()
        assert len(names) == 2
        result = kubectl(emu, tmp_path, "delete", *names, "-n", "batch-jobs", "--force", "--grace-period=0")
        assert result.returncode == 0, result.stderr
        assert "Immediate deletion does not wait for confirmation" in result.stderr
        emu.clock.advance(60)  # type: ignore[attr-defined]
        emu.settle()
        emu.clock.advance(60)  # type: ignore[attr-defined]
        emu.settle()
        assert KubeHTTP(emu.url, emu.admin_token).get_or_none("/api/v1/namespaces/batch-jobs") is None
    finally:
        emu.stop()
