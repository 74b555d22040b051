"""GETs over the standard library's HTTP client, for the many reads of a collection.

A collection makes hundreds to thousands of GETs (a CRD-heavy cluster: a discovery document and a list
per type). Through the official client each costs about 0.85 ms of CPU (bench: ApiClient.call_api, its
REST layer, urllib3's pool manager, connection pool, Retry and response objects), against about 0.5 ms
straight through `http.client` with the same TLS socket; and urllib3 makes a new SSL context (loading
the CA again) for every connection it opens. On a 2-core machine shared with the API server, that CPU
is most of the time of `nsstuck diagnose` on a large cluster.

So a `Reader` sends the GETs of a `Transport` itself, as the official client would send them: the same
URL (the configuration's host and the path, the query encoded as urllib3 encodes `fields`), the same
headers (the client's default ones, Content-Type, Accept, and the credentials put in by the client's
own `update_params_for_auth`, which runs an exec plugin's refresh hook), and TLS as urllib3 sets it up
(its `create_urllib3_context` with the same verification mode, CA file, client certificate and server
name), one context shared by the connections it keeps (at most `size` idle ones).

A configuration it does not reproduce has no Reader and goes through the client as before: a proxy,
`assert_hostname`, a host with credentials, a query or a fragment in it, and every connection that
impersonates (its headers are added in the client's pool manager). A connection that cannot be opened
(refused, TLS refused, a name that does not resolve) is tried once more through the client, which says
why in its own words: nothing was sent, and the words are the ones every other path gives. What
`Transport` makes of the other failures is what it makes of urllib3's (tests/faults/test_reader_parity.py
runs both on the same faults).
"""

from __future__ import annotations

import errno
import http.client
import select
import socket
import ssl
import threading
import warnings
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from urllib3.exceptions import InsecureRequestWarning
from urllib3.util import ssl_ as urllib3_ssl


@dataclass(frozen=True)
class Answer:
    """A response read whole: its status, reason, headers and body (decoded as urllib3 decodes it)."""

    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes


class NotConnected(Exception):
    """The connection could not be opened (nothing was sent): the caller asks through the client."""


class ReadTimeout(Exception):
    """No answer within the read timeout (urllib3's ReadTimeoutError)."""


class ConnectTimeout(Exception):
    """No TCP connection within the connect timeout (urllib3's ConnectTimeoutError)."""


class Dropped(Exception):
    """The connection broke after the request went out (urllib3's ProtocolError); `cause` is why."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(cause)
        self.cause = cause


class TlsFailed(Exception):
    """A TLS error once connected (urllib3's SSLError); `text` is the error as urllib3 says it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# what urllib3 takes as a read timeout when a socket call ends with one of these
_BLOCKING_ERRNOS = {errno.EAGAIN, errno.EWOULDBLOCK}


class Reader:
    """GETs of one configured client, on connections it keeps (thread-safe)."""

    def __init__(self, api_client: Any, *, size: int) -> None:
        configuration = api_client.configuration
        parts = urlsplit(str(configuration.host))
        self.api_client = api_client
        self.size = size
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.server_hostname = configuration.tls_server_name or self.host
        self.context = _tls_context(configuration) if self.https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def usable(configuration: Any) -> bool:
        """Whether a Reader sends what the client would for this configuration."""
        parts = urlsplit(str(configuration.host or ""))
        return (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and "@" not in parts.netloc
            and not parts.query
            and not parts.fragment
            and not configuration.proxy
            and configuration.assert_hostname is None
            and urllib3_ssl.HAS_NEVER_CHECK_COMMON_NAME
            and not urllib3_ssl.IS_PYOPENSSL
        )

    def headers(self, accept: str) -> dict[str, str]:
        """What the client sends with a GET: its default headers (User-Agent), Accept, Content-Type and
        the credentials (refreshed by its hook when they expire)."""
        client = self.api_client
        headers: dict[str, Any] = {"Accept": accept, **client.default_headers}
        if client.cookie:
            headers["Cookie"] = client.cookie
        client.update_params_for_auth(headers, [], ["BearerToken"])
        headers.setdefault("Content-Type", "application/json")
        return headers

    def get(self, path: str, query: dict[str, str] | None, *, accept: str, timeout: float) -> Answer:
        """GET `path` (with `query`); `timeout` seconds to connect and as many for each read.
        Raises NotConnected, ConnectTimeout, ReadTimeout, Dropped or TlsFailed."""
        target = self.prefix + path + ("?" + urlencode(query) if query else "")
        headers = self.headers(accept)
        connection = self._take(timeout)
        if self.context is not None and self.context.verify_mode == ssl.CERT_NONE:
            # what urllib3 warns of for each such request (shown once: Python's default warning filter)
            warnings.warn(
                f"Unverified HTTPS request is being made to host '{self.host}'. Adding certificate verification "
                "is strongly advised. See: https://urllib3.readthedocs.io/en/latest/advanced-usage.html#tls-warnings",
                InsecureRequestWarning,
                stacklevel=2,
            )
        try:
            answer = self._exchange(connection, target, headers, timeout)
        except BaseException:
            connection.close()
            raise
        self._give(connection, answer[1])
        return answer[0]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # -- connections -----------------------------------------------------------------------------

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._open(timeout)
            if not _dropped(connection):  # as urllib3 does: one the server has closed is not used
                return connection
            connection.close()

    def _give(self, connection: http.client.HTTPConnection, reusable: bool) -> None:
        if reusable:
            with self._lock:
                if not self._closed and len(self._idle) < self.size:
                    self._idle.append(connection)
                    return
        connection.close()

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout)
        except TimeoutError:
            raise ConnectTimeout from None
        except OSError:
            raise NotConnected from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=_server_name(self.server_hostname))
        except (TimeoutError, ssl.SSLError, OSError) as e:
            sock.close()
            if isinstance(e, TimeoutError) or getattr(e, "errno", None) in _BLOCKING_ERRNOS:
                raise ReadTimeout from None  # urllib3 says so of a TLS handshake that times out
            raise NotConnected from None
        connection = (_Https if self.https else http.client.HTTPConnection)(self.host, self.port, timeout=timeout)
        connection.sock = sock
        connection.auto_open = 0  # never opened again by http.client itself (it knows no TLS here)
        return connection

    # -- one exchange ----------------------------------------------------------------------------

    def _exchange(
        self, connection: http.client.HTTPConnection, target: str, headers: dict[str, str], timeout: float
    ) -> tuple[Answer, bool]:
        """The answer, and whether the connection may be kept."""
        assert connection.sock is not None
        connection.sock.settimeout(timeout)
        try:
            connection.request("GET", target, headers=headers)
        except BrokenPipeError:
            pass  # as urllib3: the server may have answered before closing; the answer is read below
        except OSError as e:
            if e.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise _failure(e) from None
        try:
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as e:
            raise _failure(e) from None
        try:
            body = response.read()
        except (OSError, http.client.HTTPException) as e:
            raise _failure(e, reading=True) from None
        body = _decoded(body, response.getheader("Content-Encoding"))
        answer = Answer(response.status, response.reason, response.headers, body)
        return answer, not response.will_close and connection.sock is not None


class _Https(http.client.HTTPConnection):
    """A connection whose socket is already TLS (the Reader's context): only the Host header's default
    port differs from plain HTTP (http.client's own HTTPSConnection would make a context per connection)."""

    default_port = http.client.HTTPS_PORT


def _failure(error: BaseException, *, reading: bool = False) -> Exception:
    """What urllib3 makes of an error once connected: a read timeout, a TLS error, or a broken connection
    (`reading`: the body's, whose cause urllib3 gives as `Connection broken: <cause>`)."""
    if isinstance(error, TimeoutError) or getattr(error, "errno", None) in _BLOCKING_ERRNOS:
        return ReadTimeout()
    if isinstance(error, ssl.SSLError):
        if "read operation timed out" in str(error):
            return ReadTimeout()
        return TlsFailed(str(error))
    return Dropped(error)


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether a kept connection has been closed by the server (it is readable while idle)."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def _server_name(name: str) -> str:
    """The name sent in SNI and checked, as urllib3 gives it: an IPv6 address without its brackets."""
    normalized = name.strip("[]")
    if "%" in normalized:
        normalized = normalized[: normalized.rfind("%")]
    return normalized if urllib3_ssl.is_ipaddress(normalized) else name


def _tls_context(configuration: Any) -> ssl.SSLContext:
    """The context urllib3 makes for each connection of the client's pool manager, made once."""
    import certifi  # what the client's REST layer trusts when the kubeconfig names no CA

    cert_reqs = ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE
    context = urllib3_ssl.create_urllib3_context(cert_reqs=cert_reqs)
    context.verify_mode = cert_reqs
    context.load_verify_locations(configuration.ssl_ca_cert or certifi.where())
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """The body as urllib3 gives it (it decodes gzip and deflate by default)."""
    name = (encoding or "").strip().lower()
    if name == "gzip" and body:
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if name == "deflate" and body:
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body
