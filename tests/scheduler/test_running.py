"""The scheduler runs its jobs and stops cleanly."""

from __future__ import annotations

import logging
import re
import threading

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from bot.scheduler import running


def test_jobs_run_and_the_scheduler_stops() -> None:
    ran = threading.Event()
    scheduler = running.start([running.Job("probe", ran.set, IntervalTrigger(seconds=0.05))])
    try:
        assert ran.wait(5)
        assert [j.id for j in scheduler.get_jobs()] == ["probe"]
    finally:
        running.stop(scheduler)
    assert not scheduler.running


def test_a_failing_job_says_so_with_its_name_and_is_not_counted(caplog: pytest.LogCaptureFixture) -> None:
    """A job that raises is logged as failed, with how long it ran, and `succeeded` is not told; the error
    goes on to the scheduler (which logs it too), where before this test only a timing-dependent path of
    other tests reached it."""
    counted: list[str] = []

    def broken() -> None:
        raise RuntimeError("the database went away")

    run = running._said(running.Job("digest", broken, IntervalTrigger(seconds=60)), counted.append)
    with caplog.at_level(logging.INFO, logger="bot.scheduler.running"), pytest.raises(RuntimeError):
        run()
    failed = [r for r in caplog.records if r.name == "bot.scheduler.running"]
    assert [r.levelno for r in failed] == [logging.ERROR]
    assert re.fullmatch(r"job digest failed after \d+[.]\d\ds", failed[0].getMessage())
    assert failed[0].exc_info is not None
    assert "the database went away" in str(failed[0].exc_info[1])
    assert counted == []
    ok = running._said(running.Job("digest", lambda: 7, IntervalTrigger(seconds=60)), counted.append)
    assert ok() == 7
    assert counted == ["digest"]
