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
import sys
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
    """A ThreadingHTTPServer whose request threads run without a tracer (serve it from an `untraced` thread)."""

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        sys.settrace(None)
        super().process_request_thread(request, client_address)
