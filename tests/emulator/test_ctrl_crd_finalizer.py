"""The CRD finalizer: deleting a CRD deletes its instances, and waits for their finalizers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.kubeapi.controllers.crd_finalizer import set_crd_condition
from tests.fakes.kubeapi.scenarios import Api, run_for

from ._scenario_support import START, new_emulator

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kialis.kiali.io"
KIALIS = "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis"


@pytest.fixture
def api() -> Iterator[Api]:
    emu = new_emulator()
    api = Api(emu)
    api.crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
    api.namespace("istio-system")
    emu.settle()
    try:
        yield api
    finally:
        emu.stop()


def _kiali(api: Api, name: str, finalizers: list[str] | None = None) -> None:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    api.create(KIALIS, {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": meta})


def _terminating(api: Api) -> tuple[str, str, str] | None:
    crd = api.http.get_or_none(CRD)
    if crd is None:
        return None
    cond = next((c for c in crd["status"]["conditions"] if c["type"] == "Terminating"), None)
    return None if cond is None else (cond["status"], cond["reason"], cond["message"])


def test_set_crd_condition_keeps_transition_time_for_same_status() -> None:
    from datetime import timedelta

    conds = set_crd_condition([], {"type": "Terminating", "status": "True", "reason": "A", "message": "a"}, START)
    later = set_crd_condition(
        conds, {"type": "Terminating", "status": "True", "reason": "B", "message": "b"}, START + timedelta(seconds=9)
    )
    assert later[0]["lastTransitionTime"] == "2026-11-20T08:00:00Z"
    assert later[0]["reason"] == "B"


def test_crd_without_blocked_instances_is_removed_with_them(api: Api) -> None:
    _kiali(api, "a")
    _kiali(api, "b")
    api.delete(CRD)
    assert api.http.get(CRD)["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    api.emu.settle()
    assert api.http.get_or_none(CRD) is None


def test_instance_finalizer_holds_the_crd_in_progress_then_check(api: Api) -> None:
    _kiali(api, "kiali", ["kiali.io/finalizer"])
    api.delete(CRD)
    api.emu.settle()
    assert _terminating(api) == ("True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")
    assert api.http.get(f"{KIALIS}/kiali")["metadata"]["deletionTimestamp"]
    run_for(api.emu, 60, step=30)
    assert _terminating(api) == (
        "True",
        "InstanceDeletionCheck",
        "could not confirm zero CustomResources remaining: timed out waiting for the condition",
    )
    # the finalizer is removed by hand: the next attempt completes and the CRD goes
    api.http.patch(f"{KIALIS}/kiali", {"metadata": {"finalizers": None}})
    run_for(api.emu, 1, step=1)
    assert api.http.get_or_none(CRD) is None
