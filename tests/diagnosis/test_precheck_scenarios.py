"""Issue 27: the prediction, checked against what then happens.

Each case is a scenario of the emulator's library held right before its `kubectl delete namespace`
(`scenarios.before_delete`: the same build, stopped at the delete). There the namespace is Active, the
real kubectl shows the cause's evidence, and nsstuck (over HTTP, as `diagnose` and `precheck` collect)
predicts what the deletion will meet. Then the build goes on exactly as the library runs it: the DELETE
through the emulator, its namespace controller and the other controllers running, the clock advancing.
A namespace predicted to get stuck is still there, Terminating, and its diagnosis names the predicted
cause; one predicted clean is gone. The emulator's controllers are not changed for this (its namespace
controller is `tests/fakes/kubeapi/controllers/namespace.py`), so the check cannot bend to the prediction.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import pytest

from bot.domain.findings import Cause, ControllerState, Diagnosis, NamespaceState
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from tests.emulator._scenario_support import kubectl, kubectl_available, new_emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import SCENARIOS, Scenario, before_delete

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not kubectl_available(), reason="/usr/bin/kubectl is not installed"),
]


@dataclass(frozen=True)
class Case:
    scenario: str
    # the causes the prediction gives as would-block, the first one first; () for a clean prediction
    causes: tuple[str, ...]
    # (kind, name pattern) of the objects the predicted reasons name
    objects: tuple[tuple[str, str], ...]
    # a kubectl command before the delete, and what its output shows
    kubectl: tuple[str, ...]
    shows: str
    # options that differ from the library scenario's
    options: dict[str, object] = field(default_factory=dict)
    # the prediction cannot tell: a gap (precheck's exit 5), and it would not block
    unknown: bool = False


CASES = [
    Case(
        "seed000-metrics-missing-endpoints",
        ("apiservice_unavailable",),
        (("APIService", "v1beta1.metrics.k8s.io"),),
        ("get", "apiservice", "v1beta1.metrics.k8s.io", "--no-headers"),
        "False (MissingEndpoints)",
    ),
    Case(
        "seed003-prometheus-adapter-service-not-found",
        ("apiservice_unavailable",),
        (("APIService", "v1beta1.metrics.k8s.io"),),
        ("get", "apiservice", "v1beta1.metrics.k8s.io", "--no-headers"),
        "False (ServiceNotFound)",
    ),
    Case(
        "aggregator-stale-defect",
        ("aggregated_discovery_defect",),
        (("APIService", "v1.allocation.agones.dev"),),
        ("get", "apiservice", "v1.allocation.agones.dev", "--no-headers"),
        "agones-system/agones-controller-service   True",
    ),
    Case(
        "webhook-blocks-delete",
        ("webhook_blocks_delete",),
        (("ValidatingWebhookConfiguration", "policy-webhook"), ("ConfigMap", "app-config")),
        ("get", "deployment", "policy-webhook", "-n", "policy-system", "--no-headers"),
        "0/0",
    ),
    Case(
        "seed003-kiali-orphaned-finalizer",
        ("orphaned_finalizer",),
        (("Kiali", "kiali"),),
        ("get", "kialis.kiali.io", "kiali", "-n", "istio-system", "-o", "jsonpath={.metadata.finalizers}"),
        "kiali.io/finalizer",
    ),
    Case(
        "controller-dead-scaled-to-zero",
        ("orphaned_finalizer",),
        (("Kiali", "kiali"),),
        ("get", "deployment", "kiali-operator", "-n", "kiali-operator", "--no-headers"),
        "0/0",
    ),
    Case(
        "seed002-configmap-finalizer",
        ("orphaned_finalizer",),
        (("ConfigMap", "mymap"),),
        ("get", "configmap", "mymap", "-n", "finalizer-demo", "-o", "jsonpath={.metadata.finalizers}"),
        '["kubernetes"]',
    ),
    Case(
        "seed003-kubesphere-namespace-finalizer",
        ("namespace_finalizer",),
        (("Namespace", "kubesphere-sample"),),
        ("get", "namespace", "kubesphere-sample", "-o", "jsonpath={.metadata.finalizers}"),
        "finalizers.kubesphere.io/namespaces",
    ),
    Case(
        "namespace-spec-foreground-deletion",
        ("namespace_finalizer",),
        (("Namespace", "batch-jobs"),),
        ("get", "namespace", "batch-jobs", "-o", "jsonpath={.spec.finalizers}"),
        '["kubernetes","foregroundDeletion"]',
    ),
    Case(
        "pod-on-notready-node",
        ("pod_on_lost_node",),
        (("Pod", "worker-*"), ("Node", "node-3")),
        ("get", "node", "node-3", "--no-headers"),
        "NotReady",
    ),
    Case(
        "pvc-in-use",
        ("pod_on_lost_node", "pvc_in_use"),
        (("Pod", "postgres-0"), ("PersistentVolumeClaim", "data-postgres-0")),
        ("get", "pvc", "data-postgres-0", "-n", "database", "--no-headers"),
        "Bound",
    ),
    Case(
        "finalizer-deadlock-helm-chart",
        ("finalizer_deadlock",),
        (("HelmChart", "traefik"),),
        ("get", "deployment", "helm-controller", "-n", "helm-controller", "--no-headers"),
        "1/1",
    ),
    # nothing shows whether the Gadget's controller runs: said, and a gap, never "nothing would hold it"
    Case(
        "controller-unknown",
        (),
        (("Gadget", "probe"),),
        ("get", "gadgets.example.io", "probe", "-n", "gadget-lab", "-o", "jsonpath={.metadata.finalizers}"),
        "gadgets.example.io/teardown",
        unknown=True,
    ),
    # predicted clean: deleted, and gone
    Case("deleted-cleanly", (), (), ("get", "apiservice", "v1beta1.metrics.k8s.io", "--no-headers"), "True"),
    # the pod of a Node that was deleted: the pod garbage collector removes it (running, as by default)
    Case(
        "pod-on-missing-node",
        (),
        (("Pod", "renderer-*"),),
        ("get", "pods", "-n", "reports", "-o", "wide", "--no-headers"),
        "node-3",
        options={"pod_gc_orphans": True},
    ),
]


@dataclass
class Outcome:
    case: Case
    scenario: Scenario
    before: Diagnosis
    namespace_shown: str  # kubectl get namespace, before the delete
    cause_shown: str  # the case's kubectl command, before the delete
    after: Diagnosis
    left: dict[str, object] | None  # the namespace once the build has run on (None: gone)


def _diagnose(kubeconfig: Path, namespace: str, emu: object) -> Diagnosis:
    clock = emu.clock.now  # type: ignore[attr-defined]
    return diagnose_namespace(
        ClusterTarget(name="emulated", kubeconfig=kubeconfig),
        namespace,
        options=CollectOptions(deadline=10, call_timeout=3),
        clock=clock,
    ).diagnosis


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.scenario)
def outcome(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    case: Case = request.param
    library = SCENARIOS[case.scenario]
    scenario = replace(library, options=MappingProxyType({**library.options, **case.options}))
    namespace = scenario.expected.namespace
    tmp = tmp_path_factory.mktemp(case.scenario)
    emu = new_emulator(scenario)
    try:
        kubeconfig = emu.write_kubeconfig(tmp / "kubeconfig")
        with before_delete(emu, scenario):
            before = _diagnose(kubeconfig, namespace, emu)
            shown = kubectl(emu, tmp, "get", "namespace", namespace, "--no-headers", check=True).stdout
            cause = kubectl(emu, tmp, *case.kubectl, check=True).stdout
        after = _diagnose(kubeconfig, namespace, emu)
        left = KubeHTTP(emu.url, emu.admin_token).get_or_none(f"/api/v1/namespaces/{namespace}")
        yield Outcome(case, scenario, before, shown, cause, after, left)
    finally:
        emu.stop()


def test_before_the_delete_kubectl_shows_an_active_namespace_and_the_cause(outcome: Outcome) -> None:
    assert outcome.namespace_shown.split()[:2] == [outcome.scenario.expected.namespace, "Active"]
    assert outcome.case.shows in outcome.cause_shown


def test_an_active_namespace_keeps_its_state_and_no_finding(outcome: Outcome) -> None:
    before = outcome.before
    assert before.state is NamespaceState.ACTIVE
    assert before.findings == ()
    assert before.cause is None
    assert before.prediction is not None
    assert Diagnosis.from_json(before.to_json()) == before


def test_the_prediction_names_the_cause_and_its_objects(outcome: Outcome) -> None:
    prediction = outcome.before.prediction
    assert prediction is not None
    case = outcome.case
    blocking = [f for f in prediction.findings if f.blocking]
    assert [f.cause.value for f in blocking][: len(case.causes)] == list(case.causes), _summary(outcome.before)
    assert {f.cause.value for f in blocking} <= set(case.causes), _summary(outcome.before)
    assert prediction.would_block is bool(case.causes)
    named = [o for f in prediction.findings for o in f.objects]
    for kind, pattern in case.objects:
        assert any(o.kind == kind and fnmatch.fnmatchcase(o.name, pattern) for o in named), (kind, pattern, named)
    for finding in blocking:
        assert finding.evidence
        assert finding.remedies
    if case.unknown:
        assert not prediction.complete
        assert any(g.reason == "unknown" for g in prediction.gaps)
        judged = [f.controller for f in prediction.findings if f.controller is not None]
        assert judged
        assert judged[0].state is ControllerState.UNKNOWN
    else:
        assert prediction.complete, [str(g) for g in prediction.gaps]


def test_a_prediction_offers_no_request(outcome: Outcome) -> None:
    """Nothing is deleted yet: no remedy of a prediction is one the executor would carry out."""
    prediction = outcome.before.prediction
    assert prediction is not None
    offered = [r for f in prediction.findings for r in f.remedies]
    assert not [r for r in offered if r.requires_approval or r.action.changes_cluster]


def test_the_delete_then_gets_stuck_as_predicted_or_the_namespace_goes(outcome: Outcome) -> None:
    case, after = outcome.case, outcome.after
    if not case.causes and not case.unknown:
        assert outcome.left is None, "predicted clean, but the namespace is still there"
        assert after.state is NamespaceState.NOT_FOUND
        return
    assert outcome.left is not None, "predicted to get stuck, but the namespace is gone"
    assert (outcome.left.get("status") or {}).get("phase") == "Terminating"  # type: ignore[union-attr]
    assert after.state is NamespaceState.TERMINATING
    assert after.cause is not None
    blocking = {f.cause.value for f in after.findings if f.blocking}
    if case.causes:
        assert after.cause.value in case.causes, _summary(after)
        assert blocking <= set(case.causes), _summary(after)
    else:  # said to be unknown: whether its controller runs decided it, and nothing ran it
        assert after.cause is Cause.ORPHANED_FINALIZER, _summary(after)


def _summary(diagnosis: Diagnosis) -> str:
    findings = diagnosis.prediction.findings if diagnosis.prediction is not None else diagnosis.findings
    return "\n".join(f"{f.cause.value} blocking={f.blocking}: {f.summary}" for f in findings)
