"""The emulators' request parsing without the email package for the common header block.

`BaseHTTPRequestHandler.parse_request` hands every request's header block to `email.parser` (through
`http.client.parse_headers`), which costs about 20 us a request: with the rest of a round trip at about
300 us of CPU (an emulator's handler thread and its client in one process), that parser was the
largest single part of the emulators' own work. `QuickParsing.parse_request` reads the same lines with
the same limits and builds the same `HTTPMessage` where every line is one plain `Name: value` field;
any other block (a folded line, a line that is not a field, a bare CR) goes to `email.parser` as
before, so the headers a handler sees, and every answer to a malformed request, are the standard
library's. Only the emulators' handlers use it: the product's own HTTP serving is not touched.
"""

from __future__ import annotations

import email.parser
import http.client
import re
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

MAX_LINE = 65536  # http.client's limit on one header line
MAX_HEADERS = 100  # and on the lines of a block, the blank line that ends it counted
# a field whose name email.feedparser's headerRE accepts (a non-empty one), with no CR or LF inside
_FIELD = re.compile(rb"([\x21-\x39\x3b-\x7e]+):([^\r\n]*)\r?\n")


def read_header_lines(rfile: object) -> list[bytes]:
    """The lines of a header block, the line that ends it included (as `http.client` reads them)."""
    readline = rfile.readline  # type: ignore[attr-defined]
    lines: list[bytes] = []
    while True:
        line: bytes = readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            return lines


def parse_header_lines(lines: list[bytes], message_class: type[http.client.HTTPMessage]) -> http.client.HTTPMessage:
    """The message `http.client.parse_headers` would build from these lines."""
    fields: list[tuple[str, str]] = []
    for line in lines[:-1]:
        match = _FIELD.fullmatch(line)
        if match is None:  # anything unusual: the email package decides, as it always did
            text = b"".join(lines).decode("iso-8859-1")
            parsed: http.client.HTTPMessage = email.parser.Parser(_class=message_class).parsestr(text)
            return parsed
        fields.append((match[1].decode("iso-8859-1"), match[2].decode("iso-8859-1").lstrip(" \t")))
    message = message_class()
    for name, value in fields:
        message[name] = value
    return message


class QuickParsing(BaseHTTPRequestHandler):
    """A request handler whose `parse_request` answers as the standard library's, header block aside."""

    def parse_request(self) -> bool:
        self.command = None  # type: ignore[assignment]  # as the standard library: None until known
        self.request_version = version = self.default_request_version
        self.close_connection = True
        raw: bytes = self.raw_requestline  # type: ignore[attr-defined]  # set by handle_one_request
        requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            number = _version_number(version)
            if number is None:
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            if number >= (1, 1) and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            if number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
                return False
            self.request_version = version
        if len(words) > 3 or len(words) < 2:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({requestline!r})")
            return False
        command, path = words[0], words[1]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command!r})")
                return False
        self.command = command
        self.path = "/" + path.lstrip("/") if path.startswith("//") else path
        try:
            lines = read_header_lines(self.rfile)
        except http.client.LineTooLong as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long", str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers", str(err))
            return False
        self.headers = parse_header_lines(lines, self.MessageClass)
        connection = self.headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        expect = self.headers.get("Expect", "").lower()
        if expect == "100-continue" and self.protocol_version >= "HTTP/1.1" and self.request_version >= "HTTP/1.1":
            return self.handle_expect_100()
        return True


def _version_number(version: str) -> tuple[int, int] | None:
    """(major, minor) of `HTTP/x.y`, or None where the standard library answers 400."""
    if not version.startswith("HTTP/"):
        return None
    parts = version.split("/", 1)[1].split(".")
    if len(parts) != 2 or not all(p.isdigit() and len(p) <= 10 for p in parts):
        return None
    try:  # str.isdigit() takes "²", which int() refuses: a 400 there as well
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None
