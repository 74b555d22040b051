"""/healthz fails when what `nsstuck serve` cannot do without has died: the scheduler's thread, or a
worker pool (issue 24 §3). The real scheduler and real pools, behind the real WSGI app, over HTTP;
`nsstuck serve` builds the same check from the same pieces (bot/cli.py)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from bot.scheduler import running
from bot.services.health import pool_problems
from bot.slack.server import Checks, Web


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _served(alive: Checks, ready: Checks) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, Web(None, ready=ready, socket_mode=False, alive=alive), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return int(e.code), e.read().decode()


def test_healthz_fails_when_the_scheduler_thread_or_a_pool_has_died() -> None:
    scheduler = running.start([running.Job("probe", lambda: None, IntervalTrigger(seconds=60))])
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-diagnose")
    pool.submit(lambda: None).result()  # a worker thread exists

    def alive() -> Sequence[str]:
        return [*running.problems(scheduler), *pool_problems("diagnosis", pool)]

    try:
        with _served(alive, lambda: ()) as url:
            assert _get(url + "/healthz") == (200, "ok\n")
            pool.shutdown(wait=True)
            assert _get(url + "/healthz") == (503, "not healthy: the diagnosis pool has been shut down\n")
            # the scheduler's thread ends (as if it had died); shutdown also joins it
            scheduler.shutdown(wait=True)
            code, body = _get(url + "/healthz")
            assert code == 503
            assert body.splitlines() == [
                "not healthy: the scheduler is not running",
                "not healthy: the diagnosis pool has been shut down",
            ]
            assert _get(url + "/readyz") == (200, "ready\n")  # readiness is another question
    finally:
        if scheduler.running:
            scheduler.shutdown(wait=True)
        pool.shutdown(wait=True)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_scheduler_thread_dying_under_a_running_scheduler_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler still says it runs, but an exception out of its loop ended its thread."""
    scheduler = running.start([])
    try:
        assert running.problems(scheduler) == []

        def broken() -> float:
            raise RuntimeError("the job store went away")

        monkeypatch.setattr(scheduler, "_process_jobs", broken)
        scheduler.wakeup()
        scheduler._thread.join(5)
        assert scheduler.running
        assert running.problems(scheduler) == ["the scheduler's thread has died"]
    finally:
        running.stop(scheduler)


def test_readyz_says_what_is_not_ready() -> None:
    with _served(lambda: (), lambda: ["the database is unavailable (OperationalError)"]) as url:
        assert _get(url + "/readyz") == (503, "not ready: the database is unavailable (OperationalError)\n")
        assert _get(url + "/healthz") == (200, "ok\n")


def test_healthz_fails_when_no_diagnosis_worker_process_can_be_started() -> None:
    """Real worker processes that die as they start (here: a log level they cannot set), over and over:
    the pool tries again after growing pauses and /healthz says it is broken after three."""
    from bot.services.supervising import WorkerPool
    from bot.services.working import WorkerSetup

    broken = WorkerSetup(log_level="NOT-A-LEVEL", log_format="text", credential_timeout=1.0, pool_size=4)
    pool = WorkerPool(size=1, setup=broken)
    try:
        with _served(pool.problems, lambda: ()) as url:
            deadline = time.monotonic() + 30
            while _get(url + "/healthz")[0] == 200 and time.monotonic() < deadline:
                time.sleep(0.2)
            code, body = _get(url + "/healthz")
            assert code == 503
            assert body.startswith("not healthy: no diagnosis worker process can be started (3 attempts in a row")
    finally:
        pool.close()
    assert pool.problems() == ["the diagnosis worker processes have been shut down"]
