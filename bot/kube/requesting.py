"""GETs on connections of our own, for the many reads of a collection; and the bounds of every answer read.

A collection makes hundreds to thousands of GETs (a CRD-heavy cluster: a discovery document and a list
per type). Through the official client each cost about 0.85 ms of CPU (ApiClient.call_api, its REST
layer, urllib3's pool manager, connection pool, Retry and response objects, http.client underneath),
and urllib3 makes a new SSL context (the CA loaded again) for every connection it opens. On a 2-core
machine shared with the API server, that CPU was most of the time of `nsstuck diagnose` on a large
cluster.

So a `Reader` sends the GETs of a `Transport` itself, as the official client would send them: the same
request to the byte (the configuration's host and the path, the query encoded as urllib3 encodes
`fields`, the client's default headers, Content-Type, Accept, and the credentials put in by the client's
own `update_params_for_auth`, which runs an exec plugin's refresh hook), over TLS set up as urllib3 sets
it up (its `create_urllib3_context` with the same verification mode, CA file, client certificate and
server name), one context shared by the connections it keeps (at most `size` idle ones).

Everything HTTP is the standard library's `http.client`, as under urllib3: an `http.client.HTTPConnection`
per kept connection writes the request (request line, Host, `Accept-Encoding: identity`, the headers, with
its checks on the URL and the headers) and reads the answer (status line, 1xx, headers, a body by
Content-Length, chunks or up to the close, with its errors for what it refuses), so what a server answers
is taken or refused by the same code on both paths. Measured (CPU per GET, one thread on one kept TLS
connection to the emulator, a 0.6 kB and a 3 kB JSON answer decoded, /tmp/reader-mb in the commit that
made this): http.client on a socket of ours 0.21-0.22 ms; urllib3's `HTTPSConnectionPool` given the same
shared context 0.29-0.35 ms (its pool, Retry, Timeout and response objects around the same http.client);
the kubernetes client 0.31-0.46 ms; the hand-written HTTP/1.1 reader this replaced, 0.12-0.14 ms (it
skipped http.client's line reader and the email package's header parser). http.client directly, then:
the cheaper of the two, the connections are ours anyway (`_Link.dropped`), and its socket is where the
time bound below is kept (urllib3 would take it only through its connection's private socket).

Every answer is bounded, on this path and on the client's (`Transport`):
- in time, as a whole: the call's timeout is the time for the whole answer (connect, headers, body), not
  for each read; every read of the socket waits at most for what is left of it (`_Bounded`), and when it
  is up the connection is closed and the call fails as a read timeout. A call abandoned at the
  collection's deadline therefore ends, and closes its socket, by that deadline: no thread keeps reading;
- in size: a body larger than `limit` bytes (NSSTUCK_MAX_ANSWER_MB) is not read past it: `Refused`, the
  connection closed. The body is read in chunks into one buffer, never more than the limit and a byte;
- in form: `Accept-Encoding: identity` is asked for, and an answer encoded anyway (gzip, deflate...) is
  `Refused`, not decoded.

A configuration it does not reproduce has no Reader and goes through the client as before: a proxy,
`assert_hostname`, a host with credentials, a query or a fragment in it, and every connection that
impersonates (its headers are added in the client's pool manager). A connection that cannot be opened
(refused, TLS refused, a name that does not resolve) is tried once more through the client, which says
why in its own words: nothing was sent, and the words are the ones every other path gives. What
`Transport` makes of the other failures is what it makes of urllib3's: tests/faults/test_reader_parity.py
runs both on the same answers, well-formed and not, and on the same faults.
"""

from __future__ import annotations

import errno
import http.client
import math
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from urllib3.exceptions import InsecureRequestWarning
from urllib3.util import ssl_ as urllib3_ssl

MIB = 1 << 20
# the largest answer read by default (NSSTUCK_MAX_ANSWER_MB)
MAX_ANSWER = 256 * MIB
# what one read of a body asks for (a kept connection's answers are mostly smaller)
CHUNK = 1 << 16


@dataclass(frozen=True)
class Answer:
    """A response read whole: its status, reason, headers and body."""

    status: int
    reason: str
    headers: dict[str, str]  # names in lower case; a repeated header's values joined (urllib3's HTTPHeaderDict)
    body: bytes | bytearray
    # a tail read (`tail`): whether older bytes were dropped to keep the newest
    cut: bool = False


class NotConnected(Exception):
    """The connection could not be opened (nothing was sent): the caller asks through the client."""


class ReadTimeout(Exception):
    """No whole answer within the call's time (urllib3's ReadTimeoutError)."""


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


class Refused(Exception):
    """An answer deliberately not read whole (too large, or encoded); `why` completes "the answer to GET
    /path ..."."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def too_large(limit: int) -> Refused:
    return Refused(f"was larger than NSSTUCK_MAX_ANSWER_MB ({_mib(limit)}); read stopped")


def check_head(header: Callable[[str], str | None], limit: int) -> None:
    """Refuse, before reading its body, an answer encoded although identity was asked for, or one that
    announces a body over `limit` bytes (`header`: a header's value by its name in lower case)."""
    encoding = (header("content-encoding") or "").strip()
    if encoding and encoding.lower() != "identity":
        raise Refused(f"came encoded (Content-Encoding: {encoding[:40]}) although identity was asked for; not decoded")
    try:
        announced = int(header("content-length") or "")
    except ValueError:
        return
    if announced > limit:
        raise too_large(limit)


def read_limited(read1: Callable[[int], bytes], limit: int, before: Callable[[], None] | None = None) -> bytearray:
    """A body read with `read1` (at most one receive each, as `io.BufferedReader.read1`), in chunks into one
    buffer, until its end; `Refused` as soon as it holds more than `limit` bytes. `before` is called before
    each read (what bounds it in time)."""
    body = bytearray()
    while True:
        if before is not None:
            before()
        data = read1(min(CHUNK, limit + 1 - len(body)))
        if not data:
            return body
        body += data
        if len(body) > limit:
            raise too_large(limit)


def read_tail(
    read1: Callable[[int], bytes], keep: int, before: Callable[[], None] | None = None
) -> tuple[bytearray, bool]:
    """A body read to its end, keeping only its last `keep` bytes (a log whose newest lines matter; the
    API's `limitBytes` would keep the oldest): the kept bytes, and whether any were dropped."""
    body = bytearray()
    cut = False
    while True:
        if before is not None:
            before()
        data = read1(CHUNK)
        if not data:
            return body, cut
        body += data
        if len(body) > keep:
            del body[: len(body) - keep]
            cut = True


def _mib(size: int) -> str:
    return f"{size // MIB} MiB" if size % MIB == 0 else f"{size} bytes"


# what urllib3 takes as a read timeout when a socket call ends with one of these
_BLOCKING_ERRNOS = {errno.EAGAIN, errno.EWOULDBLOCK}


class _Bounded:
    """A socket whose every receive waits at most until `ends` (a `time.monotonic()` instant): the time of
    a whole answer, whatever the server sends meanwhile (a byte at a time never times a receive out)."""

    ends: float = math.inf

    def _wait(self) -> None:
        if self.ends == math.inf:
            return  # not given an answer's time yet: its own timeout
        left = self.ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self.settimeout(left)  # type: ignore[attr-defined]


class _PlainSocket(_Bounded, socket.socket):
    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._wait()
        return super().recv_into(buffer, nbytes, flags)


class _TlsSocket(_Bounded, ssl.SSLSocket):
    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        self._wait()
        return super().recv_into(buffer, nbytes, flags)


class _Link(http.client.HTTPConnection):
    """One kept connection: http.client on a socket the Reader opened (`sock`)."""

    def __init__(self, host: str, port: int, default_port: int) -> None:
        self.default_port = default_port  # read by putrequest: the Host header names the port unless it is this
        super().__init__(host, port)

    def dropped(self) -> bool:
        """Whether the server has closed it while it was idle (it is readable, at its end)."""
        if self.sock is None:
            return True
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True


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
        self._idle: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def usable(configuration: Any) -> bool:
        """Whether a Reader sends what the client would for this configuration."""
        parts = urlsplit(str(configuration.host or ""))
        try:
            parts.port  # noqa: B018 - raises for a port that is not a number (the client says so when it calls)
        except ValueError:
            return False
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

    def get(
        self,
        path: str,
        query: dict[str, str] | None,
        *,
        accept: str,
        timeout: float,
        limit: int = MAX_ANSWER,
        tail: int | None = None,
    ) -> Answer:
        """GET `path` (with `query`): `timeout` seconds to connect, and as many for the whole answer; a
        body of at most `limit` bytes, not encoded.
        `tail`: read the whole body, keeping only its last `tail` bytes (`limit` then does not apply).
        Raises NotConnected, ConnectTimeout, ReadTimeout, Dropped, TlsFailed or Refused."""
        ends = time.monotonic() + timeout
        target = self.prefix + path + ("?" + urlencode(query) if query else "")
        headers = self.headers(accept)
        link = self._take()
        try:
            # what http.client refuses (a URL or a header: a credential with a line break in it) is
            # refused before anything is sent
            link.putrequest("GET", target)
            for name, value in headers.items():
                link.putheader(name, value)
            if link.sock is None:
                link.sock = self._open(timeout)
            if self.context is not None and self.context.verify_mode == ssl.CERT_NONE:
                # what urllib3 warns of for each such request (shown once: Python's default warning filter)
                warnings.warn(
                    f"Unverified HTTPS request is being made to host '{self.host}'. Adding certificate "
                    "verification is strongly advised. See: "
                    "https://urllib3.readthedocs.io/en/latest/advanced-usage.html#tls-warnings",
                    InsecureRequestWarning,
                    stacklevel=2,
                )
            answer, reusable = _exchange(link, ends, limit, tail)
        except BaseException:
            link.close()  # whatever was left of the answer (a call given up, a body refused) is not read
            raise
        self._give(link, reusable)
        return answer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for link in idle:
            link.close()

    # -- connections -----------------------------------------------------------------------------

    def _take(self) -> _Link:
        while True:
            with self._lock:
                link = self._idle.pop() if self._idle else None
            if link is None:
                return _Link(self.host, self.port, 443 if self.https else 80)
            if not link.dropped():  # as urllib3 does: one the server has closed is not used
                return link
            link.close()

    def _give(self, link: _Link, reusable: bool) -> None:
        if reusable:
            with self._lock:
                if not self._closed and len(self._idle) < self.size:
                    self._idle.append(link)
                    return
        link.close()

    def _open(self, timeout: float) -> socket.socket:
        try:
            plain = socket.create_connection((self.host, self.port), timeout)
        except TimeoutError:
            raise ConnectTimeout from None
        except OSError:
            raise NotConnected from None
        sock: socket.socket = _PlainSocket(fileno=plain.detach())
        try:
            sock.settimeout(timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=_server_name(self.server_hostname))
        except (TimeoutError, ssl.SSLError, OSError) as e:
            sock.close()
            if isinstance(e, TimeoutError) or getattr(e, "errno", None) in _BLOCKING_ERRNOS:
                raise ReadTimeout from None  # urllib3 says so of a TLS handshake that times out
            raise NotConnected from None
        return sock


def _exchange(link: _Link, ends: float, limit: int, tail: int | None = None) -> tuple[Answer, bool]:
    """Send the request put on `link`, and read its answer by `ends`: the answer, and whether the
    connection may carry another request."""
    sock: Any = link.sock  # a _PlainSocket or a _TlsSocket (`Reader._open`)
    sock.ends = ends
    sock.settimeout(max(0.001, ends - time.monotonic()))
    try:
        link.endheaders()
    except BrokenPipeError:
        pass  # as urllib3: the server may have answered before closing; the answer is read below
    except OSError as e:
        if e.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
            raise _failure(e) from None
    try:
        response = link.getresponse()
    except (OSError, http.client.HTTPException) as e:
        raise _failure(e) from None
    headers: dict[str, str] = {}
    for name, value in response.getheaders():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    cut = False
    try:
        if tail is None:
            check_head(headers.get, limit)
            body = read_limited(response.read1, limit)
        else:
            check_head(headers.get, MAX_ANSWER * 64)  # (encoding only: the size is bounded by what is kept)
            body, cut = read_tail(response.read1, tail)
        if response.length:  # Content-Length said more than came before the end (urllib3 says so too)
            raise http.client.IncompleteRead(bytes(body), response.length)
    except (OSError, http.client.HTTPException) as e:
        response.close()
        raise _failure(e) from None
    except BaseException:
        response.close()  # when the server closes after it, the answer holds the socket, not the link
        raise
    reusable = not response.will_close
    response.close()
    return Answer(response.status, response.reason, headers, body, cut), reusable


def _failure(error: BaseException) -> Exception:
    """What urllib3 makes of an error once connected: a read timeout, a TLS error, or a broken connection."""
    if isinstance(error, TimeoutError) or getattr(error, "errno", None) in _BLOCKING_ERRNOS:
        return ReadTimeout()
    if isinstance(error, ssl.SSLError):
        if "read operation timed out" in str(error):
            return ReadTimeout()
        return TlsFailed(str(error))
    return Dropped(error)


def _server_name(name: str) -> str:
    """The name sent in SNI and checked, as urllib3 gives it: an IPv6 address without its brackets."""
    normalized = name.strip("[]")
    if "%" in normalized:
        normalized = normalized[: normalized.rfind("%")]
    return normalized if urllib3_ssl.is_ipaddress(normalized) else name


def _tls_context(configuration: Any) -> ssl.SSLContext:
    """The context urllib3 makes for each connection of the client's pool manager, made once; its
    sockets are `_TlsSocket`s (every receive bounded by the answer's time)."""
    import certifi  # what the client's REST layer trusts when the kubeconfig names no CA

    cert_reqs = ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE
    context = urllib3_ssl.create_urllib3_context(cert_reqs=cert_reqs)
    context.verify_mode = cert_reqs
    context.load_verify_locations(configuration.ssl_ca_cert or certifi.where())
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    context.sslsocket_class = _TlsSocket
    return context
