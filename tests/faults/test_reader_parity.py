"""The Reader (GETs over http.client, bot.kube.requesting) against the official client's REST layer:
the same answers and the same errors, for the same requests on the same emulated cluster.

Every case is run twice on one kubeconfig: through a connection with its Reader, and through one whose
Reader is taken away, so that the transport sends the GET through the kubernetes client and urllib3
as it did before the Reader existed. What the transport returns or raises must be equal (the document,
the Content-Type, and every field of the CallError: kind, message, status, body, reason, Retry-After,
dropped), and what the server saw of each request the same (path, query and headers).
"""

from __future__ import annotations

import base64
import copy
import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import certifi
import pytest
import yaml
from urllib3.exceptions import InsecureRequestWarning

from bench.diagnose import NAMESPACE as NAMESPACE_BENCH
from bench.diagnose import build_cluster
from bot.cli import _write_json
from bot.domain.refs import ClusterName
from bot.kube.collecting import CollectOptions, _Calls, _Loop
from bot.kube.connecting import ClusterTarget, ConnectionCache, Impersonation, connect
from bot.kube.requesting import NotConnected, Reader
from bot.kube.transport import AGGREGATED_DISCOVERY, JSON, METADATA_LIST, CallError, CallKind, Transport
from bot.services.diagnosing import diagnose_namespace
from bot.services.reporting import render_text
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.emulator import USER_IDENTITY

NAMESPACE = "parity"
NS_PATH = f"/api/v1/namespaces/{NAMESPACE}"
CM_LIST = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    emu = Emulator(clock=FakeClock(), seed=7, controllers=False)
    emu.start()
    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(3):
        http.post(f"{CM_LIST}", {"metadata": {"name": f"cm-{i}", "labels": {"app": "a", "n": str(i)}}})
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture(autouse=True)
def _clean_knobs(emu: Emulator) -> Iterator[None]:
    yield
    emu.knobs.clear()


def _pair(kubeconfig: Path) -> tuple[Transport, Transport]:
    """A transport through the Reader, and one through the client (its Reader taken away)."""
    target = ClusterTarget(ClusterName("parity"), kubeconfig)
    fast, slow = connect(target), connect(target)
    assert fast.reader is not None, "this kubeconfig must be one the Reader serves"
    slow.reader = None
    return Transport(fast, call_timeout=5.0), Transport(slow, call_timeout=5.0)


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "answer", call()
    except CallError as e:
        return "error", e


def _both(emu: Emulator, kubeconfig: Path, call: Callable[[Transport], Any]) -> tuple[Any, Any]:
    fast, slow = _pair(kubeconfig)
    try:
        return _outcome(lambda: call(fast)), _outcome(lambda: call(slow))
    finally:
        fast.connection.close()
        slow.connection.close()


def _same(emu: Emulator, kubeconfig: Path, call: Callable[[Transport], Any]) -> tuple[str, Any]:
    by_reader, by_client = _both(emu, kubeconfig, call)
    assert by_reader == by_client
    kind, outcome = by_reader
    return str(kind), outcome


@pytest.fixture(scope="module")
def kubeconfig(emu: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emu.write_kubeconfig(tmp_path_factory.mktemp("parity") / "config")


def test_answers_are_the_same(emu: Emulator, kubeconfig: Path) -> None:
    query = {"limit": "2", "labelSelector": "app=a,n in (0,1)"}
    emu.journal.clear()
    kind, doc = _same(emu, kubeconfig, lambda t: t.get(CM_LIST, query, accept=METADATA_LIST))
    assert kind == "answer", doc
    assert doc["kind"] == "PartialObjectMetadataList"
    assert len(doc["items"]) == 2
    kind, (_discovery, content_type) = _same(
        emu, kubeconfig, lambda t: t.get_negotiated("/apis", accept=AGGREGATED_DISCOVERY)
    )
    assert kind == "answer"
    assert content_type.startswith("application/json")
    assert _same(emu, kubeconfig, lambda t: t.get(NS_PATH))[1]["metadata"]["name"] == NAMESPACE
    seen = [(j.method, j.path, j.query, j.accept) for j in emu.journal.entries()]
    assert len(seen) == 6
    assert seen[0] == seen[1]
    assert seen[2] == seen[3]
    assert seen[4] == seen[5]


def test_the_requests_are_the_same_to_the_byte(tmp_path: Path) -> None:
    """Request line and headers (names, values, order) as a plain HTTP server receives them."""
    received: list[tuple[str, list[tuple[str, str]]]] = []

    class Recording(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            received.append((self.requestline, list(self.headers.items())))
            body = b'{"kind": "Namespace"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = tmp_path / "config"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                    "users": [{"name": "u", "user": {"token": "secret-token"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        query = {"limit": "500", "labelSelector": "a=b c,d!=e/f", "continue": "x+y=="}
        _same(
            Emulator.__new__(Emulator),
            config,
            lambda t: t.get("/api/v1/namespaces/a%20b/pods", query, accept=METADATA_LIST),
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert len(received) == 2
    assert received[0] == received[1]
    assert ("authorization", "Bearer secret-token") in received[0][1]  # as the client names it


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (404, None, None),
        (
            403,
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no", "reason": "Forbidden"},
            None,
        ),
        (500, "upstream <b>broken</b>", None),
        (503, "", {"Retry-After": "3"}),
        (429, {"kind": "Status", "message": "Too many requests", "reason": "TooManyRequests"}, {"Retry-After": "1"}),
        (401, None, None),
        (302, "", {"Location": "/elsewhere"}),
    ],
)
def test_error_statuses_are_said_the_same(
    emu: Emulator, kubeconfig: Path, status: int, body: Any, headers: dict[str, str] | None
) -> None:
    emu.knobs.inject_fault(rf"^GET {NS_PATH}$", status, body, headers)
    fast, slow = _pair(kubeconfig)
    try:
        by_reader = _outcome(lambda: fast._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2))
        by_client = _outcome(lambda: slow._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2))
        assert by_reader[0] == "error"
        assert by_reader == by_client
        assert fast.connection.refused == slow.connection.refused == (status == 401)
    finally:
        fast.connection.close()
        slow.connection.close()


def test_a_body_that_is_not_json_is_said_the_same(emu: Emulator, kubeconfig: Path) -> None:
    emu.knobs.inject_fault(rf"^GET {NS_PATH}$", 200, "<html>proxy login</html>")
    kind, error = _same(
        emu, kubeconfig, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2)
    )
    assert kind == "error"
    assert error.message == (
        f"the API server answered 200 with a body that is not JSON (cut short or garbled) for GET {NS_PATH}"
    )


@pytest.mark.parametrize("announced", [False, True], ids=["chunked", "announced"])
def test_an_error_answer_over_the_limit_is_refused_the_same(emu: Emulator, kubeconfig: Path, announced: bool) -> None:
    """A 500 whose body never ends (or announces more than the limit): neither path reads it past
    NSSTUCK_MAX_ANSWER_MB. The client would read an error answer whole, in ApiException, before the
    transport could look at it (issue 36: gigabytes within a call's deadline)."""
    limit = 1024 * 1024

    def endless() -> Iterator[bytes]:
        yield b'{"kind":"Status","message":"'
        while True:
            yield b"x" * 65536

    headers = {"Content-Length": str(64 * 1024 * 1024)} if announced else None
    emu.knobs.rewrite(rf"^GET {NS_PATH}$", status=500, headers=headers, body=endless)
    fast, slow = _pair(kubeconfig)
    fast.max_answer = slow.max_answer = limit
    try:
        by_reader = _outcome(lambda: fast.get(NS_PATH, timeout=5.0))
        by_client = _outcome(lambda: slow.get(NS_PATH, timeout=5.0))
    finally:
        fast.connection.close()
        slow.connection.close()
    assert by_reader == by_client
    kind, error = by_reader
    assert kind == "error"
    assert error.message == f"the answer to GET {NS_PATH} was larger than NSSTUCK_MAX_ANSWER_MB (1 MiB); read stopped"


def test_an_error_answer_under_the_limit_is_said_by_the_client_as_before(emu: Emulator, kubeconfig: Path) -> None:
    """The client's error answer read by us is the ApiException it was: status, message, Retry-After."""
    emu.knobs.inject_fault(
        rf"^GET {NS_PATH}$",
        503,
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd is away", "code": 503},
        headers={"Retry-After": "0"},
        times=2,
    )
    kind, error = _same(
        emu, kubeconfig, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2)
    )
    assert kind == "error"
    assert (error.status, error.message, error.retry_after) == (503, "etcd is away", 0.0)


def test_a_reset_connection_is_dropped_the_same(emu: Emulator, kubeconfig: Path) -> None:
    emu.knobs.inject_fault(rf"^GET {NS_PATH}$", 500, reset_connection=True)
    kind, error = _same(
        emu, kubeconfig, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2)
    )
    assert kind == "error"
    assert error.dropped


def test_a_read_timeout_is_said_the_same(emu: Emulator, kubeconfig: Path) -> None:
    emu.knobs.latency(1500, match=rf"^GET {NS_PATH}$")
    kind, error = _same(
        emu, kubeconfig, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=0.3)
    )
    assert kind == "error"
    assert error.message == "timed out after 0.3s (ReadTimeoutError)"


def test_a_timeout_the_deadline_cut_short_is_said_as_the_deadline(emu: Emulator, kubeconfig: Path) -> None:
    """A call whose own timeout is what was left of the collection's deadline fails, on either path, in
    the words of a call still running at the deadline: whether the loop or the call notices it first
    must not change the gap. A call that failed before the deadline keeps its own words."""
    emu.knobs.latency(1500, match=rf"^GET {NS_PATH}$")

    def through_a_loop(t: Transport, budget: float) -> Any:
        with _Calls(1, wait_until=time.monotonic() + budget + 1) as pool:
            loop = _Loop(pool, time.monotonic() + budget, budget=budget)
            return loop._to_deadline(lambda: t.get(NS_PATH, timeout=5.0, deadline=loop.deadline))()

    kind, error = _same(emu, kubeconfig, lambda t: through_a_loop(t, 0.4))
    assert kind == "error"
    assert (error.kind, error.message) == (CallKind.TIMEOUT, "not finished within 0.4s")

    kind, error = _same(
        emu,
        kubeconfig,
        lambda t: _Loop(_Calls(1, 0.0), time.monotonic() + 30, budget=30)._to_deadline(
            lambda: t.get(NS_PATH, timeout=0.3)
        )(),
    )
    assert kind == "error"
    assert error.message == "timed out after 0.3s (ReadTimeoutError)"


def test_a_silent_server_times_out_the_same(emu: Emulator, tmp_path: Path) -> None:
    """A server that accepts the connection and never speaks: the TLS handshake times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        config = _rewritten(emu, tmp_path, server=f"https://127.0.0.1:{listener.getsockname()[1]}")
        kind, error = _same(
            emu, config, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=0.3)
        )
        assert kind == "error"
        assert "timed out after 0.3s" in error.message
    finally:
        stop.set()
        thread.join()
        listener.close()
        for sock in accepted:
            sock.close()


def test_a_refused_connection_and_an_unknown_ca_are_said_by_the_client(emu: Emulator, tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    refused = _rewritten(emu, tmp_path, server=f"https://127.0.0.1:{port}")
    kind, error = _same(emu, refused, lambda t: t.get(NS_PATH))
    assert kind == "error"
    assert error.message.startswith("cannot connect: [Errno 111]")

    # the public roots: not the emulator's own CA
    wrong_ca = _rewritten(emu, tmp_path, ca_file=certifi.where())
    kind, error = _same(emu, wrong_ca, lambda t: t.get(NS_PATH))
    assert kind == "error"
    assert error.message.startswith("cannot connect: TLS failed: [SSL: CERTIFICATE_VERIFY_FAILED]")


def test_a_certificate_for_another_name_is_refused_by_the_reader_itself(emu: Emulator, tmp_path: Path) -> None:
    """The emulator's certificate names localhost and 127.0.0.1: verified against another name (the
    kubeconfig's tls-server-name), the Reader's own handshake refuses it, before anything is sent, and
    the client then says why; against one of its names, the Reader answers."""
    other = _rewritten(emu, tmp_path, server_name="not-the-emulator.example")
    fast, _slow = _pair(other)
    try:
        assert fast.connection.reader is not None
        with pytest.raises(NotConnected):
            fast.connection.reader.get(NS_PATH, None, accept=JSON, timeout=5.0)
    finally:
        fast.connection.close()
        _slow.connection.close()
    kind, error = _same(emu, other, lambda t: t.get(NS_PATH))
    assert kind == "error"
    assert "CERTIFICATE_VERIFY_FAILED" in error.message
    assert "not-the-emulator.example" in error.message

    named = _rewritten(emu, tmp_path, server_name="localhost")
    kind, doc = _same(emu, named, lambda t: t.get(NS_PATH))
    assert kind == "answer"
    assert doc["metadata"]["name"] == NAMESPACE


def test_skipping_tls_verification_and_plain_http_answer_the_same(emu: Emulator, tmp_path: Path) -> None:
    insecure = _rewritten(emu, tmp_path, ca=None)
    with pytest.warns(InsecureRequestWarning) as warned:
        kind, doc = _same(emu, insecure, lambda t: t.get(NS_PATH))
    assert kind == "answer"
    assert doc["metadata"]["name"] == NAMESPACE
    assert len({str(w.message) for w in warned}) == 1
    assert len(warned) == 2
    plain = emu.write_kubeconfig(tmp_path / "plain", tls=False)
    kind, doc = _same(emu, plain, lambda t: t.get(NS_PATH))
    assert kind == "answer"
    assert doc["metadata"]["name"] == NAMESPACE


def test_a_kept_connection_closed_by_the_server_is_not_used(emu: Emulator, kubeconfig: Path) -> None:
    """A connection the server closed while it was idle is replaced, as urllib3 replaces it: no error."""
    fast, _ = _pair(kubeconfig)
    try:
        fast.get(NS_PATH)
        reader = fast.connection.reader
        assert reader is not None
        assert len(reader._idle) == 1
        kept = reader._idle[0]
        emu.knobs.inject_fault(rf"^GET {NS_PATH}/never$", 500)  # any knob: the emulator closes nothing by it
        assert kept.sock is not None
        kept.sock.shutdown(socket.SHUT_RDWR)  # as a server closing it looks from here: readable, at its end
        assert fast.get(NS_PATH)["metadata"]["name"] == NAMESPACE
        assert reader._idle
        assert reader._idle[0] is not kept
    finally:
        fast.connection.close()


def _rewritten(
    emu: Emulator,
    tmp_path: Path,
    *,
    server: str | None = None,
    ca: bool | None = False,
    ca_file: str | None = None,
    server_name: str | None = None,
) -> Path:
    """The emulator's kubeconfig with another server URL, or another CA file, or (`ca=None`) without
    TLS verification, or another name to verify the server's certificate against."""
    path = emu.write_kubeconfig(tmp_path / f"config-{len(list(tmp_path.iterdir()))}")
    document = yaml.safe_load(path.read_text())
    cluster = document["clusters"][0]["cluster"]
    if server is not None:
        cluster["server"] = server
    if ca is None:
        cluster.pop("certificate-authority-data")
        cluster["insecure-skip-tls-verify"] = True
    if ca_file is not None:
        cluster.pop("certificate-authority-data")
        cluster["certificate-authority"] = ca_file
    if server_name is not None:
        cluster["tls-server-name"] = server_name
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_whole_report_is_the_same_byte_for_byte(tmp_path: Path) -> None:
    """`nsstuck diagnose` on a CRD-heavy namespace (the benchmark's cluster, smaller), through the Reader
    and through the client: the JSON report and the text report are the same, byte for byte."""
    emu = Emulator(clock=FakeClock(), seed=3, controllers=False)
    emu.start()
    try:
        build_cluster(emu, types=12, objects=150)
        kubeconfig = emu.write_kubeconfig(tmp_path / "config")
        target = ClusterTarget(ClusterName("emulator"), kubeconfig)
        reports = []
        at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
        for by_reader in (True, False):
            cache = ConnectionCache()
            with cache.lease(target) as connection:
                assert connection.reader is not None
                if not by_reader:
                    connection.reader = None
                options = CollectOptions(workers=16)
                result = diagnose_namespace(
                    target, NAMESPACE_BENCH, options=options, clock=lambda: at, connections=cache
                )
            cache.close()
            out = io.StringIO()
            _write_json(out, result.diagnosis.to_json())
            reports.append((out.getvalue(), render_text(result.diagnosis, colour=False)))
    finally:
        emu.stop()
    (json_by_reader, text_by_reader), (json_by_client, text_by_client) = reports
    assert json_by_reader == json_by_client
    assert text_by_reader == text_by_client
    assert json_by_reader.count('"action": "remove_finalizer"') == 150  # every object, named


@contextmanager
def _answering(answer: bytes, tmp_path: Path) -> Iterator[Path]:
    """A plain-HTTP server that answers every request with these bytes, then closes the connection;
    and a kubeconfig for it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                continue
            with sock:
                sock.settimeout(5)
                received = b""
                while b"\r\n\r\n" not in received:
                    data = sock.recv(65536)
                    if not data:
                        break
                    received += data
                sock.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    config = tmp_path / f"answering-{len(list(tmp_path.iterdir()))}"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{listener.getsockname()[1]}"}}],
                "users": [{"name": "u", "user": {"token": "secret-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    try:
        yield config
    finally:
        stop.set()
        thread.join()
        listener.close()


def _once_seen(transport: Transport) -> tuple[Any, list[str]]:
    """One GET, not retried: the document and the Content-Type it came with."""
    seen: list[str] = []
    doc = transport._once(
        "GET", "/api/v1/x", query=None, body=None, content_type=JSON, timeout=2, accept=JSON, content_types=seen
    )
    return doc, seen


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    "answer",
    [
        # answers http.client and urllib3 take
        OK_HEAD + b'Content-Length: 13\r\n\r\n{"kind": "A"}',
        OK_HEAD + b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"kin\r\n8;x=y\r\nd": "B"}\r\n0\r\nTrailer: t\r\n\r\n',
        b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"kind": "C"}',
        b"HTTP/1.1 100 Continue\r\n\r\n" + OK_HEAD + b'Content-Length: 13\r\n\r\n{"kind": "D"}',
        OK_HEAD + b"Content-Type: text/plain\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
        OK_HEAD + b"Content-Length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nRetry-After: 9\r\nContent-Length: 4\r\n\r\ndown",
        b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\nContent-Length: 0\r\n\r\n",
        # and what they refuse
        b"",
        b"garbage\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        OK_HEAD + b'Content-Length: 100\r\n\r\n{"kind": "short"}',
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        OK_HEAD + b'Transfer-Encoding: chunked\r\n\r\n10\r\n{"ki',
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n3\r\n",
        OK_HEAD + b"Connection: close\r\nno colon here\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}",
        OK_HEAD + b"X-Long: " + b"x" * 70000 + b"\r\n\r\n",
        OK_HEAD + b"".join(b"X-%d: y\r\n" % i for i in range(120)) + b"\r\n",
    ],
)
def test_what_a_server_answers_is_taken_or_refused_the_same(answer: bytes, tmp_path: Path) -> None:
    with _answering(answer, tmp_path) as config:
        fast, slow = _pair(config)
        try:
            by_reader = _outcome(lambda: _once_seen(fast))
            by_client = _outcome(lambda: _once_seen(slow))
        finally:
            fast.connection.close()
            slow.connection.close()
    assert by_reader == by_client


def test_a_client_certificate_is_sent_the_same(emu: Emulator, tmp_path: Path) -> None:
    """A kubeconfig whose user is a client certificate (no token): the Reader's TLS context presents it."""
    cert, key = emu.issue_client_certificate(USER_IDENTITY)
    path = emu.write_kubeconfig(tmp_path / "config")
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert.encode()).decode(),
        "client-key-data": base64.b64encode(key.encode()).decode(),
    }
    path.write_text(yaml.safe_dump(document))
    emu.journal.clear()
    kind, doc = _same(emu, path, lambda t: t.get(NS_PATH))
    assert kind == "answer"
    assert doc["metadata"]["name"] == NAMESPACE
    assert len(emu.journal.entries()) == 2  # both were taken as the user, not as an anonymous caller


def test_what_the_reader_does_not_reproduce_stays_with_the_client(emu: Emulator, tmp_path: Path) -> None:
    """A port that is not a number, impersonation, a proxy: no Reader, the client sends as before."""
    bad_port = _rewritten(emu, tmp_path, server="https://127.0.0.1:notaport")
    fine = _rewritten(emu, tmp_path)
    for config, impersonate in ((bad_port, None), (fine, Impersonation("someone"))):
        connection = connect(ClusterTarget(ClusterName("c"), config), impersonate=impersonate)
        try:
            assert connection.reader is None
        finally:
            connection.close()
    connection = connect(ClusterTarget(ClusterName("c"), fine))
    try:
        assert connection.reader is not None
        # the client's REST layer goes through a proxy when its configuration names one (this client
        # version does not take one from a kubeconfig's proxy-url: both go straight to the server)
        configuration = copy.copy(connection.api_client.configuration)
        assert Reader.usable(configuration)
        configuration.proxy = "http://127.0.0.1:3128"
        assert not Reader.usable(configuration)
    finally:
        connection.close()


LIMIT = 1024  # bytes, for the answers below
EMPTY_LIST = b'{"kind": "XList", "items": []}'


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        (OK_HEAD + b"Content-Length: 1025\r\n\r\n" + b" " * 1025, "was larger than"),
        (
            OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"400\r\n" + b" " * 1024 + b"\r\n1\r\n \r\n0\r\n\r\n",
            "was larger than",
        ),
        (b"HTTP/1.0 200 OK\r\n\r\n" + b" " * 5000, "was larger than"),
        (OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", "came encoded (Content-Encoding: gzip)"),
        (OK_HEAD + b"Content-Encoding: deflate\r\n\r\n{}", "came encoded (Content-Encoding: deflate)"),
        # at the limit, and said to be as it is (a list, as GET /api/v1/x must answer: bot.kube.answers)
        (OK_HEAD + b"Content-Length: 1024\r\n\r\n" + EMPTY_LIST + b" " * (1024 - len(EMPTY_LIST)), ""),
        (OK_HEAD + b"Content-Encoding: identity\r\nContent-Length: %d\r\n\r\n" % len(EMPTY_LIST) + EMPTY_LIST, ""),
    ],
)
def test_an_answer_too_large_or_encoded_is_refused_the_same(answer: bytes, refusal: str, tmp_path: Path) -> None:
    """Over the largest answer (announced, chunked, or up to the close) or encoded although identity was
    asked for: the same CallError on both paths, naming what was refused; nothing decoded."""
    with _answering(answer, tmp_path) as config:
        fast, slow = _pair(config)
        fast.max_answer = slow.max_answer = LIMIT
        try:
            by_reader = _outcome(lambda: _once_seen(fast))
            by_client = _outcome(lambda: _once_seen(slow))
        finally:
            fast.connection.close()
            slow.connection.close()
    assert by_reader == by_client
    kind, outcome = by_reader
    if not refusal:
        assert kind == "answer"
        return
    assert kind == "error"
    assert outcome.kind is CallKind.CONNECTION
    assert not outcome.dropped
    assert outcome.message.startswith(f"the answer to GET /api/v1/x {refusal}")
    if "larger" in refusal:
        assert outcome.message.endswith("larger than NSSTUCK_MAX_ANSWER_MB (1024 bytes); read stopped")


def test_a_trickled_answer_times_out_at_the_call_timeout_the_same(emu: Emulator, kubeconfig: Path) -> None:
    """A body that comes a byte at a time never times a receive out: the call's timeout is the whole
    answer's, on both paths."""
    emu.knobs.trickle(rf"^GET {NS_PATH}$", interval=0.05)
    fast, slow = _pair(kubeconfig)
    took = []
    try:
        outcomes = []
        for transport in (fast, slow):
            started = time.monotonic()
            outcomes.append(
                _outcome(
                    lambda t=transport: t._once(  # type: ignore[misc]
                        "GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=0.5
                    )
                )
            )
            took.append(time.monotonic() - started)
    finally:
        fast.connection.close()
        slow.connection.close()
    assert outcomes[0] == outcomes[1]
    kind, error = outcomes[0]
    assert kind == "error"
    assert error.message == "timed out after 0.5s (ReadTimeoutError)"
    # (the trickle would last for days: 64 MiB at a byte every 50 ms; the margin is a loaded machine's)
    assert all(0.5 <= seconds < 2.0 for seconds in took), took


def test_a_gzip_labelled_answer_is_refused_the_same(emu: Emulator, kubeconfig: Path) -> None:
    """What crashed a diagnosis (zlib.error) before: refused on both paths, as a call that failed."""
    emu.knobs.rewrite(rf"^GET {NS_PATH}$", headers={"Content-Encoding": "gzip"}, body=b"\x1f\x8b not gzip")
    kind, error = _same(
        emu, kubeconfig, lambda t: t._once("GET", NS_PATH, query=None, body=None, content_type=JSON, timeout=2)
    )
    assert kind == "error"
    assert error.message == (
        f"the answer to GET {NS_PATH} came encoded (Content-Encoding: gzip) although identity was asked for;"
        " not decoded"
    )


@pytest.mark.timing
@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_headers_that_never_end_end_the_call_at_its_deadline(emu: Emulator, kubeconfig: Path, method: str) -> None:
    """Issue 36: a server that sends its status line and then trickles a header, each byte within the
    read timeout. The client's timeouts are per receive, so only the call's own watchdog ends it: at its
    deadline, on both paths (a write goes through the client only), said as a timeout."""
    emu.knobs.trickle(rf"^{method} {NS_PATH}$", interval=0.05, headers=True)
    fast, slow = _pair(kubeconfig)
    body = {"metadata": {"labels": {"touched": "yes"}}} if method == "PATCH" else None
    kind = "application/merge-patch+json" if method == "PATCH" else JSON
    try:
        for transport in (slow, fast) if method == "GET" else (slow,):
            started = time.monotonic()
            with pytest.raises(CallError) as raised:
                transport._once(method, NS_PATH, query=None, body=body, content_type=kind, timeout=1.0)
            took = time.monotonic() - started
            assert raised.value.kind is CallKind.TIMEOUT, raised.value.message
            assert "timed out after 1s" in raised.value.message
            assert took < 1.5, f"{method} through the {'client' if transport is slow else 'Reader'} took {took:.2f} s"
    finally:
        fast.connection.close()
        slow.connection.close()
