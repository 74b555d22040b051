"""Fault injection, artificial latency and the request journal of the Web API."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FaultRule:
    """Answer calls of ``method`` (``"*"`` for any) with an error instead of running them.

    ``times`` limits how many calls are hit (None: until removed); ``when`` filters on the parsed params.
    ``reset_connection`` closes the socket without answering (the client sees a dropped connection).
    """

    method: str
    error: str | None = None
    http_status: int = 200
    retry_after: int | None = None
    times: int | None = 1
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] | None = None
    reset_connection: bool = False
    hits: int = 0

    def matches(self, method: str, params: dict[str, Any]) -> bool:
        if self.method not in ("*", method):
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        return self.when is None or bool(self.when(params))

    def response(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = dict(self.headers)
        status = self.http_status
        error = self.error or ("ratelimited" if status == 429 else "internal_error")
        if status == 429 or self.retry_after is not None:
            headers["Retry-After"] = str(int(self.retry_after if self.retry_after is not None else 1))
        body = self.body if self.body is not None else {"ok": False, "error": error}
        return status, body, headers


@dataclass
class JournalEntry:
    """One request the emulator received. ``headers`` never hold a token: Authorization is redacted."""

    method: str  # API method ("chat.postMessage"), or "webhook"/"upload" for the other endpoints
    path: str
    headers: dict[str, str]
    params: dict[str, Any]
    time: float
    token_kind: str | None = None  # "bot", "app", "unknown" or None (no token)
    status: int = 0
    response: Any = None
    raw_body: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.response, dict) and self.response.get("ok") is True


class Journal:
    def __init__(self) -> None:
        self._entries: list[JournalEntry] = []
        self._lock = threading.Lock()

    def add(self, entry: JournalEntry) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self, method: str | None = None) -> list[JournalEntry]:
        with self._lock:
            return [e for e in self._entries if method is None or e.method == method]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class Faults:
    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._latency: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, method: str, params: dict[str, Any]) -> FaultRule | None:
        """The first matching rule, counting the hit."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, params):
                    rule.hits += 1
                    return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._latency.clear()

    def set_latency(self, method: str, seconds: float) -> None:
        with self._lock:
            if seconds > 0:
                self._latency[method] = seconds
            else:
                self._latency.pop(method, None)

    def latency(self, method: str) -> float:
        with self._lock:
            return self._latency.get(method, self._latency.get("*", 0.0))
