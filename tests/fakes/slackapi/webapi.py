"""The HTTP side of the emulator: ``/api/<method>``, ``/webhook/...`` (response_url) and ``/upload/v1/...``.

A standard-library ThreadingHTTPServer in a daemon thread; every request is journaled.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.fakes.quickparse import QuickParsing
from tests.fakes.tracing import UntracedHTTPServer, untraced

from .faults import Faults, Journal, JournalEntry
from .methods import APP_TOKEN_METHODS, METHODS, Call, Reply
from .ratelimit import RateLimiter
from .state import SlackError, State

# Form fields other SDKs send as JSON strings.
JSON_FORM_FIELDS = frozenset({"blocks", "attachments", "view", "files", "metadata", "user_auth_blocks"})


def parse_params(raw: bytes, content_type: str, query: str) -> dict[str, Any]:
    """Query string plus body (JSON object, form, or empty). Raises ValueError on a JSON body that is not an object."""
    params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    text = raw.decode("utf-8", errors="replace")
    if ctype == "application/json":
        if text.strip():
            body = json.loads(text)
            if not isinstance(body, dict):
                raise ValueError("JSON body is not an object")
            params.update(body)
    elif text:
        params.update(parse_qsl(text, keep_blank_values=True))
    for name in JSON_FORM_FIELDS:
        value = params.get(name)
        if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                params[name] = json.loads(value)
    return params


def _redacted_headers(headers: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name.lower() == "authorization":
            scheme = value.split(" ", 1)[0] if value else ""
            out[name] = f"{scheme} [redacted]"
        else:
            out[name] = value
    return out


class WebApiServer:
    """Serves the Web API for one emulator. ``tokens`` maps token -> "bot" | "app"."""

    def __init__(
        self,
        state: State,
        *,
        tokens: dict[str, str],
        journal: Journal,
        faults: Faults,
        limiter: RateLimiter,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.state = state
        self.tokens = tokens
        self.revoked: set[str] = set()
        self.journal = journal
        self.faults = faults
        self.limiter = limiter
        self.errors: list[str] = []  # tracebacks of emulator bugs (answered 500)
        self._host = host
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the Web API server is not running")
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    def start(self) -> None:
        api = self

        class Handler(_Handler):
            server_api = api

        httpd = UntracedHTTPServer((self._host, self._port), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.state.base_url = self.url
        self._thread = threading.Thread(
            target=untraced(httpd.serve_forever),
            name="slack-emulator-http",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    # ------------------------------------------------------------------ dispatch

    def token_kind(self, token: str | None) -> str | None:
        if not token:
            return None
        return self.tokens.get(token, "unknown")

    def handle_api(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str], bool]:
        """``(status, body, headers, reset_connection)`` for one API call."""
        if method not in METHODS:
            return 404, {"ok": False, "error": "unknown_method", "req_method": method}, {}, False
        kind = self.token_kind(token)
        if kind is None:
            return 200, {"ok": False, "error": "not_authed"}, {}, False
        if token in self.revoked:
            return 200, {"ok": False, "error": "token_revoked"}, {}, False
        if kind == "unknown":
            return 200, {"ok": False, "error": "invalid_auth"}, {}, False
        wanted = "app" if method in APP_TOKEN_METHODS else "bot"
        if kind != wanted:
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}, False
        fault = self.faults.take(method, params)
        if fault is not None:
            status, body, headers = fault.response()
            return status, body, headers, fault.reset_connection
        channel = params.get("channel")
        if isinstance(channel, str):
            with contextlib.suppress(SlackError):
                channel = self.state.resolve_channel(channel).id
        retry_after = self.limiter.check(method, channel if isinstance(channel, str) else None)
        if retry_after is not None:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}, False
        try:
            reply: Reply = METHODS[method](self.state, Call(method, params, kind))
        except SlackError as exc:
            return 200, {"ok": False, "error": exc.code, **exc.extra}, {}, False
        except Exception:
            self.errors.append(traceback.format_exc())
            return 500, {"ok": False, "error": "internal_error"}, {}, False
        return reply.status, reply.body, reply.headers, False


class _Handler(QuickParsing):
    server_api: WebApiServer
    protocol_version = "HTTP/1.1"
    server_version = "slack-emulator"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped waiting (a timeout): done all the same
            self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch(b"")

    def do_POST(self) -> None:
        self._dispatch(self._read_body())

    def _dispatch(self, raw: bytes) -> None:
        api = self.server_api
        parts = urlsplit(self.path)
        path = parts.path
        started = api.state.clock()
        headers = _redacted_headers(self.headers)
        if path.startswith("/api/"):
            self._api(path[len("/api/") :], raw, parts.query, headers, started)
        elif path.startswith("/webhook/") and self.command == "POST":
            text = raw.decode("utf-8", errors="replace")
            status, answer = api.state.handle_webhook(path, text)
            parsed: Any
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            api.journal.add(
                JournalEntry(
                    "webhook",
                    path,
                    headers,
                    parsed if isinstance(parsed, dict) else {},
                    started,
                    None,
                    status,
                    answer,
                    text,
                )
            )
            self._send(status, answer.encode(), "text/plain; charset=utf-8")
        elif path.startswith("/upload/v1/") and self.command == "POST":
            file_id = path.rsplit("/", 1)[-1]
            with api.state.lock:
                record = api.state.files.get(file_id)
                if record is not None:
                    record.content = raw
            status = 200 if record is not None else 404
            answer = f"OK - {len(raw)}" if record is not None else "file_not_found"
            api.journal.add(
                JournalEntry(
                    "upload", path, headers, {"file_id": file_id, "length": len(raw)}, started, None, status, answer
                )
            )
            api.state.notify()
            self._send(status, answer.encode(), "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found", "text/plain; charset=utf-8")

    def _api(self, method: str, raw: bytes, query: str, headers: dict[str, str], started: float) -> None:
        api = self.server_api
        try:
            params = parse_params(raw, self.headers.get("Content-Type", ""), query)
        except ValueError:
            body = {"ok": False, "error": "invalid_json"}
            api.journal.add(JournalEntry(method, self.path, headers, {}, started, None, 200, body))
            self._send(200, json.dumps(body).encode(), "application/json; charset=utf-8")
            return
        auth = self.headers.get("Authorization", "")
        token: str | None = auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else None
        form_token = params.pop("token", None)
        if not token and isinstance(form_token, str):
            token = form_token
        delay = api.faults.latency(method)
        if delay > 0:
            time.sleep(delay)
        status, body, extra_headers, reset = api.handle_api(method, params, token)
        api.journal.add(
            JournalEntry(
                method=method,
                path=urlsplit(self.path).path,
                headers=headers,
                params=params,
                time=started,
                token_kind=api.token_kind(token),
                status=status,
                response=None if reset else body,
                raw_body=raw.decode("utf-8", errors="replace")
                if form_token is None
                else "[redacted: the body held a token]",
            )
        )
        if reset:
            self.close_connection = True
            return
        api.state.notify()
        self._send(status, json.dumps(body).encode(), "application/json; charset=utf-8", extra_headers)
