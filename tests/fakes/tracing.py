"""The emulators' threads run without a tracer.

`make test` runs under coverage.py, which measures `bot/` only, yet its tracer is called for every line of
Python run in a traced thread, measured or not: the emulators' code ran about twice as slowly under it
(`tests/digests/test_collect_many.py`: 52 s of CPU without coverage, 100 s with it, 86 s with the
emulators' threads untraced). The emulators run no code of `bot/`, so leaving their threads out changes
no figure of the coverage report, only what it costs.
"""

from __future__ import annotations

import contextlib
import functools
import selectors
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def untraced(target: Callable[P, R]) -> Callable[P, R]:
    """`target`, which is run as a thread's target: no tracer (coverage.py's) in that thread."""

    @functools.wraps(target)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        sys.settrace(None)
        return target(*args, **kwargs)

    return run


@contextlib.contextmanager
def untraced_here() -> Iterator[None]:
    """No tracer in this thread for the block (emulator work run from a test's thread: its controllers'
    rounds, a scenario's objects); the thread's tracer is put back after it."""
    tracer = sys.gettrace()
    if tracer is None:
        yield
        return
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(tracer)


class UntracedHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer whose request threads run without a tracer (serve it from an `untraced` thread).

    Its accept loop sleeps until a connection comes or `shutdown()` wakes it (a socket pair), where the
    standard library's wakes every `poll_interval` to look for a shutdown: an idle emulator cost about
    0.3% of a core that way (a poll every 10 ms on each of its two listeners), and a test session keeps
    dozens of them (the applied scenarios) for the rest of its run. `poll_interval` is accepted and
    ignored; `shutdown()` still returns once the loop has ended."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stop_asked = False
        self._stopped = threading.Event()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                while not self._stopping():
                    ready = selector.select()
                    if self._stopping():
                        break
                    for key, _ in ready:
                        if key.fileobj is self:  # as BaseServer.serve_forever hands a ready listener on
                            self._handle_request_noblock()  # type: ignore[attr-defined]
                        else:  # a wake left from an earlier shutdown
                            with contextlib.suppress(OSError):
                                self._wake_read.recv(64)
                    self.service_actions()
        finally:
            self._stop_asked = False
            self._stopped.set()

    def _stopping(self) -> bool:
        return self._stop_asked

    def shutdown(self) -> None:
        self._stop_asked = True
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        # also called by TCPServer.__init__ when the bind fails, before the pair exists
        for end in (getattr(self, "_wake_read", None), getattr(self, "_wake_write", None)):
            if end is not None:
                end.close()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        sys.settrace(None)
        super().process_request_thread(request, client_address)
