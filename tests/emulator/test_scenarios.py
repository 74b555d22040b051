"""The scenario library: every scenario reproduces its case, exactly and reproducibly."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from tests._python import PYTHON, assert_no_resource_warning
from tests.fakes.kubeapi.controllers._http import ApiError, KubeHTTP
from tests.fakes.kubeapi.scenarios import SCENARIOS, Cause, ObjectRef, apply_scenario, snapshot

from ._scenario_support import Applied, AppliedScenarios, applied_scenarios, condition_tuples, new_emulator

__all__ = ["applied_scenarios"]

NAMES = sorted(SCENARIOS)
SEEDS = {"000", "001", "002", "003", "004"}


def test_every_seed_article_has_a_scenario() -> None:
    covered = {s.seed.split("_")[0] for s in SCENARIOS.values() if s.seed}
    assert covered == SEEDS
    seed003 = [s for s in SCENARIOS.values() if s.seed and s.seed.startswith("003")]
    assert {s.expected.causes[0] for s in seed003} == {
        "namespace_finalizer",
        "orphaned_finalizer",
        "apiservice_unavailable",
    }


def test_every_cause_of_the_contract_has_a_scenario() -> None:
    causes = {cause for s in SCENARIOS.values() for cause in s.expected.causes}
    assert causes == set(get_args(Cause))


def test_the_non_stuck_and_incomplete_cases_exist() -> None:
    states = {s.expected.state for s in SCENARIOS.values()}
    assert states == {"terminating", "active", "not_found"}
    incomplete = [s for s in SCENARIOS.values() if not s.expected.complete]
    assert {g for s in incomplete for g in s.expected.gaps} == {
        "secrets",
        "servicemonitors.monitoring.coreos.com",
        "allocation.agones.dev/v1",  # aggregated-stale-backend-down: what the down API serves is unknown
    }
    assert all(s.expected.first_remedy != "force_finalize_namespace" for s in incomplete)
    lost = {s.name for s in SCENARIOS.values() if "pod_on_lost_node" in s.expected.causes}
    assert {"pod-on-notready-node", "pod-on-missing-node"} <= lost


def test_unknown_scenario_name_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="unknown scenario 'nope'"):
        apply_scenario(object(), "nope")


def _resolve(admin: KubeHTTP, ref: ObjectRef) -> list[dict[str, Any]]:
    """The objects an ObjectRef names (its name may be a pattern)."""
    plural = {
        "APIService": "apiservices",
        "ConfigMap": "configmaps",
        "Namespace": "namespaces",
        "Pod": "pods",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "Widget": "widgets",
        "Kiali": "kialis",
        "Challenge": "challenges",
        "Application": "applications",
        "Gadget": "gadgets",
        "HelmChart": "helmcharts",
        "Gizmo": "gizmos",
        "Shipment": "shipments",
    }[ref.kind]
    root = "/api/v1" if ref.api_version == "v1" else f"/apis/{ref.api_version}"
    path = f"{root}/namespaces/{ref.namespace}/{plural}" if ref.namespace else f"{root}/{plural}"
    items = admin.list_items(path)
    return [i for i in items if fnmatch.fnmatchcase(str(i["metadata"]["name"]), ref.name)]


@pytest.fixture(scope="module", params=NAMES)
def built(request: pytest.FixtureRequest) -> Iterator[Applied]:
    """One scenario built, for its two tests below, stopped before the next is built: one idle emulator
    at a time instead of every scenario's (each polls, ``_scenario_support``)."""
    name = request.param
    emu = new_emulator(SCENARIOS[name])
    try:
        apply_scenario(emu, name)
        yield Applied(emu, SCENARIOS[name], snapshot(emu))
    finally:
        emu.stop()


def test_scenario_produces_its_expected_state(built: Applied) -> None:
    applied = built
    expected = applied.scenario.expected
    ns = applied.namespace()
    if expected.state == "not_found":
        assert ns is None
        return
    assert ns is not None
    assert bool(ns["metadata"].get("deletionTimestamp")) == (expected.state == "terminating")
    assert ns["status"]["phase"] == ("Terminating" if expected.state == "terminating" else "Active")
    assert condition_tuples(ns) == expected.conditions
    for cond in ns["status"].get("conditions") or []:
        assert cond["lastTransitionTime"].endswith("Z")
    assert tuple(ns["spec"].get("finalizers") or ()) == expected.spec_finalizers
    assert tuple(ns["metadata"].get("finalizers") or ()) == expected.metadata_finalizers
    for api in expected.apiservices:
        obj = applied.admin.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{api.name}")
        available = [c for c in obj["status"]["conditions"] if c["type"] == "Available"]
        assert [(c["status"], c["reason"], c["message"]) for c in available] == [(api.status, api.reason, api.message)]
    for crd_name, status, reason in expected.crds:
        crd = applied.admin.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}")
        assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
        terminating = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"]
        assert [(c["status"], c["reason"]) for c in terminating] == [(status, reason)]
    for ref in expected.blocking:
        found = _resolve(applied.admin, ref)
        assert found, f"{ref} does not exist"
        if ref.kind not in ("APIService", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            assert all(obj["metadata"].get("deletionTimestamp") for obj in found), ref


def test_scenario_is_reproducible(built: Applied) -> None:
    first = built
    emu = new_emulator(first.scenario)
    try:
        apply_scenario(emu, first.scenario.name)
        again = snapshot(emu)
    finally:
        emu.stop()
    assert again.keys() == first.snapshot.keys()
    differing = [key for key in again if again[key] != first.snapshot[key]]
    assert differing == []


def test_a_different_seed_changes_uids_but_not_the_outcome(applied_scenarios: AppliedScenarios) -> None:
    first = applied_scenarios.get("seed003-kiali-orphaned-finalizer")
    emu = new_emulator(first.scenario, seed=7)
    try:
        apply_scenario(emu, "seed003-kiali-orphaned-finalizer")
        ns = KubeHTTP(emu.url, emu.admin_token).get("/api/v1/namespaces/istio-system")
    finally:
        emu.stop()
    original = first.namespace()
    assert original is not None
    assert ns["metadata"]["uid"] != original["metadata"]["uid"]
    assert condition_tuples(ns) == condition_tuples(original)


def test_forbidden_scenario_forbids_the_user_only(applied_scenarios: AppliedScenarios) -> None:
    applied = applied_scenarios.get("incomplete-forbidden-secrets")
    user = KubeHTTP(applied.emu.url, applied.emu.user_token)
    with pytest.raises(ApiError) as err:
        user.list_items("/api/v1/namespaces/cert-test/secrets")
    assert err.value.status == 403
    assert applied.admin.list_items("/api/v1/namespaces/cert-test/secrets") is not None
    # the holding object itself is readable
    assert user.list_items("/apis/acme.cert-manager.io/v1/namespaces/cert-test/challenges")


def test_timeout_scenario_slows_only_that_group(applied_scenarios: AppliedScenarios) -> None:
    applied = applied_scenarios.get("incomplete-timeout-group")
    knobs = applied.emu.knobs
    assert knobs.delay_for("GET /apis/monitoring.coreos.com/v1/namespaces/ingest/servicemonitors") >= 10
    assert knobs.delay_for("GET /api/v1/namespaces/ingest/pods") == 0


def test_same_state_in_another_process_with_another_hash_seed(applied_scenarios: AppliedScenarios) -> None:
    name = "pvc-in-use"
    first = applied_scenarios.get(name)
    script = (
        "import json, sys\n"
        "from tests.emulator._scenario_support import fresh_scenario\n"
        "from tests.fakes.kubeapi.scenarios import snapshot\n"
        f"emu, _ = fresh_scenario({name!r})\n"
        "json.dump(snapshot(emu), sys.stdout, sort_keys=True)\n"
        "emu.stop()\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(repo)}
    out = subprocess.run(
        [*PYTHON, "-c", script], capture_output=True, text=True, cwd=repo, env=env, timeout=60, check=True
    )
    assert_no_resource_warning(out.stderr, "the emulator in another process")
    assert json.loads(out.stdout) == first.snapshot
