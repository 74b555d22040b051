"""Raw JSON calls through the official client's ApiClient, with errors translated at the boundary.

We read objects as plain JSON rather than typed models: the typed models drop fields they do not
know (custom resources, new fields), and deserialising thousands of objects into them is slow.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from bot.kube.connecting import Connection

UNAVAILABLE = "the server is currently unable to handle the request"
NOT_FOUND = "the server could not find the requested resource"


@dataclass(frozen=True)
class CallError(Exception):
    """A call that did not produce a 2xx answer, as a client would describe it."""

    kind: str  # status | timeout | connection
    message: str
    status: int | None = None
    body: str | None = None
    reason: str | None = None  # the Status reason (Forbidden, NotFound, ...) when the body was a Status
    retry_after: float | None = None

    def __str__(self) -> str:
        return self.message


def _status_message(status: int, body: str) -> tuple[str, str | None]:
    """The message client-go would show for an error response, and the Status reason if any."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        data = None
    if isinstance(data, dict) and data.get("kind") == "Status" and data.get("message"):
        return str(data["message"]), data.get("reason")
    if status == 503:
        return UNAVAILABLE, "ServiceUnavailable"
    if status == 404:
        return NOT_FOUND, "NotFound"
    if status == 401:
        return "Unauthorized", "Unauthorized"
    if status == 403:
        return "forbidden", "Forbidden"
    return f"the server returned HTTP {status}", None


class Transport:
    """GET (and later PATCH/PUT/DELETE) of raw JSON documents, one connection pool, thread-safe."""

    def __init__(self, connection: Connection, *, call_timeout: float = 10.0, retries_on_429: int = 1) -> None:
        self.connection = connection
        self.call_timeout = call_timeout
        self.retries_on_429 = retries_on_429

    def get(self, path: str, query: dict[str, str] | None = None, *, timeout: float | None = None) -> Any:
        return self.call("GET", path, query=query, timeout=timeout)

    def call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        attempts = self.retries_on_429 + 1
        for attempt in range(attempts):
            try:
                return self._once(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
            except CallError as e:
                if e.status == 429 and attempt + 1 < attempts:
                    time.sleep(min(e.retry_after if e.retry_after is not None else 1.0, 5.0))
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> Any:
        api = self.connection.api_client
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            response = api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                # a (connect, read) pair: the client silently ignores a single float
                _request_timeout=(timeout or self.call_timeout, timeout or self.call_timeout),
            )
            raw = response.data
        except ApiException as e:
            if not e.status and e.body is None:
                # not an answer: the client failed on its side, e.g. a TLS handshake (status 0)
                raise CallError("connection", self.connection.scrub(_client_failure(str(e.reason or "")))) from None
            text = e.body.decode("utf-8", "replace") if isinstance(e.body, bytes) else str(e.body or "")
            message, reason = _status_message(int(e.status or 0), text)
            raise CallError(
                "status",
                self.connection.scrub(message),
                int(e.status or 0),
                self.connection.scrub(text[:2000]),
                reason,
                _retry_after((e.headers or {}).get("Retry-After")),
            ) from None
        except urllib3.exceptions.NewConnectionError as e:
            # urllib3 makes this a subclass of its timeout error; it is a refused or failed connection
            raise CallError("connection", self.connection.scrub(_connection_message(e))) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError) as e:
            raise CallError(
                "timeout", f"timed out after {timeout or self.call_timeout:g}s ({e.__class__.__name__})"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise CallError("connection", self.connection.scrub(_connection_message(e))) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise CallError("status", "the server sent a response that is not JSON", 200) from None


def _retry_after(value: object) -> float | None:
    try:
        return max(0.0, float(str(value))) if value is not None else None
    except ValueError:
        return None


def _client_failure(reason: str) -> str:
    """What the client put in an ApiException without a response: "SSLError\n[SSL: ...] ..." for TLS."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if lines and lines[0] == "SSLError":
        return f"cannot connect: TLS failed: {lines[1] if len(lines) > 1 else 'handshake error'}"
    # the client's other status 0: a request it could not build (a body of a type it cannot send)
    return f"the request could not be made: {lines[0] if lines else 'the client failed before sending it'}"


def _connection_message(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    text = str(reason)
    # urllib3 wraps the useful part: "...: Failed to establish a new connection: [Errno 111] Connection refused"
    if "Failed to establish a new connection:" in text:
        text = text.split("Failed to establish a new connection:", 1)[1].strip().rstrip(")'\"")
    return f"cannot connect: {text}"
