"""Serving the bot: a WSGI front for Bolt plus /healthz, /readyz and /metrics, on waitress
(a production, multi-threaded server), and Socket Mode when an app token is set.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from types import FrameType
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt.context import BoltContext
from slack_bolt.request import BoltRequest
from slack_bolt.request.internals import build_context
from waitress.server import create_server

from bot.slack.app import Bot

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


def bolt_request(raw: str, query: str, headers: dict[str, str | Sequence[str]]) -> BoltRequest:
    """A BoltRequest for a raw HTTP body, working around Bolt's `payload` parsing trap.

    Bolt 1.30 treats any form body containing the substring "payload" as an interactivity post and
    parses it to {} when it has no payload field, so `/nsstuck prod payload-svc` would match
    nothing. A slash command is recognised by its `command` field and parsed as the form it is.
    """
    request = BoltRequest(body=raw, query=query, headers=headers)
    if not request.body and raw and not raw.lstrip().startswith("{"):
        form = dict(parse_qsl(raw, keep_blank_values=True))
        if "command" in form and "payload" not in form:
            request.body = form
            request.context = build_context(BoltContext({}), form)
    return request


class Web:
    """The WSGI application."""

    def __init__(self, bot: Bot | None, *, ready: Callable[[], bool], socket_mode: bool) -> None:
        self.bot = bot
        self.ready = ready
        self.socket_mode = socket_mode

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/healthz":
            return self._reply(start_response, 200, b"ok\n")
        if path == "/readyz":
            return self._reply(
                start_response, 200 if self.ready() else 503, b"ready\n" if self.ready() else b"not ready\n"
            )
        if path == "/metrics" and self.bot is not None:
            return self._reply(start_response, 200, self.bot.metrics.render(), "text/plain; version=0.0.4")
        if path == "/slack/events" and self.bot is not None and not self.socket_mode:
            if method != "POST":
                return self._reply(start_response, 405, b"method not allowed\n")
            return self._slack(environ, start_response)
        return self._reply(start_response, 404, b"not found\n")

    def _slack(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        assert self.bot is not None
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            return self._reply(start_response, 413, b"request too large\n")
        raw = environ["wsgi.input"].read(length).decode("utf-8", "replace") if length else ""
        headers: dict[str, str | Sequence[str]] = {
            k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        response = self.bot.app.dispatch(bolt_request(raw, str(environ.get("QUERY_STRING", "")), headers))
        body = response.body.encode() if isinstance(response.body, str) else bytes(response.body or b"")
        out_headers = [
            (k, v) for k, values in response.headers.items() for v in values if k.lower() != "content-length"
        ]
        out_headers.append(("Content-Length", str(len(body))))
        start_response(f"{response.status} {_REASONS.get(response.status, '')}".strip(), out_headers)
        return [body]

    @staticmethod
    def _reply(start_response: StartResponse, status: int, body: bytes, kind: str = "text/plain") -> Iterable[bytes]:
        start_response(
            f"{status} {_REASONS.get(status, '')}", [("Content-Type", kind), ("Content-Length", str(len(body)))]
        )
        return [body]


def serve(bot: Bot, *, port: int, app_token: str | None, host: str = "0.0.0.0", threads: int = 16) -> None:  # noqa: S104
    """Run until SIGTERM or SIGINT. Socket Mode when `app_token` is given, HTTP otherwise."""
    # hand the interpreter lock over more often than the default 5 ms, so that a request thread
    # waiting to send an acknowledgement is not held up by diagnoses parsing JSON
    sys.setswitchinterval(0.0005)
    handler: Any = None
    if app_token:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        handler = SocketModeHandler(bot.app, app_token)
        handler.connect()

    def ready() -> bool:
        if handler is None:
            return True
        connected = bool(handler.client.is_connected())
        bot.metrics.socket_connected.set(1 if connected else 0)
        return connected

    server = create_server(
        Web(bot, ready=ready, socket_mode=handler is not None), host=host, port=port, threads=threads
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    log.info("nsstuck serving on %s:%s (%s mode)", host, port, "socket" if handler else "HTTP")
    print(
        f"nsstuck serving on http://{host}:{server.effective_port} ({'Socket' if handler else 'HTTP'} mode)", flush=True
    )
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if handler is not None:
            handler.close()
        bot.close()
