"""Serving the bot: a WSGI front for Bolt plus /healthz and /readyz, on waitress (a production,
multi-threaded server), and Socket Mode when an app token is set; /metrics on a port of its own, so
that what it says (clusters, namespaces) is never behind the Slack ingress.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import FrameType
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt.context import BoltContext
from slack_bolt.request import BoltRequest
from slack_bolt.request.internals import build_context, extract_content_type, parse_body
from slack_sdk.socket_mode.response import SocketModeResponse
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import create_server

from bot.logs import current_format, log_context
from bot.services.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bot.slack import shapes
from bot.slack.app import SlackDoor
from bot.slack.signing import RequestGate, Verdict

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


# after refusing a request whose body it did not read (413 from Content-Length), the connection is kept
# half-open this long, at most, discarding up to this much of what the client still sends, so that a
# client still sending its body can finish and read the answer (closing at once would make the kernel
# reset the connection, and the 413 would be lost with it)
LINGER_SECONDS = 2.0
LINGER_BYTES = 32 * MAX_BODY


class _RefusingChannel(HTTPChannel):  # type: ignore[misc]
    """waitress's channel, closing a connection whose request it refused unread with a lingering close:
    its side shut down for writing once the answer is out, then what the client still sends read and
    dropped (never kept) until the client closes, LINGER_BYTES or LINGER_SECONDS."""

    refused_unread = False
    linger_until: float | None = None
    drained = 0

    def received(self, data: bytes) -> bool:
        taken = bool(super().received(data))
        if any(getattr(r, "error", None) is not None for r in self.requests):
            self.refused_unread = True
        return taken

    def handle_close(self) -> None:
        if self.refused_unread and self.linger_until is None and self.connected:
            try:
                self.socket.shutdown(socket.SHUT_WR)
            except OSError:
                super().handle_close()
                return
            self.linger_until = time.monotonic() + LINGER_SECONDS
            self.will_close = False
            self.close_when_flushed = False
            return
        super().handle_close()

    def readable(self) -> bool:
        return True if self.linger_until is not None else bool(super().readable())

    def writable(self) -> bool:
        # while lingering, only the server's idle maintenance (will_close) wakes it for writing: to close it
        return bool(self.will_close) if self.linger_until is not None else bool(super().writable())

    def handle_read(self) -> None:
        if self.linger_until is None:
            super().handle_read()
            return
        try:
            data = self.recv(64 * 1024)
        except OSError:
            data = b""
        self.drained += len(data)
        # (recv closed the channel already when the client closed its side)
        done = not data or self.drained > LINGER_BYTES or time.monotonic() > self.linger_until
        if done and self.connected:
            super().handle_close()


class MalformedRequest(ValueError):
    """A signed request whose body is not a payload of Slack's shape; `args[0]` says why, briefly."""


def read_payload(raw: str, headers: dict[str, str | Sequence[str]]) -> dict[str, Any]:
    """The payload of a raw HTTP body as Bolt reads it, but with Bolt's `payload` trap worked around.

    Bolt 1.30 treats any form body containing the substring "payload" as an interactivity post and
    parses it to {} when it has no payload field, so `/nsstuck prod payload-svc` would match
    nothing. A slash command is recognised by its `command` field and parsed as the form it is.
    Raises MalformedRequest for a body that is not JSON where JSON is due, or not an object.
    """
    content_type = extract_content_type({k: [v] if isinstance(v, str) else list(v) for k, v in headers.items()})
    try:
        body: Any = parse_body(raw, content_type)
    except ValueError:  # JSONDecodeError: a JSON body, or a form's payload field, that is not JSON
        raise MalformedRequest("the body is not valid JSON") from None
    if not body and raw and not raw.lstrip().startswith("{"):
        form = dict(parse_qsl(raw, keep_blank_values=True))
        if "command" in form and "payload" not in form:
            body = form
    if not isinstance(body, dict):
        raise MalformedRequest("the payload is not a JSON object")
    return body


def bolt_request(raw: str, query: str, headers: dict[str, str | Sequence[str]], *, api_url: str) -> BoltRequest:
    """A BoltRequest for a raw HTTP body whose payload has the shape Bolt relies on (else MalformedRequest)."""
    body = read_payload(raw, headers)
    problem = shapes.problem(body, api_url=api_url)
    if problem:
        raise MalformedRequest(problem)
    try:
        request = BoltRequest(body=raw, query=query, headers=headers)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:  # what the shape check missed
        raise MalformedRequest(f"unreadable payload ({e.__class__.__name__})") from None
    if request.body != body:  # the payload trap: give Bolt the form as it is
        request.body = body
        request.context = build_context(BoltContext({}), body)
    return request


Checks = Callable[[], Sequence[str]]


def _none() -> Sequence[str]:
    return ()


class Web:
    """The WSGI application. `/healthz` answers 503 with what `alive` finds wrong (a thread or a pool
    that died: restart the process), `/readyz` 503 with what `ready` finds (the database does not
    answer, the Socket Mode connection is down: send no traffic for now)."""

    def __init__(self, bot: SlackDoor | None, *, ready: Checks, socket_mode: bool, alive: Checks = _none) -> None:
        self.bot = bot
        self.ready = ready
        self.alive = alive
        self.socket_mode = socket_mode
        self._said: dict[str, tuple[str, ...]] = {"healthz": (), "readyz": ()}
        secret = bot.settings.slack_signing_secret if bot is not None else None
        # every HTTP request is checked here (signature, freshness, replay) before Bolt sees it
        self.gate = RequestGate(secret.get_secret_value(), bot.db) if bot is not None and secret else None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/healthz":
            return self._probe(start_response, "healthz", self.alive, b"ok\n", "not healthy")
        if path == "/readyz":
            return self._probe(start_response, "readyz", self.ready, b"ready\n", "not ready")
        if path == "/slack/events" and self.bot is not None and not self.socket_mode:
            if method != "POST":
                return self._reply(start_response, 405, b"method not allowed\n")
            return self._slack(environ, start_response)
        return self._reply(start_response, 404, b"not found\n")

    def _probe(self, start_response: StartResponse, name: str, check: Checks, good: bytes, bad: str) -> Iterable[bytes]:
        problems = tuple(check())
        if problems != self._said[name]:  # said once when it changes, not at every probe
            self._said[name] = problems
            if problems:
                log.warning("/%s: %s: %s", name, bad, "; ".join(problems))
            else:
                log.info("/%s: good again", name)
        if not problems:
            return self._reply(start_response, 200, good)
        return self._reply(start_response, 503, ("".join(f"{bad}: {p}\n" for p in problems)).encode())

    def _slack(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        assert self.bot is not None
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            return self._reply(start_response, 413, b"request too large\n")
        data = environ["wsgi.input"].read(length) if length else b""
        raw = data.decode("utf-8", "replace")
        headers: dict[str, str | Sequence[str]] = {
            k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        # Slack's certificate check: unsigned, answered empty (the form is parsed only when it may be one)
        if "ssl_check" in raw and dict(parse_qsl(raw)).get("ssl_check") == "1":
            return self._reply(start_response, 200, b"")
        started = time.perf_counter()
        if self.gate is not None:
            refused = self._refusal(start_response, data, headers)
            if refused is not None:
                return refused
        gated = time.perf_counter()
        try:
            request = bolt_request(
                raw, str(environ.get("QUERY_STRING", "")), headers, api_url=self.bot.settings.slack_api_url
            )
        except MalformedRequest as e:
            log.warning("refused a malformed request from Slack: %s", e)
            return self._reply(start_response, 400, f"malformed request: {e}\n".encode())
        # Bolt's own lines about this request (routing, middleware, acknowledgement) carry its sender
        with log_context(slack_user=shapes.sender(request.body)):
            response = self.bot.app.dispatch(request)
        body = response.body.encode() if isinstance(response.body, str) else bytes(response.body or b"")
        out_headers = [
            (k, v) for k, values in response.headers.items() for v in values if k.lower() != "content-length"
        ]
        out_headers.append(("Content-Length", str(len(body))))
        # where the time of the answer went (W3C Server-Timing, in ms): recording the request against
        # replays, and Bolt with the listener up to its acknowledgement; the rest of what the sender
        # waited was spent before this code ran (a free thread, the interpreter lock) or on the way
        answered = time.perf_counter()
        out_headers.append(
            ("Server-Timing", f"replay;dur={(gated - started) * 1000:.1f}, handle;dur={(answered - gated) * 1000:.1f}")
        )
        start_response(f"{response.status} {_REASONS.get(response.status, '')}".strip(), out_headers)
        return [body]

    def _refusal(
        self, start_response: StartResponse, data: bytes, headers: dict[str, str | Sequence[str]]
    ) -> Iterable[bytes] | None:
        """The answer to a request that is not let in (None when it is)."""
        assert self.gate is not None
        timestamp, signature = headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature")
        verdict = self.gate.check(
            data, timestamp if isinstance(timestamp, str) else None, signature if isinstance(signature, str) else None
        )
        if verdict is Verdict.ACCEPTED:
            return None
        if verdict is Verdict.REPLAYED and "x-slack-retry-num" in headers:
            # Slack's own retry of a delivery that was let in already: done, and no more retries please
            log.info("a retried delivery arrived with the same signature as one let in; ignored")
            return self._reply(start_response, 200, b"", extra=[("X-Slack-No-Retry", "1")])
        log.warning("refused a request from Slack: %s", "replayed" if verdict is Verdict.REPLAYED else "bad signature")
        error = "replayed request" if verdict is Verdict.REPLAYED else "invalid request"
        return self._reply(start_response, 401, json.dumps({"error": error}).encode(), "application/json")

    @staticmethod
    def _reply(
        start_response: StartResponse,
        status: int,
        body: bytes,
        kind: str = "text/plain",
        *,
        extra: Sequence[tuple[str, str]] = (),
    ) -> Iterable[bytes]:
        start_response(
            f"{status} {_REASONS.get(status, '')}",
            [("Content-Type", kind), ("Content-Length", str(len(body))), *extra],
        )
        return [body]


class MetricsWeb:
    """The WSGI application of the metrics port: `GET /metrics` (Prometheus), and nothing else."""

    def __init__(self, bot: SlackDoor) -> None:
        self.bot = bot

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") != "/metrics":
            return Web._reply(start_response, 404, b"not found\n")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return Web._reply(start_response, 405, b"method not allowed\n")
        return Web._reply(start_response, 200, self.bot.metrics.render(), METRICS_CONTENT_TYPE)


# slack_sdk's builtin client reads a WebSocket message by recursing once per read of this many bytes:
# with its default of 1 KiB, an envelope of about a megabyte ends in a RecursionError, the connection
# is lost, and Slack sends the envelope again (and again). 64 KiB reads take envelopes 64 times larger.
SOCKET_RECEIVE_BUFFER = 64 * 1024


def guard_envelopes(client: Any, *, api_url: str) -> None:
    """Check every Socket Mode envelope's payload for Slack's shape before the client's listeners (the
    Bolt handler) see it: one of another shape is acknowledged, so that it is not sent again, and
    dropped with a log line, where Bolt would raise building its request and never acknowledge it.
    Also reads large envelopes whole (SOCKET_RECEIVE_BUFFER); call it before the client connects."""
    client.receive_buffer_size = max(int(getattr(client, "receive_buffer_size", 0) or 0), SOCKET_RECEIVE_BUFFER)
    listeners = list(client.socket_mode_request_listeners)

    def checked(client: Any, req: Any) -> None:
        problem = shapes.problem(req.payload, api_url=api_url)
        if problem is None:
            try:
                for listener in listeners:
                    listener(client, req)
                return
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:  # what the check missed
                problem = f"unreadable payload ({e.__class__.__name__})"
        log.warning("refused a malformed Socket Mode envelope (%s): %s", req.type, problem)
        client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    client.socket_mode_request_listeners[:] = [checked]


def serve(
    bot: SlackDoor,
    *,
    port: int,
    metrics_port: int,
    app_token: str | None,
    host: str = "0.0.0.0",  # noqa: S104
    ping_interval: float = 2.0,
    stale_after: float = 6.0,
    alive: Checks = _none,
) -> None:
    """Run until SIGTERM or SIGINT. Socket Mode when `app_token` is given (pinging every
    `ping_interval`, replacing a connection silent for `stale_after` seconds), HTTP otherwise.
    `alive` says what has died that the process cannot do without (/healthz); /readyz asks the
    database, and in Socket Mode whether the connection is up."""
    # (the interpreter's switch interval is left at its default 5 ms: a shorter one no longer helps an
    # acknowledgement in a burst since the pools start their threads up front, docs/performance.md)
    handler: Any = None
    if app_token:
        from bot.slack.socket_mode import SocketModeHandler

        handler = SocketModeHandler(bot.app, app_token, ping_interval=ping_interval, stale_after=stale_after)
        guard_envelopes(handler.client, api_url=bot.settings.slack_api_url)
        handler.connect()

    def ready() -> list[str]:
        problems = []
        if handler is not None:
            connected = bool(handler.client.is_connected())
            bot.metrics.socket_connected.set(1 if connected else 0)
            if not connected:
                problems.append("the Socket Mode connection to Slack is down")
        database = bot.db.ping()
        if database:
            problems.append(database)
        return problems

    settings = bot.settings
    server = create_server(
        Web(bot, ready=ready, socket_mode=handler is not None, alive=alive),
        host=host,
        port=port,
        threads=settings.http_threads,
        # a body larger than any Slack payload is answered 413 from its Content-Length, before it is
        # read (waitress refuses at max_request_body_size and more; its default buffers 1 GiB to /tmp)
        max_request_body_size=MAX_BODY + 1,
        channel_timeout=max(1, int(settings.http_idle_seconds)),
        cleanup_interval=max(1, min(30, int(settings.http_idle_seconds / 2))),
        connection_limit=settings.http_connection_limit,
    )
    server.channel_class = _RefusingChannel
    metrics_stop = threading.Event()
    try:
        metrics_thread = _serve_metrics(bot, host=host, port=metrics_port, stop=metrics_stop)
    except BaseException:  # its port in use: the Slack port is not left open behind the error
        server.close()
        raise
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    log.info(
        "nsstuck serving on %s:%s (%s mode, %d HTTP request threads), /metrics on port %s",
        host,
        server.effective_port,
        "socket" if handler else "HTTP",
        server.adj.threads,
        metrics_port,
    )
    if current_format() == "text":  # in JSON, every line of the output is a log record: the one above
        print(
            f"nsstuck serving on http://{host}:{server.effective_port} ({'Socket' if handler else 'HTTP'} mode)",
            flush=True,
        )
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()  # the listening socket
        metrics_stop.set()
        wasyncore.close_all(server._map)  # and the connections still open (a client's keep-alive)
        if handler is not None:
            handler.close()
        metrics_thread.join(timeout=5)
        bot.close()


def _serve_metrics(bot: SlackDoor, *, host: str, port: int, stop: threading.Event) -> threading.Thread:
    """GET /metrics on its own port, served by a waitress server of its own (its own connection map,
    so that neither port's connections count against the other's limit) on a thread that stops, and
    closes every connection, within half a second of `stop`. Binds before it returns (a port in use
    fails the start)."""
    connections: dict[int, Any] = {}
    server = create_server(
        MetricsWeb(bot),
        map=connections,
        host=host,
        port=port,
        threads=2,  # a scrape every few seconds
        max_request_body_size=1024,
        channel_timeout=30,
        cleanup_interval=15,
        connection_limit=20,
    )

    def run() -> None:
        try:
            while not stop.is_set():
                wasyncore.loop(timeout=0.5, map=connections, use_poll=server.adj.asyncore_use_poll, count=1)
        finally:
            server.close()
            wasyncore.close_all(connections)
            server.task_dispatcher.shutdown()

    thread = threading.Thread(target=run, name="nsstuck-metrics", daemon=True)
    thread.start()
    return thread
