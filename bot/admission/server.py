"""Serving the namespace-delete admission webhook over TLS: `POST /admission/namespaces` (and `GET /healthz`).

The server is cheroot (CherryPy's HTTP/1.1 server, kept by the jaraco/CherryPy maintainers), a WSGI
server with a thread pool and TLS of its own through Python's `ssl` (its builtin adapter): the API
server's calls are few and small (one AdmissionReview per namespace DELETE, a few kilobytes), so what
matters is TLS, a bounded body and a thread per call, not throughput. waitress, which serves the Slack
door, has no TLS; a hand-written HTTP server is what this project does not keep. cheroot answers a
plain-HTTP request on its TLS port with a 400 of its own, and a handshake that fails costs one thread
for at most its `timeout`.

The certificate and key are read again when their files change (cert-manager rotates them in place):
the listening context's `sni_callback`, called on every ClientHello (with or without a server name),
looks at the files' modification times and sizes and, when they changed, swaps a fresh context with the
new pair into the connection being made. A pair that does not load (a rotation half written) keeps the
previous one, said once in the log.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter

from bot.errors import UserError
from bot.services.admission import Answer, BadReview, Reviewer, parse_review

log = logging.getLogger(__name__)

PATH = "/admission/namespaces"
# an AdmissionReview of a namespace DELETE is a few kilobytes; an object the API server keeps is at most
# 1.5 MiB (etcd's request limit), and a review carries one (oldObject)
MAX_BODY = 2 << 20
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class Certificates:
    """The serving certificate and key, loaded again when their files change."""

    def __init__(self, cert: str, key: str) -> None:
        self.cert = cert
        self.key = key
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._context = self._load()
        self._refused: tuple[tuple[int, int, int], ...] | None = None

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path in (self.cert, self.key):
            st = os.stat(path)
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context

    def listening_context(self) -> ssl.SSLContext:
        """The context the server wraps its connections with: it hands each one the current pair."""
        context = self._load()
        context.sni_callback = self._hello
        return context

    def current(self) -> ssl.SSLContext:
        """The context of the files as they are now (the previous one while they do not load)."""
        with self._lock:
            try:
                stamp = self._stat()
            except OSError:
                return self._context  # between a rotation's removal and its new files
            if stamp not in (self._stamp, self._refused):
                try:
                    fresh = self._load()
                except (OSError, ssl.SSLError) as e:
                    self._refused = stamp
                    log.warning("admission: the new certificate or key does not load (%s); serving the previous one", e)
                else:
                    self._context, self._stamp = fresh, stamp
                    log.info("admission: certificate and key loaded again from %s and %s", self.cert, self.key)
            return self._context

    def _hello(self, sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, context: ssl.SSLContext) -> None:
        sock.context = self.current()


def check_pair(cert: str, key: str, names: tuple[str, str] = ("--cert", "--key")) -> None:
    """Raise UserError (exit 2) when the certificate and key files cannot serve TLS; `names` are what the
    user set them with (the flags, or `serve`'s variables)."""
    cert_name, key_name = names
    for flag, path in ((cert_name, cert), (key_name, key)):
        if not os.path.isfile(path):
            raise UserError(f"{flag} {path!r} does not exist or is not a file")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as e:
        reason = e.reason or "not a PEM certificate and its private key"
        raise UserError(f"{cert_name} {cert!r} and {key_name} {key!r} cannot serve TLS: {reason}") from None
    except OSError as e:
        raise UserError(f"{cert_name} {cert!r} and {key_name} {key!r} cannot be read: {e.strerror}") from None


# `nsstuck serve`: the registered cluster's reviewer, or None for a name it does not know
Reviewers = Callable[[str], "Reviewer | None"]


@dataclass
class AdmissionApp:
    """The WSGI application: the review endpoint and a health check. With `by_cluster` (`nsstuck serve`)
    the endpoint is `POST /admission/namespaces/CLUSTER`, answered by that cluster's reviewer; a cluster
    nsstuck does not know is allowed with no warnings (and logged), never refused."""

    reviewer: Reviewer | None = None
    by_cluster: Reviewers | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        arrived = time.monotonic()  # the budget counts from here: the body's read and parsing are in it
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "")
        if path == "/healthz":
            return _plain(start_response, 200, "ok")
        cluster: str | None = None
        if self.by_cluster is not None:
            cluster = path.removeprefix(PATH + "/") if path.startswith(PATH + "/") else ""
            if not cluster or "/" in cluster:
                return _plain(start_response, 404, f"not found: the endpoint is POST {PATH}/CLUSTER")
        elif path != PATH:
            return _plain(start_response, 404, f"not found: the endpoint is POST {PATH}")
        if method != "POST":
            return _plain(start_response, 405, f"method not allowed: the endpoint is POST {PATH}")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY:
            return _plain(start_response, 400, f"bad request: the body is larger than {MAX_BODY} bytes", close=True)
        body = environ["wsgi.input"].read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return _plain(start_response, 400, f"bad request: the body is larger than {MAX_BODY} bytes", close=True)
        try:
            review = parse_review(body)
        except BadReview as e:
            return _plain(start_response, 400, f"bad request: {e}")
        reviewer = self.reviewer if self.by_cluster is None or cluster is None else self.by_cluster(cluster)
        if reviewer is None:
            log.warning(
                "admission: a review for cluster %r, which is not registered: allowed unchecked", (cluster or "")[:63]
            )
            answer = Answer(review.uid)
        else:
            answer = reviewer.answer(review, arrived=arrived)
        data = json.dumps(answer.to_review()).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]


def _plain(start_response: StartResponse, code: int, text: str, *, close: bool = False) -> list[bytes]:
    data = (text + "\n").encode()
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))]
    if close:
        headers.append(("Connection", "close"))
    start_response(f"{code} {_REASONS[code]}", headers)
    return [data]


class AdmissionServer:
    """cheroot serving `AdmissionApp` over TLS on (address, port); `port` 0 takes a free one."""

    def __init__(
        self,
        reviewer: Reviewer | Reviewers,
        certificates: Certificates,
        address: str,
        port: int,
        threads: int = 10,
    ):
        app = AdmissionApp(reviewer) if isinstance(reviewer, Reviewer) else AdmissionApp(by_cluster=reviewer)
        self.server = wsgi.Server((address, port), app, numthreads=threads, timeout=10)
        self.server.server_name = "nsstuck-admission"
        adapter = BuiltinSSLAdapter(certificates.cert, certificates.key)
        adapter.context = certificates.listening_context()
        self.server.ssl_adapter = adapter

    def bind(self) -> tuple[str, int]:
        """Bind the port (an error here is the caller's: the port is taken or not allowed)."""
        self.server.prepare()
        host, port = self.server.bind_addr[:2]
        return str(host), int(port)

    def serve(self) -> None:
        """Serve until `stop` (from a signal handler or another thread)."""
        try:
            self.server.serve()
        finally:
            self.server.stop()

    def stop(self) -> None:
        threading.Thread(target=self.server.stop, name="admission-stop", daemon=True).start()

    def stop_on_signals(self) -> None:
        """SIGTERM and SIGINT stop the server (in the main thread only, where Python runs handlers)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("admission: stopping on signal %d", signum)
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
