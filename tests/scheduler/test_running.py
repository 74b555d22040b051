"""The scheduler runs its jobs and stops cleanly."""

from __future__ import annotations

import threading

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
