"""Clocks: the emulator never reads the wall clock directly, so tests can drive time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class RealClock:
    """Wall-clock time (UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when if when.tzinfo else when.replace(tzinfo=UTC)


def rfc3339(when: datetime) -> str:
    """``metav1.Time`` serialisation: second precision, ``Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)


def go_time(when: datetime) -> str:
    """Go's ``time.Time.String()`` for a UTC time (used in ``field is immutable`` messages)."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
