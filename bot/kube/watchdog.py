"""The end of a call through the client (urllib3), whatever the server sends meanwhile.

urllib3's timeouts are per receive: a server that trickles its status line and headers a byte at a
time, each within the read timeout, holds the calling thread for as long as it likes, long after the
diagnosis that made the call has answered without it (issue 36). The body is bounded by our own reader
(`transport._read_by_client`), but the headers are read inside urllib3 before it hands the answer over,
and so is the whole body of an error answer (the client's `ApiException` reads it).

So every call through the client is watched: its connections are those urllib3 opens or reuses for
it (`WatchedHTTPConnection.request` adopts them, through a thread-local), and when the call's time is
up one watcher thread shuts their sockets down. The calling thread then gets an error from its read
and stops; the caller says "timed out". One thread watches every call of the process, ordered by
deadline: a call costs a heap push, not a thread.

urllib3 is pinned to its minor (pyproject.toml): `PoolManager.pool_classes_by_scheme`, through which
the pools get these connections, is checked by tests/foundation/test_patched_names.py.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from types import TracebackType
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()


class Watch:
    """One call's time: `with Watch(ends):` around everything the call reads. `fired` says whether its
    sockets were shut because the time was up."""

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._connections: list[HTTPConnection] = []
        self._outer: Watch | None = None

    def adopt(self, connection: HTTPConnection) -> None:
        """A connection this call sends on (shut at once if the time is already up)."""
        with self._lock:
            if not self.fired:
                self._connections.append(connection)
                return
        _shut(connection)

    def fire(self) -> None:
        with self._lock:
            if self._done or self.fired:
                return
            self.fired = True
            connections, self._connections = self._connections, []
        for connection in connections:
            _shut(connection)

    def __enter__(self) -> Watch:
        self._outer = getattr(_current, "watch", None)
        _current.watch = self
        _WATCHER.add(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        with self._lock:
            self._done = True
            self._connections = []
        _current.watch = self._outer


def _shut(connection: HTTPConnection) -> None:
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):  # already closed, or never connected
        sock.shutdown(socket.SHUT_RDWR)


class _Watcher:
    """The one thread that fires watches whose time is up (started with the first watch)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: Watch) -> None:
        with self._wake:
            heapq.heappush(self._heap, (watch.ends, next(self._order), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="nsstuck-call-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is watch:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap:
                    self._wake.wait()
                ends, _, watch = self._heap[0]
                left = ends - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._heap)
            watch.fire()


_WATCHER = _Watcher()


class _Adopted:
    def request(self, *args: Any, **kwargs: Any) -> Any:
        watch: Watch | None = getattr(_current, "watch", None)
        if watch is not None:
            watch.adopt(self)  # type: ignore[arg-type]
        return super().request(*args, **kwargs)  # type: ignore[misc]


class WatchedHTTPConnection(_Adopted, HTTPConnection):
    pass


class WatchedHTTPSConnection(_Adopted, HTTPSConnection):
    pass


class WatchedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class WatchedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection


def watched(pool_manager: Any) -> None:
    """Make every pool `pool_manager` opens from now on send on watched connections."""
    pool_manager.pool_classes_by_scheme = {"http": WatchedHTTPConnectionPool, "https": WatchedHTTPSConnectionPool}
