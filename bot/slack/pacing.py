"""Posting to Slack in order, at Slack's pace, per channel.

`chat.postMessage` allows about one message per second per channel. Twenty diagnoses started at
once in one channel must all arrive, each thread in order, so posts are queued per channel and
paced; a 429 is not a failure but a wait (`Retry-After`), however many times it comes, and so is
a post that may still be under way at Slack (`Unsettled`, see posting.py). Other errors are retried
a few times with back-off, then the post fails and its caller keeps the report (it is in the
database) to post again later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bot.errors import TemporaryError
from bot.logs import carrying

log = logging.getLogger(__name__)

T = TypeVar("T")


class RateLimited(Exception):
    """Raised by a post when Slack answered 429; the pacer waits `retry_after` and tries again."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited, retry after {retry_after:g}s")
        self.retry_after = retry_after


class Unsettled(Exception):
    """Raised by a post that may have reached Slack without an answer (a timeout): it is looked for
    again after `wait` before it is sent again. Not a failure, like a 429."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"a post may still be under way at Slack, looking again in {wait:.1f}s")
        self.wait = wait


class Transient(TemporaryError):
    """Raised by a post for an error worth retrying (5xx, connection reset, timeout): the project's
    temporary error, as Slack's work meets it."""


@dataclass
class _Channel:
    queue: deque[tuple[Callable[[], Any], Future[Any]]] = field(default_factory=deque)
    next_at: float = 0.0
    worker: threading.Thread | None = None


class ChannelPacer:
    def __init__(
        self,
        *,
        interval: float = 1.0,
        transient_attempts: int = 4,
        max_rate_limit_wait: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = interval
        self.transient_attempts = transient_attempts
        self.max_rate_limit_wait = max_rate_limit_wait
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._closed = False

    def submit(self, channel: str, post: Callable[[], T]) -> Future[T]:
        """Queue `post` behind everything already queued for `channel`; returns its future."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(RuntimeError("the pacer is shut down"))
                return future
            state = self._channels.setdefault(channel, _Channel())
            state.queue.append((carrying(post), future))  # its lines keep the submitter's log context
            if state.worker is None:
                state.worker = threading.Thread(
                    target=self._drain, args=(channel, state), name=f"slack-post-{channel}", daemon=True
                )
                state.worker.start()
        return future

    def pending(self) -> int:
        with self._lock:
            return sum(len(c.queue) for c in self._channels.values())

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking posts and wait (up to `timeout`) for the queued ones."""
        with self._lock:
            self._closed = True
            workers = [c.worker for c in self._channels.values() if c.worker is not None]
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def _drain(self, channel: str, state: _Channel) -> None:
        while True:
            with self._lock:
                if not state.queue:
                    state.worker = None
                    return
                post, future = state.queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._run(channel, state, post))
            except BaseException as e:  # the caller's future carries it
                future.set_exception(e)

    def _run(self, channel: str, state: _Channel, post: Callable[[], T]) -> T:
        waited = 0.0
        failures = 0
        while True:
            delay = state.next_at - self.clock()
            if delay > 0:
                self.sleep(delay)
            state.next_at = self.clock() + self.interval
            try:
                return post()
            except RateLimited as e:
                pause = max(e.retry_after, self.interval)
                waited += pause
                if waited > self.max_rate_limit_wait:
                    raise
                log.info("slack rate limit on %s: waiting %.1fs", channel, pause)
                state.next_at = self.clock() + pause
            except Unsettled as e:
                pause = max(e.wait, self.interval)
                waited += pause
                if waited > self.max_rate_limit_wait:
                    raise Transient(str(e)) from None
                log.info("slack post to %s may still be under way: %s", channel, e)
                state.next_at = self.clock() + pause
            except Transient as e:
                failures += 1
                if failures >= self.transient_attempts:
                    raise
                backoff = min(30.0, self.interval * 2**failures)
                log.warning("slack post to %s failed (%s), retry %d in %.1fs", channel, e, failures, backoff)
                state.next_at = self.clock() + backoff
