"""Thread pools whose threads are all running before the first job comes.

A plain `ThreadPoolExecutor` starts a thread at a submit that finds none idle, and waits there until
the new thread runs, holding a lock that every pool of the process shares (`concurrent.futures`'
`_global_shutdown_lock`). In a burst of commands each acknowledgement hands its listener to Bolt's
pool and its diagnosis to ours: their submits queued behind one another's thread starts, each start
waiting for the interpreter among fifty busy threads (`bench/slack.py`, docs/performance.md).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

START_SECONDS = 30.0


class StartedPool(ThreadPoolExecutor):
    """A `ThreadPoolExecutor` whose `max_workers` threads are started when it is made; a submit then
    only hands the job to a waiting thread. Raises RuntimeError when the threads cannot be started."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        # one job per thread, each held until every one has begun: the pool must start all its threads
        everyone = threading.Barrier(max_workers + 1, timeout=START_SECONDS)
        for _ in range(max_workers):
            ThreadPoolExecutor.submit(self, everyone.wait)  # not a subclass's submit: nothing to carry
        try:
            everyone.wait()
        except threading.BrokenBarrierError:
            self.shutdown(wait=False, cancel_futures=True)
            raise RuntimeError(f"could not start the {max_workers} threads of a pool in {START_SECONDS:g} s") from None
