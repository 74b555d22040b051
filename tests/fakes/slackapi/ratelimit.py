"""Token-bucket rate limiting per method (and optionally per channel), answering like Slack: HTTP 429."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from .clock import Clock


@dataclass
class RateRule:
    """``per_second`` tokens refill continuously up to ``burst``; a call takes one token."""

    per_second: float
    burst: int
    per_channel: bool = True


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Per-method, per-key token buckets on an injectable clock.

    ``check`` answers ``None`` when the call may proceed (and consumes a token) or the integer
    number of seconds (at least 1) to put in ``Retry-After``.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rules: dict[str, RateRule] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()
        self.limited: list[tuple[str, str, int]] = []  # (method, key, retry_after) of every 429 answered

    @property
    def rules(self) -> dict[str, RateRule]:
        with self._lock:
            return dict(self._rules)

    def set_rule(self, method: str, *, per_second: float, burst: int = 1, per_channel: bool = True) -> None:
        if per_second <= 0 or burst < 1:
            raise ValueError("per_second must be > 0 and burst >= 1")
        with self._lock:
            self._rules[method] = RateRule(per_second, burst, per_channel)
            for key in [k for k in self._buckets if k[0] == method]:
                del self._buckets[key]

    def remove_rule(self, method: str) -> None:
        with self._lock:
            self._rules.pop(method, None)

    def reset(self) -> None:
        """Refill every bucket."""
        with self._lock:
            self._buckets.clear()

    def check(self, method: str, channel: str | None) -> int | None:
        with self._lock:
            rule = self._rules.get(method)
            if rule is None:
                return None
            key = (method, (channel or "") if rule.per_channel else "")
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(float(rule.burst), now)
            else:
                elapsed = max(0.0, now - bucket.updated)
                bucket.tokens = min(float(rule.burst), bucket.tokens + elapsed * rule.per_second)
                bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            wait = (1.0 - bucket.tokens) / rule.per_second
            retry_after = max(1, math.ceil(wait - 1e-9))
            self.limited.append((method, key[1], retry_after))
            return retry_after
