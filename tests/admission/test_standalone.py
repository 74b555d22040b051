"""`nsstuck admission serve` (issue 38 §7) as a process, called by the emulator on each namespace DELETE,
seen through the real kubectl: the warnings of a delete that would get stuck (an orphaned finalizer of a
custom resource, a dead APIService), none for a clean one, the same on `--dry-run=server` (and nothing
deleted), `--mode deny` refusing a certain case and letting the annotated namespace through, and deletes
going ahead unwarned once the endpoint is stopped (failurePolicy Ignore).

One endpoint per mode serves the whole module; each test deletes namespaces of its own.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import pytest

from tests.admission._endpoint import (
    KUBECTL,
    Endpoint,
    configure,
    endpoint,
    kubectl,
    post,
    review,
    served_certificate,
    stop,
    wait_for,
    write_pair,
)
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import Api, app, apply_scenario

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

# the API server gives a webhook timeoutSeconds; the check's own budget is within it
BUDGET = "8"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path]]:
    """A healthy cluster (metrics-server up), on a clock at the present (kube-controller-manager's Lease is
    fresh to a command that reads the real clock), with a Kiali CRD whose operator is not installed."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        Api(emu).crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
        emu.settle()
        yield emu, emu.write_kubeconfig(tmp_path_factory.mktemp("admission") / "kubeconfig")


@pytest.fixture(scope="module")
def warn(cluster: tuple[Emulator, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    emu, kubeconfig = cluster
    with endpoint(kubeconfig, tmp_path_factory.mktemp("warn"), "--budget", BUDGET) as served:
        configure(emu, "nsstuck", served.url(), served.ca_bundle)
        yield served


def http(emu: Emulator) -> KubeHTTP:
    return KubeHTTP(emu.url, emu.admin_token)


def namespace(emu: Emulator, name: str, **metadata: object) -> None:
    http(emu).post("/api/v1/namespaces", {"metadata": {"name": name, **metadata}})


def with_orphaned_kiali(emu: Emulator, name: str, **metadata: object) -> None:
    """A namespace holding a Kiali whose finalizer no controller will remove (the operator is not there)."""
    namespace(emu, name, **metadata)
    http(emu).post(
        f"/apis/kiali.io/v1alpha1/namespaces/{name}/kialis",
        {
            "apiVersion": "kiali.io/v1alpha1",
            "kind": "Kiali",
            "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]},
        },
    )


def deleting(emu: Emulator, name: str) -> bool:
    found = http(emu).get_or_none(f"/api/v1/namespaces/{name}")
    return bool(found and found["metadata"].get("deletionTimestamp"))


def warnings(result: object) -> list[str]:
    return [line for line in getattr(result, "stderr", "").splitlines() if line.startswith("Warning: ")]


def test_an_orphaned_finalizer_is_warned_of_and_the_delete_goes_ahead(
    cluster: tuple[Emulator, Path], warn: Endpoint
) -> None:
    emu, kubeconfig = cluster
    with_orphaned_kiali(emu, "team-kiali")

    result = kubectl(kubeconfig, "delete", "ns", "team-kiali", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'namespace "team-kiali" deleted'
    assert warnings(result) == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-kiali`"
    ]
    assert deleting(emu, "team-kiali")


def test_a_dead_apiservice_is_warned_of_and_the_delete_goes_ahead(
    cluster: tuple[Emulator, Path], warn: Endpoint
) -> None:
    emu, kubeconfig = cluster
    api = Api(emu)
    # an aggregated API whose Service was removed with its deployment: discovery of it fails in every namespace
    api.apiservice("metrics.example.io", "v1beta1", svc_ns="kube-system", svc_name="gone-adapter")
    emu.settle()
    namespace(emu, "team-api")
    try:
        result = kubectl(kubeconfig, "delete", "ns", "team-api", "--wait=false")
    finally:
        http(emu).delete("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.example.io")
        emu.settle()

    assert result.returncode == 0, result.stderr
    # the group's discovery fails: a gap as well, so the prediction is not certain, and said so, naming the gap
    assert warnings(result) == [
        "Warning: nsstuck: apiservice_unavailable: apiservice/v1beta1.metrics.example.io would hold it; "
        "see `nsstuck precheck team-api`",
        "Warning: nsstuck could not finish checking: discovery of metrics.example.io/v1beta1 failed (unavailable)",
    ]
    assert deleting(emu, "team-api")


def test_a_pod_on_a_lost_node_is_warned_of_and_the_delete_goes_ahead(
    cluster: tuple[Emulator, Path], warn: Endpoint
) -> None:
    """The third of the done-when cases: a pod bound to a node whose kubelet stopped posting status, which
    no kubelet will tear down. A node of its own, lost, so the module's other namespaces keep theirs."""
    emu, kubeconfig = cluster
    api = Api(emu)
    api.node("node-9", "10.0.0.99")
    namespace(emu, "team-batch")
    app(api, "team-batch", "worker", node="node-9", replicas=1)
    emu.settle()
    api.node_lost("node-9")
    emu.settle()

    result = kubectl(kubeconfig, "delete", "ns", "team-batch", "--wait=false")

    assert result.returncode == 0, result.stderr
    said = warnings(result)
    assert len(said) == 1, said
    assert said[0].startswith("Warning: nsstuck: pod_on_lost_node: "), said
    assert "worker-" in said[0]
    assert said[0].endswith("see `nsstuck precheck team-batch`"), said
    assert len(said[0]) - len("Warning: ") < 120
    assert deleting(emu, "team-batch")


def test_a_clean_namespace_is_deleted_without_a_word(cluster: tuple[Emulator, Path], warn: Endpoint) -> None:
    emu, kubeconfig = cluster
    namespace(emu, "team-clean")
    http(emu).post("/api/v1/namespaces/team-clean/configmaps", {"metadata": {"name": "settings"}, "data": {"a": "b"}})

    result = kubectl(kubeconfig, "delete", "ns", "team-clean", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert deleting(emu, "team-clean") or http(emu).get_or_none("/api/v1/namespaces/team-clean") is None


def test_a_server_dry_run_prints_the_warnings_and_deletes_nothing(
    cluster: tuple[Emulator, Path], warn: Endpoint
) -> None:
    emu, kubeconfig = cluster
    with_orphaned_kiali(emu, "team-dry")

    result = kubectl(kubeconfig, "delete", "ns", "team-dry", "--wait=false", "--dry-run=server")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'namespace "team-dry" deleted (server dry run)'
    assert warnings(result) == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-dry`"
    ]
    assert not deleting(emu, "team-dry")
    assert "nsstuck.admission" in warn.stderr()  # warn mode logs a let-through of a certain prediction too


def test_the_review_answers_only_a_namespace_delete_with_its_uid(warn: Endpoint) -> None:
    for body in (review("team-dry", operation="UPDATE"), review("team-dry", resource="pods")):
        status, data, _ = post(warn, body)
        assert status == 200
        answer = json.loads(data)
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        assert answer["response"] == {"uid": json.loads(body)["request"]["uid"], "allowed": True}
    status, data, _ = post(warn, review("team-dry"))
    assert status == 200
    response = json.loads(data)["response"]
    assert response["uid"] == "uid-team-dry-DELETE"
    assert response["allowed"] is True
    assert response["warnings"] == [
        "nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-dry`"
    ]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{not json", "the body is not JSON"),
        (b'{"kind": "Namespace", "apiVersion": "v1"}', "the body is not an AdmissionReview"),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}',
            "only admission.k8s.io/v1",
        ),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"name": "x"}}', "has no uid"),
        (b"x" * (3 << 20), "the body is larger than"),
    ],
    ids=["not-json", "not-a-review", "v1beta1", "no-uid", "huge"],
)
def test_bad_input_gets_a_clear_400_and_changes_nothing(
    cluster: tuple[Emulator, Path], warn: Endpoint, body: bytes, said: str
) -> None:
    emu, _ = cluster
    emu.journal.clear()
    status, data, _ = post(warn, body)
    assert status == 400
    assert said in data.decode()
    assert data.decode().startswith("bad request: ")
    assert len(data.decode().splitlines()) == 1
    assert emu.journal.entries() == []  # not a request to the cluster
    assert post(warn, b"", path="/other")[0] == 404


def test_healthz_answers_ok(warn: Endpoint) -> None:
    context = ssl.create_default_context()
    warn.ca.configure_trust(context)
    connection = HTTPSConnection("127.0.0.1", warn.port, context=context, timeout=10)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"ok\n")
        connection.request("GET", "/admission/namespaces")
        response = connection.getresponse()
        assert response.status == 405
        assert response.read() == b"method not allowed: the endpoint is POST /admission/namespaces\n"
    finally:
        connection.close()


def test_the_certificate_is_reloaded_when_its_files_change(warn: Endpoint, tmp_path: Path) -> None:
    before = served_certificate(warn)
    # cert-manager renews: a new certificate of the same CA, written over the files
    cert, key = write_pair(warn.ca, tmp_path)
    warn.key.write_bytes(key.read_bytes())
    warn.cert.write_bytes(cert.read_bytes())

    after = served_certificate(warn)

    assert after != before
    assert after == ssl.PEM_cert_to_DER_cert(
        cert.read_text().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    )
    assert served_certificate(warn) == after
    assert "certificate and key loaded again" in warn.stderr()


@pytest.fixture(scope="module")
def deny(cluster: tuple[Emulator, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    emu, kubeconfig = cluster
    with endpoint(kubeconfig, tmp_path_factory.mktemp("deny"), "--budget", BUDGET, "--mode", "deny") as served:
        configure(emu, "nsstuck", served.url(), served.ca_bundle)
        yield served


def test_deny_refuses_a_certain_case_with_the_reason(cluster: tuple[Emulator, Path], deny: Endpoint) -> None:
    emu, kubeconfig = cluster
    with_orphaned_kiali(emu, "team-refused")

    result = kubectl(kubeconfig, "delete", "ns", "team-refused", "--wait=false")

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-refused`",
        'Error from server (Forbidden): admission webhook "nsstuck.nsstuck.io" denied the request: nsstuck: deleting '
        "team-refused now would get stuck: orphaned_finalizer: kiali/kiali; see `nsstuck precheck "
        "team-refused`, or annotate the namespace nsstuck.io/delete-anyway=true to delete it anyway",
    ]
    assert not deleting(emu, "team-refused")
    [line] = logged(deny, "team-refused")
    assert line["decision"] == "denied"
    assert line["user"] == emu.user_identity
    assert line["prediction"]["cause"] == "orphaned_finalizer"
    assert line["prediction"]["complete"] is True


def test_deny_lets_the_annotated_namespace_through_with_the_warnings(
    cluster: tuple[Emulator, Path], deny: Endpoint
) -> None:
    emu, kubeconfig = cluster
    with_orphaned_kiali(emu, "team-anyway", annotations={"nsstuck.io/delete-anyway": "true"})

    result = kubectl(kubeconfig, "delete", "ns", "team-anyway", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert warnings(result) == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-anyway`"
    ]
    assert deleting(emu, "team-anyway")
    [line] = logged(deny, "team-anyway")
    assert (line["decision"], line["mode"], line["user"]) == ("let-through", "deny", emu.user_identity)


def test_deny_lets_a_clean_namespace_go(cluster: tuple[Emulator, Path], deny: Endpoint) -> None:
    emu, kubeconfig = cluster
    namespace(emu, "team-clean-too")
    result = kubectl(kubeconfig, "delete", "ns", "team-clean-too", "--wait=false")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert logged(deny, "team-clean-too") == []


def test_with_the_endpoint_stopped_deletes_go_ahead_unwarned(cluster: tuple[Emulator, Path], deny: Endpoint) -> None:
    emu, kubeconfig = cluster
    stop(deny.process)
    assert deny.process.returncode == 0  # SIGTERM: a clean stop
    assert "admission: stopped" in deny.stderr()
    with_orphaned_kiali(emu, "team-unwarned")

    result = kubectl(kubeconfig, "delete", "ns", "team-unwarned", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert wait_for(lambda: deleting(emu, "team-unwarned"), 5, "the namespace to be deleting")


def logged(served: Endpoint, name: str) -> list[dict[str, Any]]:
    """The structured decision lines the endpoint wrote about namespace `name`."""
    lines = []
    for text in served.stderr().splitlines():
        start = text.find('{"decision"')
        if start >= 0:
            line = json.loads(text[start:])
            if line["namespace"] == name:
                lines.append(line)
    return lines
