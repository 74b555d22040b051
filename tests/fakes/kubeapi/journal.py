"""The request journal: one record per request a test may ask about, in arrival order, bounded.

Journaled: each request of a non-admin identity, and each the admin identity sent as someone else
(impersonating), once it is authenticated and any impersonation is admitted (a 401, or a refused
impersonation, is not journaled). The admin's own requests (the controllers', the tests' set-up) are not.
"""

from __future__ import annotations

import collections
import itertools
import re
import threading
import time
from dataclasses import dataclass

CAPACITY = 100_000  # the oldest records go first past this many


@dataclass(slots=True)
class Journaled:
    """One journaled request: what it asked for, in which form, as whom, and what it was answered."""

    method: str
    path: str
    query: str = ""  # the raw query string
    accept: str = ""  # the Accept header, "" when none was sent
    peer: str = ""  # the client's end of the connection it came over (host:port): a kept connection's stays
    dry_run: bool = False  # a dryRun parameter was sent (whatever its value)
    user: str = ""  # who it acts as: after impersonation, the impersonated user
    groups: tuple[str, ...] = ()  # that user's groups (system:authenticated included)
    impersonated_by: str = ""  # who sent it, when it acts as someone else
    by_admin: bool = False  # the admin identity sent it (journaled only because it impersonated)
    seq: int = 0  # arrival order: 1 for the emulator's first journaled request, never reused (not by clear)
    at: float = 0.0  # time.monotonic() on arrival
    status: int = 0  # the status line answered; 0 until then, and when none was (a reset connection)

    @property
    def line(self) -> str:
        """``"METHOD /path"``, plus ``" dryRun"`` for a dry run (no query)."""
        return f"{self.method} {self.path}" + (" dryRun" if self.dry_run else "")

    @property
    def metadata_only(self) -> bool:
        """Every media range it accepts is a PartialObjectMetadata[List] one: the answer can only be
        metadata (client-go's metadata client adds a plain `application/json` fallback; this does not)."""
        ranges = [r.strip() for r in self.accept.split(",") if r.strip()]
        return bool(ranges) and all("as=PartialObjectMetadata" in r for r in ranges)


class Journal:
    """The emulator's one request journal (``emu.journal``): one bounded list under one lock.

    Readers get copies (taken under the lock), so a test may read while clients are still sending.
    The default view is what non-admin identities sent (what a client under test asked); ``admin=True``
    adds what the admin identity sent as someone else (all an audit log would name)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._entries: collections.deque[Journaled] = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._seq = itertools.count(1)

    def record(self, entry: Journaled) -> Journaled:
        """Append ``entry``, numbering (``seq``) and timing (``at``) it; returns it."""
        with self._lock:
            entry.seq = next(self._seq)
            entry.at = time.monotonic()
            self._entries.append(entry)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def entries(
        self, method: str | None = None, path: str | re.Pattern[str] | None = None, *, admin: bool = False
    ) -> list[Journaled]:
        """The journaled requests in arrival order: ``method`` (exact) and ``path`` (a string: equal; a
        compiled pattern: ``search``) filter; ``admin`` adds those the admin identity sent as someone else."""
        with self._lock:
            entries = list(self._entries)
        return [
            e
            for e in entries
            if (admin or not e.by_admin)
            and (method is None or e.method == method)
            and (path is None or (e.path == path if isinstance(path, str) else path.search(e.path) is not None))
        ]

    def lines(
        self, method: str | None = None, path: str | re.Pattern[str] | None = None, *, admin: bool = False
    ) -> list[str]:
        """The same requests (same filters) as ``"METHOD /path"`` lines, ``" dryRun"`` after a dry run's."""
        return [e.line for e in self.entries(method, path, admin=admin)]


__all__ = ["CAPACITY", "Journal", "Journaled"]
