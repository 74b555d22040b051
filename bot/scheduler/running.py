"""The scheduler inside `nsstuck serve`: one BackgroundScheduler, started with the bot, stopped with it.

Jobs (digests, follow-ups of open incidents) are added by the issues that bring them; each job owns
its unit of work and must be safe to run on several replicas (claim the run in the database).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger

from bot.logs import log_context
from bot.services.health import pool_problems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    id: str
    func: Callable[[], Any]
    trigger: BaseTrigger
    run_at_start: bool = False  # also once right away (start-up recovery work)


def start(jobs: Iterable[Job] = (), *, succeeded: Callable[[str], None] | None = None) -> BackgroundScheduler:
    """Start the jobs; `succeeded(job id)` is called each time one ends without an error (metrics)."""
    scheduler = BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})
    for job in jobs:
        first: dict[str, Any] = {"next_run_time": datetime.now(UTC)} if job.run_at_start else {}
        scheduler.add_job(_said(job, succeeded), job.trigger, id=job.id, name=job.id, replace_existing=True, **first)
    scheduler.start()
    log.info("scheduler started with %d job(s)", len(scheduler.get_jobs()))
    return scheduler


def _said(job: Job, succeeded: Callable[[str], None] | None = None) -> Callable[[], Any]:
    """The job's function, saying one line per run (how long it took, or that it failed), with the
    job's name on every line logged while it runs, and telling `succeeded` when it did not fail."""

    def run() -> Any:
        with log_context(job=job.id):
            started = time.monotonic()
            try:
                result = job.func()
            except Exception:
                log.exception("job %s failed after %.2fs", job.id, time.monotonic() - started)
                raise
            log.info("job %s ran in %.2fs", job.id, time.monotonic() - started)
            if succeeded is not None:
                succeeded(job.id)
            return result

    return run


def problems(scheduler: BackgroundScheduler) -> list[str]:
    """Why the scheduler cannot run its jobs any more (its thread died, or it was shut down), or []."""
    if not scheduler.running:
        return ["the scheduler is not running"]
    thread = getattr(scheduler, "_thread", None)
    if thread is None or not thread.is_alive():
        return ["the scheduler's thread has died"]
    pool = getattr(scheduler._lookup_executor("default"), "_pool", None)
    return pool_problems("scheduler's job", pool) if isinstance(pool, ThreadPoolExecutor) else []


def stop(scheduler: BackgroundScheduler) -> None:
    scheduler.shutdown(wait=True)
