"""Clocks: the wall clock, and a manual one for deterministic tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Anything that returns the current time in seconds since the epoch."""

    def __call__(self) -> float: ...


def wall_clock() -> float:
    return time.time()


class FakeClock:
    """A clock that only moves when told to (``advance``/``set``). Thread-safe."""

    def __init__(self, start: float = 1_763_625_600.0) -> None:  # 2025-11-20T08:00:00Z
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now
