"""The namespace controller: message formats, condition bookkeeping, timing and deletion order."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers import controllers_of
from tests.fakes.kubeapi.controllers._http import ApiError, KubeHTTP
from tests.fakes.kubeapi.controllers.discovery_client import GroupDiscoveryFailed, discover
from tests.fakes.kubeapi.controllers.namespace import (
    CONDITION_TYPES,
    ConditionUpdater,
    allowed_estimate,
    backoff_delay,
    conditions_of_version,
    content_failure_message,
    content_remaining_message,
    discovery_failure_message,
    finalized_spec,
    finalizers_remaining_message,
    pod_estimate,
    unexpected_items_message,
    update_conditions,
)
from tests.fakes.kubeapi.scenarios import Api, run_for

from ._scenario_support import new_emulator

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


# -- pure parts ---------------------------------------------------------------------------------


def test_group_discovery_failed_text_is_sorted_and_counted() -> None:
    err = GroupDiscoveryFailed(
        {
            "metrics.k8s.io/v1beta1": "the server is currently unable to handle the request",
            "custom.metrics.k8s.io/v1beta1": "stale GroupVersion discovery: custom.metrics.k8s.io/v1beta1",
        }
    )
    assert discovery_failure_message(err) == (
        "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: "
        "custom.metrics.k8s.io/v1beta1: stale GroupVersion discovery: custom.metrics.k8s.io/v1beta1, "
        "metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
    )
    # anything else is the raw error text
    assert discovery_failure_message(RuntimeError("boom")) == "boom"


def test_content_messages_render_like_the_controller() -> None:
    assert content_remaining_message({("", "pods"): 5, ("kiali.io", "kialis"): 1, ("apps", "deployments"): 0}) == (
        "Some resources are remaining: kialis.kiali.io has 1 resource instances, pods. has 5 resource instances"
    )
    assert finalizers_remaining_message({"kiali.io/finalizer": 1, "a/b": 2}) == (
        "Some content in the namespace has finalizers remaining: a/b in 2 resource instances, "
        "kiali.io/finalizer in 1 resource instances"
    )
    assert content_failure_message(["z", "a"]) == "Failed to delete all resource types, 2 remaining: a, z"
    assert unexpected_items_message("ns1", "/v1, Resource=pods") == (
        "unexpected items still remain in namespace: ns1 for gvr: /v1, Resource=pods"
    )


def test_update_conditions_adds_all_five_in_order_with_ok_variants() -> None:
    status: dict[str, Any] = {"phase": "Terminating"}
    updater = ConditionUpdater()
    updater.process_delete_content_err(RuntimeError("x"))
    assert updater.update(status, T0) is True
    conds = status["conditions"]
    assert [c["type"] for c in conds] == list(CONDITION_TYPES)
    assert [c["status"] for c in conds] == ["False", "False", "True", "False", "False"]
    assert conds[2]["reason"] == "ContentDeletionFailed"
    assert conds[2]["message"] == "Failed to delete all resource types, 1 remaining: x"
    assert {c["lastTransitionTime"] for c in conds} == {"2026-11-20T08:00:00Z"}
    # the same inputs again: nothing changes
    again = ConditionUpdater()
    again.process_delete_content_err(RuntimeError("x"))
    assert again.update(status, T0 + timedelta(minutes=1)) is False


def test_last_transition_time_changes_only_on_status_flips() -> None:
    status: dict[str, Any] = {}
    first = ConditionUpdater()
    first.process_content_totals({("", "pods"): 2}, {})
    first.update(status, T0)
    # same status (True), new message: time kept
    second = ConditionUpdater()
    second.process_content_totals({("", "pods"): 1}, {})
    assert second.update(status, T0 + timedelta(seconds=30)) is True
    remaining = next(c for c in status["conditions"] if c["type"] == "NamespaceContentRemaining")
    assert remaining["message"] == "Some resources are remaining: pods. has 1 resource instances"
    assert remaining["lastTransitionTime"] == "2026-11-20T08:00:00Z"
    # flip to False: time moves
    third = ConditionUpdater()
    assert third.update(status, T0 + timedelta(seconds=60)) is True
    remaining = next(c for c in status["conditions"] if c["type"] == "NamespaceContentRemaining")
    assert (remaining["status"], remaining["reason"]) == ("False", "ContentRemoved")
    assert remaining["lastTransitionTime"] == "2026-11-20T08:01:00Z"
    untouched = next(c for c in status["conditions"] if c["type"] == "NamespaceDeletionDiscoveryFailure")
    assert untouched["lastTransitionTime"] == "2026-11-20T08:00:00Z"


def test_update_conditions_keeps_foreign_condition_order() -> None:
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "NamespaceFinalizersRemaining",
                "status": "False",
                "reason": "ContentHasNoFinalizers",
                "message": "All content-preserving finalizers finished",
                "lastTransitionTime": "x",
            },
        ]
    }
    update_conditions(status, [], T0)
    assert [c["type"] for c in status["conditions"]] == [
        "NamespaceFinalizersRemaining",
        "NamespaceDeletionDiscoveryFailure",
        "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure",
        "NamespaceContentRemaining",
    ]


def test_pod_estimate_ignores_terminal_pods_and_expires() -> None:
    pods: list[dict[str, Any]] = [
        {"spec": {"terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}},
        {"spec": {"terminationGracePeriodSeconds": 600}, "status": {"phase": "Succeeded"}},
        {"spec": {"terminationGracePeriodSeconds": 45}, "status": {"phase": "Pending"}},
        {"spec": {}, "status": {"phase": "Running"}},
    ]
    assert pod_estimate(pods) == 45
    assert allowed_estimate(45, T0, T0 + timedelta(seconds=44)) == 45
    assert allowed_estimate(45, T0, T0 + timedelta(seconds=45)) == 0


def test_finalize_spec_drops_only_the_token_and_sorts() -> None:
    assert finalized_spec(["z.io/x", "kubernetes", "a.io/y", "z.io/x"]) == ["a.io/y", "z.io/x"]
    assert finalized_spec(["kubernetes"]) == []


def test_backoff_doubles_from_5ms_to_60s() -> None:
    assert backoff_delay(0) == pytest.approx(0.005)
    assert backoff_delay(3) == pytest.approx(0.04)
    assert backoff_delay(30) == 60.0


# -- against the emulator ---------------------------------------------------------------------------


@pytest.fixture
def emu() -> Iterator[Emulator]:
    emulator = new_emulator()
    try:
        yield emulator
    finally:
        emulator.stop()


def _ns(emu: Emulator, name: str) -> dict[str, Any] | None:
    return KubeHTTP(emu.url, emu.admin_token).get_or_none(f"/api/v1/namespaces/{name}")


def test_first_sync_waits_five_seconds_then_empty_namespace_goes(emu: Emulator) -> None:
    api = Api(emu)
    api.namespace("quick")
    api.configmap("quick", "c1")
    emu.settle()
    api.delete_namespace("quick")
    emu.settle()
    ns = _ns(emu, "quick")
    assert ns is not None
    assert "conditions" not in ns["status"]  # not synced yet: namespaceDeletionGracePeriod
    emu.clock.advance(4)  # type: ignore[attr-defined]
    emu.settle()
    assert "conditions" not in (_ns(emu, "quick") or {"status": {}})["status"]
    emu.clock.advance(1)  # type: ignore[attr-defined]
    emu.settle()
    assert _ns(emu, "quick") is None


def test_finalize_keeps_third_party_spec_finalizers(emu: Emulator) -> None:
    api = Api(emu)
    api.http.post(
        "/api/v1/namespaces",
        {"metadata": {"name": "keep"}, "spec": {"finalizers": ["z.example.com/b", "kubernetes", "a.example.com/a"]}},
    )
    api.delete_namespace("keep")
    run_for(emu, 10, step=5)
    ns = _ns(emu, "keep")
    assert ns is not None
    assert ns["spec"]["finalizers"] == ["a.example.com/a", "z.example.com/b"]
    assert ns["status"]["phase"] == "Terminating"
    assert all(c["status"] == "False" for c in ns["status"]["conditions"])


def test_ordered_deletion_leaves_other_content_while_pods_remain(emu: Emulator) -> None:
    api = Api(emu)
    api.node("node-1", "192.168.0.41")
    api.namespace("ordered")
    api.configmap("ordered", "settings")
    api.deployment("ordered", "app", node="node-1", grace=60)
    run_for(emu, 15)
    api.delete_namespace("ordered")
    run_for(emu, 10, step=5)
    admin = api.http
    pods = admin.list_items("/api/v1/namespaces/ordered/pods")
    assert pods
    assert all(p["metadata"].get("deletionTimestamp") for p in pods)
    assert admin.get_or_none("/api/v1/namespaces/ordered/configmaps/settings") is not None
    assert admin.get_or_none("/apis/apps/v1/namespaces/ordered/deployments/app") is not None
    # the early return writes conditions without the content totals (kubernetes#138208)
    ns = _ns(emu, "ordered")
    assert ns is not None
    assert [c["status"] for c in ns["status"]["conditions"]] == ["False"] * 5
    run_for(emu, 100, step=10)  # grace passes, the kubelet confirms, the rest is deleted
    assert _ns(emu, "ordered") is None


def test_without_ordered_deletion_everything_is_deleted_at_once(emu: Emulator) -> None:
    ctrls = controllers_of(emu)
    assert ctrls is not None
    ctrls.configure(ordered_namespace_deletion=False)
    api = Api(emu)
    api.node("node-1", "192.168.0.41")
    api.namespace("unordered")
    api.configmap("unordered", "settings")
    api.deployment("unordered", "app", node="node-1", grace=60)
    run_for(emu, 15)
    api.delete_namespace("unordered")
    run_for(emu, 10, step=5)
    admin = api.http
    assert admin.get_or_none("/api/v1/namespaces/unordered/configmaps/settings") is None
    ns = _ns(emu, "unordered")
    assert ns is not None
    remaining = next(c for c in ns["status"]["conditions"] if c["type"] == "NamespaceContentRemaining")
    assert remaining["status"] == "True"
    assert remaining["message"].startswith("Some resources are remaining: ")
    assert "pods. has 1 resource instances" in remaining["message"]


def test_requeue_after_half_the_finalizer_estimate(emu: Emulator) -> None:
    api = Api(emu)
    api.namespace("fin")
    api.configmap("fin", "held", finalizers=["example.com/hold"])
    api.delete_namespace("fin")
    # first sync at +5 s writes the conditions; that status update is an update event that brings
    # the next sync at +10 s; it changes nothing and requeues after 15/2+1 = 8 s (at +18 s)
    run_for(emu, 10, step=5)
    ns = _ns(emu, "fin")
    assert ns is not None
    fins = next(c for c in ns["status"]["conditions"] if c["type"] == "NamespaceFinalizersRemaining")
    assert fins["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    api.http.patch("/api/v1/namespaces/fin/configmaps/held", {"metadata": {"finalizers": None}})
    emu.settle()
    assert _ns(emu, "fin") is not None
    emu.clock.advance(7)  # type: ignore[attr-defined]
    emu.settle()
    assert _ns(emu, "fin") is not None
    emu.clock.advance(1)  # type: ignore[attr-defined]
    emu.settle()
    assert _ns(emu, "fin") is None


def _unavailable_metrics(emu: Emulator) -> None:
    api = Api(emu)
    api.apiservice("metrics.k8s.io", "v1beta1", svc_ns="kube-system", svc_name="metrics-server")
    emu.settle()


@pytest.mark.parametrize(
    ("style", "text"),
    [
        ("legacy", "the server is currently unable to handle the request"),
        ("stale", "stale GroupVersion discovery: metrics.k8s.io/v1beta1"),
    ],
)
def test_discovery_error_styles(style: str, text: str) -> None:
    emu = new_emulator(discovery_error_style=style)
    try:
        _unavailable_metrics(emu)
        result = discover(KubeHTTP(emu.url, emu.admin_token), style="stale" if style == "stale" else "legacy")
        assert result.failed is not None
        assert result.failed.groups == {"metrics.k8s.io/v1beta1": text}
        assert any(r.name == "pods" and r.group == "" for r in result.namespaced())
        api = Api(emu)
        api.namespace("victim")
        api.delete_namespace("victim")
        run_for(emu, 5, step=5)
        ns = _ns(emu, "victim")
        assert ns is not None
        disc = ns["status"]["conditions"][0]
        assert (disc["type"], disc["status"], disc["reason"]) == (
            "NamespaceDeletionDiscoveryFailure",
            "True",
            "DiscoveryFailed",
        )
        assert disc["message"] == (
            "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: "
            f"metrics.k8s.io/v1beta1: {text}"
        )
        assert ns["spec"]["finalizers"] == ["kubernetes"]
    finally:
        emu.stop()


def test_discovery_failure_backs_off_and_recovers(emu: Emulator) -> None:
    _unavailable_metrics(emu)
    api = Api(emu)
    api.namespace("waiting")
    api.delete_namespace("waiting")
    run_for(emu, 120, step=10)
    ctrls = controllers_of(emu)
    assert ctrls is not None
    assert ctrls.namespace.log[-1].startswith("deletion of namespace waiting failed: unable to retrieve")
    # the APIService goes away: discovery succeeds on the next retry
    api.delete("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io")
    run_for(emu, 60, step=10)
    assert _ns(emu, "waiting") is None


def test_verb_filter_skips_resources_without_delete(emu: Emulator) -> None:
    emu.register_aggregated_backend(
        "metrics.k8s.io",
        "v1beta1",
        [{"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]}],
    )
    result = discover(KubeHTTP(emu.url, emu.admin_token))
    assert result.failed is None  # no non-Local APIService registered for the group yet
    deletable = [r for r in result.namespaced() if "delete" in r.verbs]
    assert all(r.group != "metrics.k8s.io" for r in deletable)
    assert not any(r.name == "namespaces" for r in result.namespaced())


def test_disabled_namespace_controller_leaves_no_conditions(emu: Emulator) -> None:
    ctrls = controllers_of(emu)
    assert ctrls is not None
    ctrls.stop_kube_controller_manager()
    api = Api(emu)
    api.namespace("idle")
    api.delete_namespace("idle")
    run_for(emu, 60, step=30)
    ns = _ns(emu, "idle")
    assert ns is not None
    assert "conditions" not in ns["status"]
    ctrls.start_kube_controller_manager()
    run_for(emu, 10, step=5)
    assert _ns(emu, "idle") is None


def test_api_error_texts_follow_client_go() -> None:
    err = ApiError(503, "GET", "/apis/x/v1", b"service unavailable\n", "text/plain; charset=utf-8")
    assert err.client_go_text == "the server is currently unable to handle the request"
    assert err.reason == "ServiceUnavailable"
    status = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nope","reason":"Forbidden","code":403}'
    forbidden = ApiError(403, "GET", "/x", status, "application/json")
    assert (forbidden.client_go_text, forbidden.reason) == ("nope", "Forbidden")
    boom = ApiError(502, "GET", "/x", b"bad gateway", "text/plain")
    assert boom.client_go_text == 'an error on the server ("bad gateway") has prevented the request from succeeding'


@pytest.mark.parametrize(
    ("version", "count"),
    [("1.15.12", 0), ("v1.16.15", 3), ("1.17", 5), ("1.33.1", 5), ("1.28+", 5), (None, 5), ("kube-emulator", 5)],
)
def test_the_conditions_a_release_writes(version: str | None, count: int) -> None:
    """None before 1.16, the three failure conditions in 1.16, all five from 1.17 (k8s.io/api tags)."""
    assert conditions_of_version(version) == CONDITION_TYPES[:count]
