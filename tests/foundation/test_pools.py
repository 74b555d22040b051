"""StartedPool: every thread running once the pool is made, so that a burst of submits starts none."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from bot.services.pools import StartedPool


def _named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


def test_its_threads_run_before_the_first_job_and_a_burst_starts_none() -> None:
    pool = StartedPool(max_workers=6, thread_name_prefix="started-test")
    try:
        started = _named("started-test")
        assert len(started) == 6
        assert all(t.is_alive() for t in started)
        # six jobs that each wait for all six: they can only finish on six threads at once
        together = threading.Barrier(6, timeout=10)
        names = [pool.submit(lambda: (together.wait(), threading.current_thread().name)[1]) for _ in range(6)]
        assert sorted(f.result(timeout=10) for f in names) == sorted(t.name for t in started)
        assert _named("started-test") == started  # no thread was started for them
    finally:
        pool.shutdown(wait=True)
    assert not _named("started-test")


def test_a_plain_pool_starts_its_threads_one_submit_at_a_time() -> None:
    """What StartedPool is for: the standard pool starts a thread inside submit."""
    pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix="plain-test")
    try:
        assert not _named("plain-test")
        pool.submit(lambda: None).result(timeout=10)
        assert len(_named("plain-test")) == 1
    finally:
        pool.shutdown(wait=True)


def test_a_subclass_submit_is_not_used_for_the_start() -> None:
    seen: list[object] = []

    class Counting(StartedPool):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(fn)
            return super().submit(fn, *args, **kwargs)

    pool = Counting(max_workers=3, thread_name_prefix="counting-test")
    try:
        assert seen == []
        assert pool.submit(lambda: 7).result(timeout=10) == 7
        assert len(seen) == 1
    finally:
        pool.shutdown(wait=True)
