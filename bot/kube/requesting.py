"""GETs over a socket of our own, for the many reads of a collection.

A collection makes hundreds to thousands of GETs (a CRD-heavy cluster: a discovery document and a list
per type). Through the official client each cost about 0.85 ms of CPU (ApiClient.call_api, its REST
layer, urllib3's pool manager, connection pool, Retry and response objects, http.client underneath),
and urllib3 makes a new SSL context (the CA loaded again) for every connection it opens. Straight
through `http.client` a GET costs about 0.35 ms, most of it http.client's line-by-line reading and the
email package's header parser; the exchange itself on the same TLS socket, about 0.12 ms. On a 2-core
machine shared with the API server, that CPU was most of the time of `nsstuck diagnose` on a large
cluster.

So a `Reader` sends the GETs of a `Transport` itself, as the official client would send them: the same
request to the byte (the configuration's host and the path, the query encoded as urllib3 encodes
`fields`, the request line and headers in http.client's order and checks, the client's default headers,
Content-Type, Accept, and the credentials put in by the client's own `update_params_for_auth`, which
runs an exec plugin's refresh hook), over TLS set up as urllib3 sets it up (its `create_urllib3_context`
with the same verification mode, CA file, client certificate and server name), one context shared by
the connections it keeps (at most `size` idle ones). It reads the answer as http.client does (`_Wire`),
and says what it refuses with http.client's exceptions.

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
import re
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
    headers: dict[str, str]  # names in lower case; a repeated header's values joined (urllib3's HTTPHeaderDict)
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
        host = self.host.encode("ascii") if self.host.isascii() else self.host.encode("idna")
        host = b"[" + host + b"]" if b":" in host else host
        self.host_header = host if self.port == (443 if self.https else 80) else host + b":%d" % self.port
        self._idle: list[_Wire] = []
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

    def get(self, path: str, query: dict[str, str] | None, *, accept: str, timeout: float) -> Answer:
        """GET `path` (with `query`); `timeout` seconds to connect and as many for each read.
        Raises NotConnected, ConnectTimeout, ReadTimeout, Dropped or TlsFailed."""
        target = self.prefix + path + ("?" + urlencode(query) if query else "")
        headers = self.headers(accept)
        request = self._request(
            target, headers
        )  # what http.client would refuse is refused before a connection is taken
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
            answer = self._exchange(connection, request, timeout)
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

    def _take(self, timeout: float) -> _Wire:
        while True:
            with self._lock:
                wire = self._idle.pop() if self._idle else None
            if wire is None:
                return self._open(timeout)
            if not wire.dropped():  # as urllib3 does: one the server has closed is not used
                return wire
            wire.close()

    def _give(self, wire: _Wire, reusable: bool) -> None:
        if reusable:
            with self._lock:
                if not self._closed and len(self._idle) < self.size:
                    self._idle.append(wire)
                    return
        wire.close()

    def _open(self, timeout: float) -> _Wire:
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
        return _Wire(sock)

    # -- one exchange ----------------------------------------------------------------------------

    def _request(self, target: str, headers: dict[str, str]) -> bytes:
        """The request's bytes as http.client writes them for urllib3: the request line, Host,
        Accept-Encoding, then the headers in order; raising the ValueErrors http.client raises for a
        URL or a header it refuses (a credential with a line break in it)."""
        found = _DISALLOWED_URL_CHARACTER.search(target)
        if found:
            raise http.client.InvalidURL(
                f"URL can't contain control characters. {target!r} (found at least {found.group()!r})"
            )
        lines = [f"GET {target} HTTP/1.1".encode("ascii"), b"Host: " + self.host_header, b"Accept-Encoding: identity"]
        for name, value in headers.items():
            raw_name = name.encode("ascii")
            if not _LEGAL_HEADER_NAME.fullmatch(raw_name):
                raise ValueError(f"Invalid header name {raw_name!r}")
            raw_value = value.encode("latin-1") if isinstance(value, str) else str(value).encode("ascii")
            if _ILLEGAL_HEADER_VALUE.search(raw_value):
                raise ValueError(f"Invalid header value {raw_value!r}")
            lines.append(raw_name + b": " + raw_value)
        lines.append(b"\r\n")
        return b"\r\n".join(lines)

    def _exchange(self, wire: _Wire, request: bytes, timeout: float) -> tuple[Answer, bool]:
        """The answer, and whether the connection may be kept."""
        wire.sock.settimeout(timeout)
        try:
            wire.sock.sendall(request)
        except BrokenPipeError:
            pass  # as urllib3: the server may have answered before closing; the answer is read below
        except OSError as e:
            if e.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise _failure(e) from None
        try:
            status, reason, headers_in, version = wire.read_head()
        except (OSError, http.client.HTTPException) as e:
            raise _failure(e) from None
        try:
            body, keep = wire.read_body(status, headers_in, version)
        except (OSError, http.client.HTTPException) as e:
            raise _failure(e, reading=True) from None
        joined = {name: ", ".join(values) for name, values in headers_in.items()}
        body = _decoded(body, joined.get("content-encoding"))
        return Answer(status, reason, joined, body), keep


# what http.client refuses in a URL and in a header (its `_contains_disallowed_url_pchar_re`,
# `_is_legal_header_name` and `_is_illegal_header_value`)
_DISALLOWED_URL_CHARACTER = re.compile("[\x00-\x20\x7f]")
_LEGAL_HEADER_NAME = re.compile(rb"[^:\s][^:\r\n]*")
_ILLEGAL_HEADER_VALUE = re.compile(rb"\n(?![ \t])|\r(?![ \t\n])")
# http.client's limits on a line and on the number of headers of an answer
_MAX_LINE = 65536
_MAX_HEADERS = 100


class _Wire:
    """One kept connection, and the HTTP/1.1 answers read from it as http.client reads them (status
    line, 1xx answers skipped, headers, a body by Content-Length, chunks or up to the close), with
    http.client's errors (RemoteDisconnected, BadStatusLine, IncompleteRead, LineTooLong) for what it
    refuses, without its per-line buffered reader and the email package's header parser (most of the
    CPU of a GET through http.client: 0.35 ms against 0.12 ms for the exchange itself)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def dropped(self) -> bool:
        """Whether the server has closed it while it was idle (it is readable, at its end)."""
        if self.buffer:
            return True  # bytes nobody asked for: not a connection to send a request on
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buffer += data
        return True

    def _line(self, what: str) -> bytes:
        """A line with its end (b"" at the end of the stream), as `readline(_MAX_LINE + 1)` gives it."""
        while True:
            end = self.buffer.find(b"\n", 0, _MAX_LINE + 1)
            if end >= 0:
                line, self.buffer = self.buffer[: end + 1], self.buffer[end + 1 :]
                return line
            if len(self.buffer) > _MAX_LINE:
                raise http.client.LineTooLong(what)
            if not self._fill():
                line, self.buffer = self.buffer, b""
                return line

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                data, self.buffer = self.buffer, b""
                raise http.client.IncompleteRead(data, size - len(data))
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _status(self) -> tuple[str, int, str]:
        line = str(self._line("status line"), "iso-8859-1")
        if not line:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        parts = line.split(None, 2)
        version = parts[0] if parts else ""
        if not version.startswith("HTTP/") or len(parts) < 2:
            raise http.client.BadStatusLine(line)
        try:
            status = int(parts[1])
        except ValueError:
            raise http.client.BadStatusLine(line) from None
        if status < 100 or status > 999:
            raise http.client.BadStatusLine(line)
        return version, status, (parts[2] if len(parts) > 2 else "").strip()

    def _headers(self) -> dict[str, list[str]]:
        """Names in lower case, each with its values in order (a folded line joins the one before)."""
        headers: dict[str, list[str]] = {}
        last: list[str] | None = None
        count = 0
        while True:
            line = self._line("header line")
            if line in (b"\r\n", b"\n", b""):
                return headers
            count += 1
            if count > _MAX_HEADERS:
                raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")
            text = str(line, "iso-8859-1")
            if text[0] in " \t" and last is not None:
                last[-1] = (last[-1] + text).rstrip("\r\n")
                continue
            name, colon, value = text.partition(":")
            if not colon:
                continue  # not a header (http.client's parser keeps it aside as a defect)
            last = headers.setdefault(name.strip().lower(), [])
            last.append(value.lstrip(" \t").rstrip("\r\n"))

    def read_head(self) -> tuple[int, str, dict[str, list[str]], str]:
        """Status, reason, headers and version of the answer, past any 1xx (100 Continue) before it."""
        while True:
            version, status, reason = self._status()
            if status != http.client.CONTINUE:
                break
            self._headers()
        if version != "HTTP/1.0" and not version.startswith("HTTP/1."):
            raise http.client.UnknownProtocol(version)
        return status, reason, self._headers(), version

    def read_body(self, status: int, headers: dict[str, list[str]], version: str) -> tuple[bytes, bool]:
        """The body, and whether the connection may carry another request (http.client's rules)."""
        first = {name: values[0] for name, values in headers.items()}
        chunked = first.get("transfer-encoding", "").lower() == "chunked"
        connection = first.get("connection", "").lower()
        if version == "HTTP/1.0":
            keep = bool(first.get("keep-alive")) or "keep-alive" in connection
        else:
            keep = "close" not in connection
        length: int | None = None
        if not chunked and "content-length" in first:
            try:
                length = int(first["content-length"])
            except ValueError:
                length = None
            if length is not None and length < 0:
                length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200:
            length = 0
        if chunked:
            return self._chunks(), keep
        if length is None:
            body = self.buffer
            self.buffer = b""
            while self._fill():
                body += self.buffer
                self.buffer = b""
            return body, False
        return self._exactly(length), keep

    def _chunks(self) -> bytes:
        """A chunked body; cut short, http.client's IncompleteRead holds the whole chunks read before."""
        parts: list[bytes] = []
        try:
            while True:
                line = self._line("chunk size")
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise http.client.IncompleteRead(b"") from None
                if size == 0:
                    while self._line("trailer line") not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self._exactly(size))
                self._exactly(2)
        except http.client.IncompleteRead:
            raise http.client.IncompleteRead(b"".join(parts)) from None


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
