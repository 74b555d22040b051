"""The Patcher against the emulated API server, with the real kubernetes client through our Transport.

Each case starts from a scenario of the emulator's library, diagnoses it with the real collector and
rules, and plans the remedy the diagnosis offers: the same path a remediation takes in production.
"""

from __future__ import annotations

import copy
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis import remedies
from bot.diagnosis.engine import diagnose
from bot.domain.changes import CallResult, Operation, Verdict, object_path
from bot.domain.findings import Action, Remedy, Risk
from bot.domain.refs import KubeObject, ObjectRef, finalizers_of
from bot.errors import ClusterUnreachableError, PermanentError
from bot.kube.collecting import Collector
from bot.kube.patching import FIELD_MANAGER, PATCH_NOT_APPLICABLE, Patcher
from bot.remediation.planning import operations, spec_finalizers, stale_reasons, took_effect
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario_once, snapshot
from tests.remediation.conftest import make_patcher

USER = "system:serviceaccount:nsstuck:nsstuck"


@dataclass(frozen=True)
class Case:
    scenario: str
    action: Action

    @property
    def removes_a_finalizer(self) -> bool:
        return self.action in (Action.REMOVE_FINALIZER, Action.REMOVE_NAMESPACE_FINALIZER)


CASES: dict[str, Case] = {
    "cr-finalizer": Case("seed003-kiali-orphaned-finalizer", Action.REMOVE_FINALIZER),
    "configmap-finalizer": Case("seed002-configmap-finalizer", Action.REMOVE_FINALIZER),
    "namespace-metadata-finalizer": Case("seed003-kubesphere-namespace-finalizer", Action.REMOVE_NAMESPACE_FINALIZER),
    "namespace-spec-finalizer": Case("namespace-spec-finalizer", Action.REMOVE_NAMESPACE_FINALIZER),
    "namespace-spec-foreground": Case("namespace-spec-foreground-deletion", Action.REMOVE_NAMESPACE_FINALIZER),
    "force-finalize": Case("seed003-prometheus-adapter-service-not-found", Action.FORCE_FINALIZE_NAMESPACE),
    "apiservice": Case("seed003-prometheus-adapter-service-not-found", Action.DELETE_APISERVICE),
    "webhook-configuration": Case("webhook-blocks-delete", Action.DELETE_WEBHOOK_CONFIGURATION),
    "pod-on-lost-node": Case("pod-on-notready-node", Action.FORCE_DELETE_POD),
}


@dataclass
class Planned:
    remedy: Remedy
    live: list[KubeObject]
    ops: tuple[Operation, ...]


# -- helpers shared with test_kubectl_agrees ------------------------------------------------------------


@pytest.fixture
def admin(kube_emulator: Emulator) -> KubeHTTP:
    return KubeHTTP(kube_emulator.url, kube_emulator.admin_token)


# The emulator is deterministic (seeded UIDs, a resourceVersion counter, a fake clock): a scenario
# built again is the same cluster, so its diagnosis is made once per case (`plan` re-checks freshness).
_diagnosed: dict[Case, Remedy] = {}


def diagnosed_remedy(emu: Emulator, patcher: Patcher, case: Case) -> Remedy:
    """Build the scenario and return the first remedy of the case's action that the diagnosis offers."""
    scenario = apply_scenario_once(emu, case.scenario)
    if case not in _diagnosed:
        _diagnosed[case] = diagnosed_remedy_of(patcher, scenario.expected.namespace, case.action)
    return _diagnosed[case]


def diagnosed_remedy_of(patcher: Patcher, namespace: str, action: Action) -> Remedy:
    report = diagnose(Collector(patcher.transport, cluster="emulator").collect(namespace))
    for finding in report.findings:
        for remedy in finding.remedies:
            if remedy.action is action:
                return remedy
    raise AssertionError(f"the diagnosis of {namespace} offers no {action.value}")


def plan(patcher: Patcher, remedy: Remedy) -> Planned:
    live = [patcher.read(target) for target in remedy.targets]
    assert stale_reasons(remedy, live) == []
    present = [obj for obj in live if obj is not None]
    assert len(present) == len(live)
    return Planned(remedy, present, operations(remedy, present))


def prepared(emu: Emulator, patcher: Patcher, case: Case) -> Planned:
    return plan(patcher, diagnosed_remedy(emu, patcher, case))


def key_of(ref: ObjectRef) -> str:
    """The key of `tests.fakes.kubeapi.scenarios.snapshot` for one object."""
    return f"{ref.group}/{ref.resource}/{ref.namespace or ''}/{ref.name}"


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def touch(http: KubeHTTP, ref: ObjectRef) -> None:
    """Someone else changes the object (a label): its resourceVersion moves on."""
    http.patch(object_path(ref), {"metadata": {"labels": {"touched-by": "someone-else"}}})


def remove_for_good(http: KubeHTTP, ref: ObjectRef) -> None:
    path = object_path(ref)
    http.patch(path, {"metadata": {"finalizers": None}})
    current = http.get_or_none(path)
    if current is not None and ref.kind == "Namespace":
        current["spec"] = {"finalizers": []}
        http.put(f"{path}/finalize", current)
    elif current is not None:
        http.delete(path, {"gracePeriodSeconds": 0})
    assert http.get_or_none(path) is None


def deny_everything(emu: Emulator, http: KubeHTTP, *, reachable: bool = True) -> str:
    """A validating webhook on every UPDATE and DELETE; its backend answers (deny) or is gone."""
    name = "freeze.policy.example.com"
    http.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "freeze"}})
    if reachable:
        http.post(
            "/api/v1/namespaces/freeze/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "freeze"},
                "spec": {"selector": {"app": "freeze"}, "ports": [{"port": 443, "targetPort": 9443}]},
            },
        )
        http.post(
            "/api/v1/namespaces/freeze/endpoints",
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": "freeze"},
                "subsets": [{"addresses": [{"ip": "10.244.1.9"}], "ports": [{"port": 9443}]}],
            },
        )
        emu.knobs.webhook_verdict[name] = "deny:the cluster is frozen for the audit"
    http.post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "freeze"},
            "webhooks": [
                {
                    "name": name,
                    "clientConfig": {"service": {"namespace": "freeze", "name": "freeze", "path": "/validate"}},
                    "rules": [
                        {
                            "operations": ["UPDATE", "DELETE"],
                            "apiGroups": ["*"],
                            "apiVersions": ["*"],
                            "resources": ["*/*"],
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )
    return name


def run_all(patcher: Patcher, ops: tuple[Operation, ...], *, dry_run: bool) -> list[CallResult]:
    return [patcher.run(op, dry_run=dry_run) for op in ops]


# -- dry run and real run -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_dry_run_changes_nothing(name: str, kube_emulator: Emulator, patcher: Patcher) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    before = snapshot(kube_emulator)
    results = run_all(patcher, planned.ops, dry_run=True)
    assert [r.verdict for r in results] == [Verdict.OK] * len(planned.ops), results
    assert snapshot(kube_emulator) == before
    for op, result in zip(planned.ops, results, strict=True):
        again = patcher.read(op.target)
        assert again is not None
        assert again["metadata"]["resourceVersion"] == op.target.resource_version
        assert result.object is not None
        if case.removes_a_finalizer:
            # the answer is what the change would produce: the finalizer gone from both lists
            assert planned.remedy.finalizer not in finalizers_of(result.object) + spec_finalizers(result.object)
        if case.action is Action.FORCE_FINALIZE_NAMESPACE:
            assert spec_finalizers(result.object) == []


@pytest.mark.parametrize("name", CASES)
def test_the_real_run_changes_exactly_its_targets(name: str, kube_emulator: Emulator, patcher: Patcher) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    before = snapshot(kube_emulator)
    results = run_all(patcher, planned.ops, dry_run=False)
    assert [r.verdict for r in results] == [Verdict.OK] * len(planned.ops), results
    assert all(r.message == "" and r.status == 200 for r in results)
    after = snapshot(kube_emulator)
    assert changed_keys(before, after) == {key_of(op.target) for op in planned.ops}
    for op, live in zip(planned.ops, planned.live, strict=True):
        # in every one of these scenarios the change releases the object: it is deleted
        assert patcher.read(op.target) is None
        assert took_effect(planned.remedy, live, None)
    assert stale_reasons(planned.remedy, [None] * len(planned.ops)) != []


def test_removing_one_of_two_finalizers_keeps_the_object_and_the_other(
    kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    created = admin.post(
        "/api/v1/namespaces/shop/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "finalizers": ["example.com/first", "example.com/second"]},
            "data": {"color": "blue"},
        },
    )
    admin.delete("/api/v1/namespaces/shop/configmaps/settings")  # now it waits for its finalizers
    target = ObjectRef.of(admin.get("/api/v1/namespaces/shop/configmaps/settings"), resource="configmaps")
    remedy = remedies.remove_finalizer(target, "example.com/second", risk=Risk.MEDIUM, consequence="x")
    planned = plan(patcher, remedy)
    before = snapshot(kube_emulator)
    (result,) = run_all(patcher, planned.ops, dry_run=False)
    assert result.verdict is Verdict.OK
    assert changed_keys(before, snapshot(kube_emulator)) == {key_of(target)}
    now = patcher.read(target)
    assert now is not None
    assert result.object is not None
    assert result.object["metadata"]["resourceVersion"] == now["metadata"]["resourceVersion"]
    assert int(now["metadata"]["resourceVersion"]) > int(target.resource_version or 0)
    assert now["metadata"]["finalizers"] == ["example.com/first"]
    assert now["metadata"]["uid"] == created["metadata"]["uid"]
    assert admin.get("/api/v1/namespaces/shop/configmaps/settings")["data"] == {"color": "blue"}  # kept
    assert "data" not in now  # read as metadata only
    assert "data" not in result.object  # and answered so
    assert took_effect(remedy, planned.live[0], now)


def test_our_writes_carry_our_field_manager(kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP) -> None:
    """The API server records who wrote what in managedFields; nsstuck writes as `nsstuck`, so that a
    diagnosis never takes its own change for a controller at work (bot.diagnosis.controllers)."""
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    admin.post(
        "/api/v1/namespaces/shop/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "finalizers": ["a.io/x", "b.io/y"]}},
    )
    admin.delete("/api/v1/namespaces/shop/configmaps/s")
    target = ObjectRef.of(admin.get("/api/v1/namespaces/shop/configmaps/s"), resource="configmaps")
    planned = plan(patcher, remedies.remove_finalizer(target, "b.io/y", risk=Risk.MEDIUM, consequence="x"))
    (result,) = run_all(patcher, planned.ops, dry_run=False)
    assert result.verdict is Verdict.OK
    entries = admin.get("/api/v1/namespaces/shop/configmaps/s")["metadata"]["managedFields"]
    ours = [e for e in entries if e["manager"] == FIELD_MANAGER == "nsstuck"]
    assert len(ours) == 1
    assert "f:finalizers" in ours[0]["fieldsV1"]["f:metadata"]


def test_removing_one_spec_finalizer_keeps_the_namespace(kube_emulator: Emulator, patcher: Patcher) -> None:
    apply_scenario_once(kube_emulator, "namespace-spec-finalizer")
    admin = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    admin.post(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ci-runner-43"}, "spec": {"finalizers": []}},
    )
    ns = admin.get("/api/v1/namespaces/ci-runner-43")
    ns["spec"]["finalizers"] = ["kubernetes", "ci.example.com/cleanup"]
    admin.put("/api/v1/namespaces/ci-runner-43/finalize", ns)  # an Active namespace with two spec finalizers
    target = ObjectRef.of(admin.get("/api/v1/namespaces/ci-runner-43"), resource="namespaces")
    remedy = remedies.remove_namespace_finalizer(target, "ci.example.com/cleanup", in_spec=True, consequence="x")
    planned = plan(patcher, remedy)
    assert planned.ops[0].method == "PUT"
    (result,) = run_all(patcher, planned.ops, dry_run=False)
    assert result.verdict is Verdict.OK
    now = patcher.read(target)
    assert now is not None
    assert now["spec"]["finalizers"] == ["kubernetes"]
    assert now["status"]["phase"] == "Active"
    assert took_effect(remedy, planned.live[0], now)


# -- preconditions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_an_object_changed_after_the_check_is_a_conflict_and_stays_as_it_is(
    name: str, kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    for op in planned.ops:
        touch(admin, op.target)
    touched = snapshot(kube_emulator)
    for dry_run in (True, False):
        results = run_all(patcher, planned.ops, dry_run=dry_run)
        assert [r.verdict for r in results] == [Verdict.CONFLICT] * len(planned.ops), results
        for op, result in zip(planned.ops, results, strict=True):
            if op.method == "PATCH":  # the JSON patch's `test` of the resourceVersion failed
                assert result.status == 422
                assert result.message == (
                    f"a precondition failed: {op.target.display} changed since it was checked "
                    f"(the server said: {PATCH_NOT_APPLICABLE})"
                )
            elif op.method == "PUT":  # the resourceVersion in the body
                assert result.status == 409
                assert "the object has been modified" in result.message
            else:  # DeleteOptions.preconditions
                assert result.status == 409
                assert "the ResourceVersion in the precondition" in result.message
    assert snapshot(kube_emulator) == touched


def test_a_recreated_object_is_a_conflict_on_its_uid(
    kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    planned = prepared(kube_emulator, patcher, CASES["apiservice"])
    (op,) = planned.ops
    old = planned.live[0]
    admin.delete(op.path)
    fresh = {k: v for k, v in old.items() if k != "status"}
    fresh["metadata"] = {"name": old["metadata"]["name"], "labels": old["metadata"].get("labels", {})}
    admin.post("/apis/apiregistration.k8s.io/v1/apiservices", fresh)
    result = patcher.run(op, dry_run=False)
    assert result.verdict is Verdict.CONFLICT
    assert "the UID in the precondition" in result.message
    now = patcher.read(op.target)
    assert now is not None  # the new APIService was left alone
    assert now["metadata"]["uid"] != old["metadata"]["uid"]
    assert stale_reasons(planned.remedy, [now])[0].startswith(f"{op.target.display} was deleted and re-created")


def test_a_finalizer_that_moved_to_another_index_is_a_conflict(
    kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    admin.post(
        "/api/v1/namespaces/shop/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a.io/x", "b.io/y"]}},
    )
    target = ObjectRef.of(admin.get("/api/v1/namespaces/shop/configmaps/c"), resource="configmaps")
    planned = plan(patcher, remedies.remove_finalizer(target, "b.io/y", risk=Risk.LOW, consequence="x"))
    admin.patch(object_path(target), [{"op": "remove", "path": "/metadata/finalizers/0"}], patch_type="json")
    result = patcher.run(planned.ops[0], dry_run=False)
    assert result.verdict is Verdict.CONFLICT
    assert admin.get(object_path(target))["metadata"]["finalizers"] == ["b.io/y"]


# -- refusals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("reachable", [True, False], ids=["webhook-denies", "webhook-unreachable"])
def test_a_webhook_that_refuses_is_denied(
    name: str, reachable: bool, kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    case = CASES[name]
    planned = prepared(kube_emulator, patcher, case)
    hook = deny_everything(kube_emulator, admin, reachable=reachable)
    before = snapshot(kube_emulator)
    results = run_all(patcher, planned.ops, dry_run=True)
    if case.action is Action.DELETE_WEBHOOK_CONFIGURATION:
        # the API server never sends webhook configurations to webhooks: a broken one can always go
        assert [r.verdict for r in results] == [Verdict.OK]
        return
    assert [r.verdict for r in results] == [Verdict.DENIED] * len(planned.ops), results
    for result in results:
        if reachable:
            assert result.status == 400
            assert (
                result.message == f'admission webhook "{hook}" denied the request: the cluster is frozen for the audit'
            )
        else:
            assert result.status == 500
            assert result.message.startswith(f'Internal error occurred: failed calling webhook "{hook}"')
            assert result.message.endswith('service "freeze" not found')
    assert snapshot(kube_emulator) == before


def test_a_webhook_denial_worded_as_forbidden_is_still_denied() -> None:
    from bot.kube.patching import classify
    from bot.kube.transport import CallError

    op = Operation("DELETE", "/x", ObjectRef("v1", "Pod", "p"), "s", "k")
    message = 'admission webhook "validation.gatekeeper.sh" denied the request: [deny-all] frozen'
    assert classify(op, CallError("status", message, 403)).verdict is Verdict.DENIED
    policy = "ValidatingAdmissionPolicy 'freeze' with binding 'freeze-all' denied request: frozen"
    assert classify(op, CallError("status", policy, 422)).verdict is Verdict.DENIED
    assert classify(op, CallError("status", 'pods "p" is forbidden: User "u" cannot delete', 403)).verdict is (
        Verdict.FORBIDDEN
    )


def _verb_and_resource(op: Operation) -> tuple[str, str]:
    resource = op.target.resource or ""
    if op.path.endswith("/finalize"):
        return "update", f"{resource}/finalize"
    return {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}[op.method], resource


@pytest.mark.parametrize("name", CASES)
def test_what_our_identity_may_not_do_is_forbidden(name: str, kube_emulator: Emulator, patcher: Patcher) -> None:
    planned = prepared(kube_emulator, patcher, CASES[name])
    for op in planned.ops:
        verb, resource = _verb_and_resource(op)
        kube_emulator.knobs.forbid(resource, op.target.group, verbs=(verb,))
    before = snapshot(kube_emulator)
    for dry_run in (True, False):
        for op, result in zip(planned.ops, run_all(patcher, planned.ops, dry_run=dry_run), strict=True):
            verb, resource = _verb_and_resource(op)
            assert result.verdict is Verdict.FORBIDDEN, result
            assert result.status == 403
            assert f'User "{USER}" cannot {verb} resource "{resource}" in API group "{op.target.group}"' in (
                result.message
            )
    assert snapshot(kube_emulator) == before
    assert all(patcher.read(op.target) is not None for op in planned.ops)  # reading is still allowed


@pytest.mark.parametrize("name", CASES)
def test_an_object_gone_meanwhile(name: str, kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP) -> None:
    planned = prepared(kube_emulator, patcher, CASES[name])
    for op in planned.ops:
        remove_for_good(admin, op.target)
    for op in planned.ops:
        assert patcher.read(op.target) is None
        for dry_run in (True, False):
            result = patcher.run(op, dry_run=dry_run)
            assert result.verdict is Verdict.GONE, result
            assert result.status == 404
            assert result.message.endswith(f'"{op.target.name}" not found')
    assert stale_reasons(planned.remedy, [None] * len(planned.ops)) == [
        f"{t.display} is gone" for t in planned.remedy.targets
    ]


def test_a_patched_object_that_fails_validation_is_denied_not_a_conflict(
    kube_emulator: Emulator, patcher: Patcher, admin: KubeHTTP
) -> None:
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    admin.post(
        "/api/v1/namespaces/shop/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a.io/x"]}},
    )
    target = ObjectRef.of(admin.get("/api/v1/namespaces/shop/configmaps/c"), resource="configmaps")
    bad = Operation(
        "PATCH",
        object_path(target),
        target,
        "add a finalizer that is not qualified",
        "",
        body=[{"op": "add", "path": "/metadata/finalizers/-", "value": "unqualified"}],
        content_type="application/json-patch+json",
    )
    result = patcher.run(bad, dry_run=True)
    assert result.verdict is Verdict.DENIED
    assert result.status == 422
    assert result.message == (
        'ConfigMap "c" is invalid: metadata.finalizers[1]: Invalid value: "unqualified": '
        "name is neither a standard finalizer name nor is it fully qualified"
    )


# -- the cluster does not answer as asked --------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _some_operation() -> tuple[ObjectRef, Operation]:
    obj = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io", "uid": "u-1", "resourceVersion": "5"},
    }
    target = ObjectRef.of(obj, resource="apiservices")
    remedy = remedies.delete_apiservice(target, risk=Risk.LOW, consequence="x")
    return target, operations(remedy, [obj])[0]


def test_an_unreachable_server(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        f"clusters: [{{name: gone, cluster: {{server: 'http://127.0.0.1:{_closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: very-secret-token-123}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    patcher, connection = make_patcher(kubeconfig, timeout=2)
    try:
        target, op = _some_operation()
        with pytest.raises(ClusterUnreachableError, match="is unreachable: cannot connect") as raised:
            patcher.read(target)
        assert "very-secret-token-123" not in str(raised.value)
        for dry_run in (True, False):
            result = patcher.run(op, dry_run=dry_run)
            assert result.verdict is Verdict.UNREACHABLE
            assert result.status is None
            assert result.message.startswith("cannot connect")
    finally:
        connection.close()


@pytest.mark.timing
def test_a_server_that_does_not_answer_in_time(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    kube_emulator.knobs.latency(2500, match="/apiservices/")
    # a fraction of a second is honoured (the Transport passes a (connect, read) pair)
    patcher, connection = make_patcher(kubeconfig_path, timeout=0.3)
    try:
        target, op = _some_operation()
        started = time.monotonic()
        with pytest.raises(ClusterUnreachableError, match=r"is unreachable: timed out after 0.3s"):
            patcher.read(target)
        result = patcher.run(op, dry_run=True)
        assert result.verdict is Verdict.UNREACHABLE
        assert result.status is None
        assert result.message.startswith("timed out after 0.3s")
        assert time.monotonic() - started < 2.0  # neither call waited for the 2.5 s answer
    finally:
        connection.close()


def test_refused_credentials(kube_emulator: Emulator, patcher: Patcher) -> None:
    kube_emulator.knobs.expired_tokens.add(kube_emulator.user_token)
    target, op = _some_operation()
    with pytest.raises(ClusterUnreachableError, match="refuses our credentials: Unauthorized") as raised:
        patcher.read(target)
    assert kube_emulator.user_token not in str(raised.value)
    result = patcher.run(op, dry_run=True)
    assert (result.verdict, result.status, result.message) == (Verdict.ERROR, 401, "Unauthorized")


def test_read_refusals_are_permanent_errors_in_the_servers_words(kube_emulator: Emulator, patcher: Patcher) -> None:
    target, _ = _some_operation()
    kube_emulator.knobs.forbid("apiservices", "apiregistration.k8s.io", verbs=("get",))
    with pytest.raises(PermanentError) as raised:
        patcher.read(target)
    assert str(raised.value) == (
        "cannot read apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io: "
        'apiservices.apiregistration.k8s.io "v1beta1.metrics.k8s.io" is forbidden: '
        f'User "{USER}" cannot get resource "apiservices" in API group "apiregistration.k8s.io" at the cluster scope'
    )


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, "Internal error occurred: etcdserver: request timed out"),
        (503, "the server is currently unable to handle the request"),
        (429, "the server has received too many requests and has asked us to try again later"),
    ],
)
def test_other_server_errors(status: int, message: str, kube_emulator: Emulator, patcher: Patcher) -> None:
    _, op = _some_operation()
    body: Any = None
    if status == 500:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": 500}
    kube_emulator.knobs.inject_fault("^DELETE /apis/apiregistration", status, body, headers={"Retry-After": "0"})
    result = patcher.run(op, dry_run=True)
    assert (result.verdict, result.status) == (Verdict.ERROR, status)
    assert result.message == message


# -- what the emulator must keep doing for remedies to stay fresh ----------------------------------------


def test_a_stuck_namespace_keeps_its_resource_version(kube_emulator: Emulator, patcher: Patcher) -> None:
    """Real Kubernetes writes a namespace's status only when a condition changes; so must the
    emulator, or every remedy of a stuck namespace would look stale a minute after the diagnosis."""
    remedy = diagnosed_remedy(kube_emulator, patcher, CASES["cr-finalizer"])
    force = diagnosed_remedy_of(patcher, "istio-system", Action.FORCE_FINALIZE_NAMESPACE)
    first = [patcher.read(t) for t in remedy.targets + force.targets]
    for _ in range(5):
        kube_emulator.clock.advance(60)  # type: ignore[attr-defined]
        kube_emulator.settle()
    now = [patcher.read(t) for t in remedy.targets + force.targets]
    assert [o["metadata"]["resourceVersion"] for o in now if o] == [
        o["metadata"]["resourceVersion"] for o in first if o
    ]
    assert stale_reasons(remedy, now[:1]) == []
    assert stale_reasons(force, now[1:]) == []


def test_operations_are_sent_as_json_the_server_understands(kube_emulator: Emulator, patcher: Patcher) -> None:
    """The JSON patch goes out as a JSON array with its media type (the client would otherwise
    turn a non-list body into a strategic merge patch)."""
    planned = prepared(kube_emulator, patcher, CASES["cr-finalizer"])
    (op,) = planned.ops
    assert isinstance(op.body, list)
    assert json.loads(json.dumps(op.body)) == op.body
    wrong = copy.deepcopy(op.body)
    wrong[2]["value"] = "someone.else/finalizer"
    result = patcher.run(
        Operation(op.method, op.path, op.target, op.summary, op.kubectl, wrong, op.content_type), dry_run=True
    )
    assert result.verdict is Verdict.CONFLICT  # the `test` is evaluated by the server
