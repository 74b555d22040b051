"""Validating webhooks called for real on a namespace DELETE (tests/fakes/kubeapi/webhookcalls.py).

A small TLS webhook server, written here, answers AdmissionReviews (allow with warnings, deny, sleep
past the timeout, close the connection); the emulator calls it as the API server does, and the real
``kubernetes`` client and the real ``kubectl`` show what a user sees.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.celsubset import CelError, evaluate
from tests.fakes.kubeapi.pytest_plugin import make_api_client

from ._api_support import KUBECTL, Raw, admin, emu, kubectl, make_ns

__all__ = ["admin", "emu"]

SERVICE_DNS = "guard.webhooks.svc"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class WebhookServer:
    """A TLS AdmissionReview server: ``answers[path]`` gives the response for a review's request (None:
    close the connection without answering); ``seen`` keeps what was received."""

    ca: trustme.CA
    port: int = 0
    answers: dict[str, Answer] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)

    def reviews(self, path: str) -> list[dict[str, Any]]:
        return [body["request"] for got, _, body in self.seen if urlsplit(got).path == path]


def _handler(hooks: WebhookServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            hooks.seen.append((self.path, dict(self.headers.items()), review))
            response = hooks.answers[urlsplit(self.path).path](review["request"])
            if response is None:
                self.close_connection = True
                return
            body = json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], **response},
                }
            ).encode()
            with contextlib.suppress(OSError):  # a caller that gave up
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    return Handler


@contextlib.contextmanager
def webhook_server(*names: str) -> Iterator[WebhookServer]:
    """Serve over TLS with a certificate of a fresh CA for 127.0.0.1 and ``names``."""
    ca = trustme.CA()
    hooks = WebhookServer(ca)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*(names or ("127.0.0.1",))).configure_cert(context)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hooks))
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    hooks.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield hooks
    finally:
        hooks.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def hooks() -> Iterator[WebhookServer]:
    with webhook_server("127.0.0.1") as server:
        yield server


def allow(*warnings: str) -> Answer:
    return lambda _req: {"allowed": True, "warnings": list(warnings)}


def deny(status: dict[str, Any], *warnings: str) -> Answer:
    return lambda _req: {"allowed": False, "status": status, "warnings": list(warnings)}


def configure(admin: Raw, name: str, client_config: dict[str, Any], **fields: Any) -> None:
    hook = {
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **fields,
    }
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name.replace(".", "-")},
        "webhooks": [hook],
    }
    resp = admin.post(VWC, body)
    assert resp.status == 201, resp.raw


def url_config(hooks: WebhookServer, path: str, *, ca_bundle: str | None = None) -> dict[str, Any]:
    return {"url": hooks.url(path), "caBundle": ca_bundle if ca_bundle is not None else hooks.ca_bundle}


def delete(emu: Emulator, name: str, **kwargs: Any) -> tuple[int, list[str], dict[str, Any]]:
    """DELETE through the real client: the status, the Warning headers and the body (or the Status)."""
    api = make_api_client(emu)
    try:
        try:
            data, status, headers = client.CoreV1Api(api).delete_namespace_with_http_info(
                name, _preload_content=False, **kwargs
            )
        except ApiException as exc:
            return exc.status, exc.headers.getlist("Warning"), json.loads(exc.body)
        return status, headers.getlist("Warning"), json.loads(data.data)
    finally:
        api.close()


def namespace(admin: Raw, name: str) -> dict[str, Any]:
    resp = admin.get(f"/api/v1/namespaces/{name}")
    assert resp.status == 200, resp.raw
    out: dict[str, Any] = resp.json
    return out


def test_warnings_are_answered_and_the_review_is_the_api_servers(
    emu: Emulator, admin: Raw, hooks: WebhookServer
) -> None:
    hooks.answers["/warn"] = allow('pods still run in "team-a"', "see nsstuck precheck team-a", "")
    configure(admin, "warn.nsstuck.test", url_config(hooks, "/warn"))
    created = make_ns(admin, "team-a", labels={"team": "a"})

    status, warnings, body = delete(emu, "team-a", propagation_policy="Background")

    assert status == 200
    assert warnings == ['299 - "pods still run in \\"team-a\\""', '299 - "see nsstuck precheck team-a"']
    assert body["metadata"]["deletionTimestamp"]
    assert namespace(admin, "team-a")["status"]["phase"] == "Terminating"
    [(path, headers, review)] = hooks.seen
    assert path == "/warn?timeout=10s"
    assert headers["Host"] == f"127.0.0.1:{hooks.port}"
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    request = review["request"]
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Namespace"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "namespaces"}
    assert (request["name"], request["namespace"], request["operation"]) == ("team-a", "team-a", "DELETE")
    assert request["userInfo"]["username"] == emu.user_identity
    assert "system:authenticated" in request["userInfo"]["groups"]
    assert request["object"] is None
    assert request["oldObject"]["metadata"]["uid"] == created["metadata"]["uid"]
    assert request["oldObject"]["status"]["phase"] == "Active"
    assert request["dryRun"] is False
    assert request["options"] == {
        "kind": "DeleteOptions",
        "apiVersion": "meta.k8s.io/v1",
        "propagationPolicy": "Background",
    }
    assert len(request["uid"]) == 36


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        ({"code": 403, "message": "team-a is protected"}, 403, "team-a is protected"),
        ({"reason": "Protected"}, 400, "Protected"),
    ],
    ids=["webhook-code", "code-raised-to-400"],
)
def test_a_denial_refuses_the_delete_with_the_webhooks_status(
    emu: Emulator, admin: Raw, hooks: WebhookServer, *, status: dict[str, Any], code: int, message: str
) -> None:
    hooks.answers["/deny"] = deny(status, "denied, and said so")
    configure(admin, "deny.nsstuck.test", url_config(hooks, "/deny"))
    make_ns(admin, "team-a")

    got, warnings, body = delete(emu, "team-a")

    assert got == code
    assert body["message"] == f'admission webhook "deny.nsstuck.test" denied the request: {message}'
    assert body["status"] == "Failure"
    assert warnings == ['299 - "denied, and said so"']
    assert "deletionTimestamp" not in namespace(admin, "team-a")["metadata"]


def test_a_dead_webhook_fails_closed_or_open_by_failure_policy(emu: Emulator, admin: Raw, hooks: WebhookServer) -> None:
    hooks.answers["/close"] = lambda _req: None
    configure(admin, "closed.nsstuck.test", url_config(hooks, "/close"))
    make_ns(admin, "fail-closed")

    code, _, body = delete(emu, "fail-closed")

    assert code == 500
    assert body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "closed.nsstuck.test": failed to call webhook: '
        f'Post "https://127.0.0.1:{hooks.port}/close?timeout=10s": EOF'
    )
    assert "deletionTimestamp" not in namespace(admin, "fail-closed")["metadata"]

    admin.delete(f"{VWC}/closed-nsstuck-test")
    configure(admin, "ignored.nsstuck.test", url_config(hooks, "/close"), failurePolicy="Ignore")
    code, warnings, _ = delete(emu, "fail-closed")
    assert (code, warnings) == (200, [])
    assert namespace(admin, "fail-closed")["metadata"]["deletionTimestamp"]


def test_nothing_listening_is_connection_refused(emu: Emulator, admin: Raw, hooks: WebhookServer) -> None:
    with webhook_server() as gone:
        port = gone.port
    configure(admin, "gone.nsstuck.test", {"url": f"https://127.0.0.1:{port}/x", "caBundle": hooks.ca_bundle})
    make_ns(admin, "team-a")

    _, _, body = delete(emu, "team-a")

    assert body["message"].endswith(
        f'Post "https://127.0.0.1:{port}/x?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )


@pytest.mark.timing
def test_a_webhook_past_its_timeout_is_a_failed_call_within_timeout_seconds(
    emu: Emulator, admin: Raw, hooks: WebhookServer
) -> None:
    def slow(_req: dict[str, Any]) -> dict[str, Any]:
        hooks.sleep(5)
        return {"allowed": True}

    hooks.answers["/slow"] = slow
    configure(admin, "slow.nsstuck.test", url_config(hooks, "/slow"), timeoutSeconds=1)
    make_ns(admin, "team-a")

    started = time.monotonic()
    code, _, body = delete(emu, "team-a")
    took = time.monotonic() - started

    assert code == 500
    assert body["message"].endswith(f'Post "https://127.0.0.1:{hooks.port}/slow?timeout=1s": context deadline exceeded')
    assert 1.0 <= took < 2.0


def test_timeout_seconds_past_30_is_refused_when_configured(admin: Raw, hooks: WebhookServer) -> None:
    hook = {
        "name": "long.nsstuck.test",
        "clientConfig": url_config(hooks, "/allow"),
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 31,
    }
    body = {"metadata": {"name": "long"}, "webhooks": [hook]}

    resp = admin.post(VWC, body)

    assert resp.status == 422
    assert resp.json["message"] == (
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "long" is invalid: '
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
    )


def test_a_ca_bundle_that_does_not_match_is_a_failed_call(emu: Emulator, admin: Raw, hooks: WebhookServer) -> None:
    hooks.answers["/allow"] = allow("never seen")
    other = base64.b64encode(trustme.CA().cert_pem.bytes()).decode()
    configure(admin, "strange.nsstuck.test", url_config(hooks, "/allow", ca_bundle=other))
    make_ns(admin, "team-a")

    code, warnings, body = delete(emu, "team-a")

    assert (code, warnings) == (500, [])
    assert body["message"].endswith(
        f'Post "https://127.0.0.1:{hooks.port}/allow?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert hooks.seen == []


def test_a_routed_service_is_called_by_its_dns_name(emu: Emulator, admin: Raw) -> None:
    with webhook_server(SERVICE_DNS) as hooks, webhook_server("other.webhooks.svc") as wrong:
        for server in (hooks, wrong):
            server.answers["/validate"] = allow("from the service")
        make_ns(admin, "webhooks")
        for name in ("guard", "wrong"):
            resp = admin.post(
                "/api/v1/namespaces/webhooks/services",
                {"metadata": {"name": name}, "spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
            )
            assert resp.status == 201, resp.raw
            resp = admin.put(
                f"/api/v1/namespaces/webhooks/endpoints/{name}",
                {
                    "metadata": {"name": name},
                    "subsets": [{"addresses": [{"ip": "10.0.0.7"}], "ports": [{"port": 8443}]}],
                },
            )
            assert resp.status in (200, 201), resp.raw
        emu.route_service("webhooks", "guard", ("127.0.0.1", hooks.port))
        emu.route_service("webhooks", "wrong", ("127.0.0.1", wrong.port))
        service = {"namespace": "webhooks", "name": "guard", "path": "/validate"}
        configure(admin, "svc.nsstuck.test", {"service": service, "caBundle": hooks.ca_bundle})
        make_ns(admin, "team-a")

        assert delete(emu, "team-a")[:2] == (200, ['299 - "from the service"'])
        [(path, headers, _)] = hooks.seen
        assert (path, headers["Host"]) == ("/validate?timeout=10s", f"{SERVICE_DNS}:443")

        admin.delete(f"{VWC}/svc-nsstuck-test")
        service = {"namespace": "webhooks", "name": "wrong", "path": "/validate"}
        configure(admin, "wrong.nsstuck.test", {"service": service, "caBundle": wrong.ca_bundle})
        make_ns(admin, "team-b")
        code, _, body = delete(emu, "team-b")
        assert code == 500
        assert body["message"].endswith(
            'Post "https://wrong.webhooks.svc:443/validate?timeout=10s": tls: failed to verify certificate: '
            "x509: certificate is valid for other.webhooks.svc, not wrong.webhooks.svc"
        )
        assert wrong.seen == []


def test_namespace_selector_and_match_conditions_choose_what_is_reviewed(
    emu: Emulator, admin: Raw, hooks: WebhookServer
) -> None:
    hooks.answers["/deny"] = deny({"code": 403, "message": "no"})
    configure(
        admin,
        "selective.nsstuck.test",
        url_config(hooks, "/deny"),
        namespaceSelector={"matchExpressions": [{"key": "keep", "operator": "NotIn", "values": ["no"]}]},
        matchConditions=[
            {"name": "not-system", "expression": "!request.name.startsWith('kube-')"},
            {"name": "not-scratch", "expression": "!has(oldObject.metadata.labels.scratch)"},
        ],
    )
    for name, labels in (("excluded", {"keep": "no"}), ("kube-x", {}), ("scratch", {"scratch": "1"}), ("team", {})):
        make_ns(admin, name, labels=labels)

    assert [delete(emu, n)[0] for n in ("excluded", "kube-x", "scratch", "team")] == [200, 200, 200, 403]
    assert [r["name"] for r in hooks.reviews("/deny")] == ["team"]


@pytest.mark.parametrize(("policy", "code"), [("Fail", 403), ("Ignore", 200)])
def test_an_unsupported_match_condition_is_an_evaluation_error(
    emu: Emulator, admin: Raw, hooks: WebhookServer, policy: str, code: int
) -> None:
    hooks.answers["/deny"] = deny({"code": 403, "message": "no"})
    expression = "authorizer.group('').resource('namespaces').check('delete').allowed()"
    configure(
        admin,
        "cel.nsstuck.test",
        url_config(hooks, "/deny"),
        failurePolicy=policy,
        matchConditions=[{"name": "authz", "expression": expression}],
    )
    make_ns(admin, "team-a")

    got, _, body = delete(emu, "team-a")

    assert got == code
    if policy == "Fail":
        assert body["message"] == (
            f"namespaces \"team-a\" is forbidden: expression '{expression}' resulted in error: "
            "the emulator does not support the variable authorizer"
        )
    assert hooks.seen == []


def test_warnings_are_deduplicated_and_truncated_as_the_recorder_does(
    emu: Emulator, admin: Raw, hooks: WebhookServer
) -> None:
    long = [f"{i:02d}" + "x" * 298 for i in range(20)]
    hooks.answers["/many"] = allow(long[0], *long)
    configure(admin, "many.nsstuck.test", url_config(hooks, "/many"))
    make_ns(admin, "team-a")

    _, warnings, _ = delete(emu, "team-a")

    # 4096 characters at most: past them every warning is cut to 256, and those beyond dropped
    assert warnings == [f'299 - "{text[:256]}"' for text in long[:16]]


def test_a_dry_run_reviews_with_dry_run_true_and_deletes_nothing(
    emu: Emulator, admin: Raw, hooks: WebhookServer
) -> None:
    hooks.answers["/warn"] = allow("would be stuck")
    configure(admin, "dry.nsstuck.test", url_config(hooks, "/warn"), sideEffects="NoneOnDryRun")
    make_ns(admin, "team-a")

    code, warnings, body = delete(emu, "team-a", dry_run="All")

    assert (code, warnings) == (200, ['299 - "would be stuck"'])
    assert body["metadata"]["deletionTimestamp"]
    assert "deletionTimestamp" not in namespace(admin, "team-a")["metadata"]
    [review] = hooks.reviews("/warn")
    assert review["dryRun"] is True
    assert review["options"]["dryRun"] == ["All"]


def test_a_dry_run_is_refused_by_a_webhook_with_side_effects(emu: Emulator, admin: Raw, hooks: WebhookServer) -> None:
    hooks.answers["/warn"] = allow("never seen")
    configure(admin, "effects.nsstuck.test", url_config(hooks, "/warn"), sideEffects="Some", failurePolicy="Ignore")
    make_ns(admin, "team-a")

    code, _, body = delete(emu, "team-a", dry_run="All")

    assert (code, body["message"]) == (400, 'admission webhook "effects.nsstuck.test" does not support dry run')
    assert hooks.seen == []


@pytest.mark.parametrize("dry_run", [False, True], ids=["delete", "server-dry-run"])
@pytest.mark.kubectl
@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed")
def test_kubectl_prints_the_warnings(
    emu: Emulator, admin: Raw, hooks: WebhookServer, tmp_path: Path, dry_run: bool
) -> None:
    hooks.answers["/warn"] = allow("nsstuck: v1beta1.metrics.k8s.io cannot serve", 'see "nsstuck precheck team-a"')
    configure(admin, "warn.nsstuck.test", url_config(hooks, "/warn"))
    make_ns(admin, "team-a")
    kubeconfig = emu.write_kubeconfig(tmp_path / "kc")

    args = ["delete", "ns", "team-a", "--wait=false", *(["--dry-run=server"] if dry_run else [])]
    result = kubectl(kubeconfig, *args)

    assert result.returncode == 0, result.stderr
    suffix = " (server dry run)" if dry_run else ""
    assert result.stdout.strip() == f'namespace "team-a" deleted{suffix}'
    assert result.stderr.splitlines() == [
        "Warning: nsstuck: v1beta1.metrics.k8s.io cannot serve",
        'Warning: see "nsstuck precheck team-a"',
    ]
    assert bool(namespace(admin, "team-a")["metadata"].get("deletionTimestamp")) is not dry_run
    assert [r["dryRun"] for r in hooks.reviews("/warn")] == [dry_run]


@pytest.mark.kubectl
@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed")
def test_kubectl_shows_a_denial_and_its_warning(
    emu: Emulator, admin: Raw, hooks: WebhookServer, tmp_path: Path
) -> None:
    hooks.answers["/deny"] = deny({"code": 403, "reason": "Forbidden", "message": "team-a is protected"}, "asked")
    configure(admin, "deny.nsstuck.test", url_config(hooks, "/deny"))
    make_ns(admin, "team-a")

    result = kubectl(emu.write_kubeconfig(tmp_path / "kc"), "delete", "ns", "team-a", "--wait=false")

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Warning: asked",
        'Error from server (Forbidden): admission webhook "deny.nsstuck.test" denied the request: team-a is protected',
    ]


CEL_ENV = {
    "request": {"name": "team-a", "userInfo": {"username": "alice", "groups": ["dev", "system:authenticated"]}},
    "object": None,
    "oldObject": {"metadata": {"name": "team-a", "labels": {"tier": "gold"}}},
}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("'dev' in request.userInfo.groups && request.name == \"team-a\"", True),
        ("request.name in ['kube-system', 'kube-public']", False),
        ("oldObject.metadata.labels['tier'] != 'gold' || size(request.userInfo.groups) == 2", True),
        ("has(oldObject.metadata.annotations)", False),
        ("request.userInfo.username.endsWith('ce') && !request.name.contains('b')", True),
        ("false && oldObject.metadata.missing == 1", False),  # CEL's && absorbs the error
        ("true || object.metadata.name == 'x'", True),
        ("'tier' in oldObject.metadata.labels && request.userInfo.groups[1].size() == 20", True),
    ],
)
def test_the_cel_subset(expression: str, value: bool) -> None:
    assert evaluate(expression, CEL_ENV) is value


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("oldObject.metadata.annotations['x'] == 'y'", "no such key: annotations"),
        ("object.metadata.name == 'x'", "no such key: metadata"),
        ("request.userInfo.groups.exists(g, g == 'dev')", "the emulator does not support the function exists()"),
        ("size(request.name) > 3", "unsupported expression"),
    ],
)
def test_the_cel_subset_refuses_what_it_cannot_evaluate(expression: str, error: str) -> None:
    with pytest.raises(CelError, match=re.escape(error)):
        evaluate(expression, CEL_ENV)
