"""The emulators' request parsing (tests/fakes/quickparse.py) against the standard library's, and their
accept loop (tests/fakes/tracing.py) woken by shutdown rather than by a poll."""

from __future__ import annotations

import http.client
import io
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.quickparse import QuickParsing, parse_header_lines, read_header_lines
from tests.fakes.tracing import UntracedHTTPServer, untraced

BLOCKS = [
    b"\r\n",
    b"",
    b"Host: 127.0.0.1:6443\r\nAccept: application/json\r\nAuthorization: Bearer abc\r\n\r\n",
    b"host:x\nACCEPT:  \t json  \r\naccept: second\r\n\r\n",  # no space, padding, a repeated name
    b"X-Folded: one\r\n  two\r\nHost: x\r\n\r\n",  # a folded line
    b"Not a header line\r\nHost: x\r\n\r\n",
    b": empty name\r\nHost: x\r\n\r\n",
    b"Host: a\rb\r\n\r\n",  # a bare CR inside a value
    b"From me@example.com\r\nHost: x\r\n\r\n",
    b"Caf\xe9: cr\xe8me\r\n\r\n",  # latin-1 bytes
    b"Host: x\r\nNo-End: y",  # the connection ended inside the block
    b"Content-Type: multipart/form-data; boundary=zz\r\n\r\n",
    b"Empty:\r\nColon: a:b:c\r\n\r\n",
]


def _items(message: http.client.HTTPMessage) -> list[tuple[str, str]]:
    return list(message.items())


@pytest.mark.parametrize("block", BLOCKS)
def test_a_header_block_reads_as_the_standard_library_reads_it(block: bytes) -> None:
    expected = http.client.parse_headers(io.BytesIO(block))
    quick = parse_header_lines(read_header_lines(io.BytesIO(block)), http.client.HTTPMessage)
    assert type(quick) is type(expected)
    assert _items(quick) == _items(expected)
    for name in ("host", "Accept", "x-folded", "caf\xe9", "content-type"):
        assert quick.get_all(name) == expected.get_all(name)


_PIECES = st.sampled_from(
    [b"Host", b"accept", b"X-A", b":", b": ", b" ", b"\t", b"v", b"\xe9", b"\r\n", b"\n", b"\r", b"(", b"From "]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=14))
def test_any_block_reads_as_the_standard_library_reads_it(pieces: list[bytes]) -> None:
    block = b"".join(pieces) + b"\r\n\r\n"
    expected = http.client.parse_headers(io.BytesIO(block))
    quick = parse_header_lines(read_header_lines(io.BytesIO(block)), http.client.HTTPMessage)
    assert _items(quick) == _items(expected)


def test_the_limits_are_the_standard_librarys() -> None:
    too_long = b"X: " + b"a" * 65536 + b"\r\n\r\n"
    too_many = b"".join(b"X-%d: v\r\n" % i for i in range(100)) + b"\r\n"
    for block in (too_long, too_many):
        with pytest.raises(http.client.HTTPException) as expected:
            http.client.parse_headers(io.BytesIO(block))
        with pytest.raises(http.client.HTTPException) as quick:
            read_header_lines(io.BytesIO(block))
        assert type(quick.value) is type(expected.value)
        assert str(quick.value) == str(expected.value)
    read_header_lines(io.BytesIO(b"".join(b"X-%d: v\r\n" % i for i in range(99)) + b"\r\n"))


class _Standard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        return "then"

    def handle_expect_100(self) -> bool:
        self.wfile.write(b"(100)")
        return True


class _Quick(QuickParsing, _Standard):
    pass


def _parse(cls: type[BaseHTTPRequestHandler], request: bytes) -> tuple[Any, ...]:
    handler = cls.__new__(cls)
    rfile = io.BytesIO(request)
    handler.rfile, handler.wfile = rfile, io.BytesIO()
    handler.client_address = ("127.0.0.1", 1)
    handler.requestline = ""
    handler.raw_requestline = rfile.readline(65537)  # type: ignore[attr-defined]
    ok = handler.parse_request()
    headers = getattr(handler, "headers", None)
    return (
        ok,
        handler.command,
        getattr(handler, "path", None),
        handler.request_version,
        handler.close_connection,
        None if headers is None else list(headers.items()),
        handler.wfile.getvalue(),
        rfile.read(),  # what is left for the body
    )


REQUESTS = [
    b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n",
    b"POST //api//v1 HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
    b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
    b"PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
    b"PUT /x HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
    b"GET /\r\n",
    b"POST /\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"GET / HTTP/1.1.1\r\n\r\n",
    b"GET / HTTP/\xb2.1\r\n\r\n",
    b"GET / HTTP/01234567890.1\r\n\r\n",
    b"GET / FTP/1.1\r\n\r\n",
    b"GET / x HTTP/1.1\r\n\r\n",
    b"GET\r\n",
    b"\r\n",
    b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(120)) + b"\r\n",
    b"GET / HTTP/1.1\r\nX-Folded: a\r\n b\r\n\r\n",
]


@pytest.mark.parametrize("request_bytes", REQUESTS, ids=range(len(REQUESTS)))
def test_a_request_is_parsed_and_refused_as_the_standard_library_does(request_bytes: bytes) -> None:
    assert _parse(_Quick, request_bytes) == _parse(_Standard, request_bytes)


class _Hello(QuickParsing):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = self.headers.get("X-Say", "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_the_accept_loop_serves_then_ends_when_shut_down_and_can_serve_again() -> None:
    server = UntracedHTTPServer(("127.0.0.1", 0), _Hello)
    try:
        for _ in range(2):  # a wake left by the first shutdown does not end the second loop
            thread = threading.Thread(target=untraced(server.serve_forever), daemon=True)
            thread.start()
            url = f"http://127.0.0.1:{server.server_address[1]}/"
            request = urllib.request.Request(url, headers={"X-Say": "hello"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.read() == b"hello"
            server.shutdown()
            thread.join(timeout=10)
            assert not thread.is_alive()
    finally:
        server.server_close()


def test_a_shutdown_asked_before_the_loop_runs_ends_it_at_once() -> None:
    server = UntracedHTTPServer(("127.0.0.1", 0), _Hello)
    try:
        stopper = threading.Thread(target=server.shutdown, daemon=True)
        stopper.start()
        server.serve_forever()  # returns: the shutdown was asked first
        stopper.join(timeout=10)
        assert not stopper.is_alive()
    finally:
        server.server_close()


def test_a_port_in_use_is_the_bind_error_it_was() -> None:
    taken = UntracedHTTPServer(("127.0.0.1", 0), _Hello)
    try:
        with pytest.raises(OSError) as refused:
            UntracedHTTPServer(("127.0.0.1", taken.server_address[1]), _Hello)
        assert refused.value.errno is not None  # EADDRINUSE, not a failure of the server's own close
    finally:
        taken.server_close()
