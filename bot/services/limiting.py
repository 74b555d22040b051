"""Rate limits on what people ask for: token buckets by key (a user, a channel), in memory.

Each key may spend `per_minute` tokens at once and gets them back at `per_minute` a minute. A bucket
that has filled up again is the same as no bucket, so it is dropped: memory holds only the keys that
asked within the last minute. Per replica: N replicas allow N times the rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError("a rate limit allows at least one a minute")
        self.capacity = float(per_minute)
        self.refill = per_minute / 60.0  # tokens a second
        self.clock = clock
        self._lock = threading.Lock()
        # key -> (tokens left, when they were counted)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._swept = clock()

    def allow(self, key: str) -> bool:
        """Spend one token of `key`'s bucket; False (nothing spent) when it is empty."""
        now = self.clock()
        with self._lock:
            if now - self._swept >= 60.0:
                self._sweep(now)
            tokens, at = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - at) * self.refill)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                return False
            self._buckets[key] = (tokens - 1.0, now)
            return True

    def retry_after(self, key: str) -> float:
        """Seconds until `key` may ask again (0 when it may now)."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - at) * self.refill)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.refill

    def __len__(self) -> int:
        return len(self._buckets)

    def _sweep(self, now: float) -> None:
        self._swept = now
        full = [k for k, (tokens, at) in self._buckets.items() if tokens + (now - at) * self.refill >= self.capacity]
        for key in full:
            del self._buckets[key]


class CommandLimits:
    """The per-user and per-channel limits on commands, checked in that order."""

    def __init__(self, *, user_per_minute: int, channel_per_minute: int) -> None:
        self.users = RateLimiter(user_per_minute)
        self.channels = RateLimiter(channel_per_minute)

    def refusal(self, user: str, channel: str) -> str | None:
        """None when the command may run; else which limit it is over ("user" or "channel")."""
        if not self.users.allow(user):
            return "user"
        if not self.channels.allow(channel):
            return "channel"
        return None
