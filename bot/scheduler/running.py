"""The scheduler inside `nsstuck serve`: one BackgroundScheduler, started with the bot, stopped with it.

Jobs (digests, follow-ups of open incidents) are added by the issues that bring them; each job owns
its unit of work and must be safe to run on several replicas (claim the run in the database).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    id: str
    func: Callable[[], Any]
    trigger: BaseTrigger
    run_at_start: bool = False  # also once right away (start-up recovery work)


def start(jobs: Iterable[Job] = ()) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})
    for job in jobs:
        first: dict[str, Any] = {"next_run_time": datetime.now(UTC)} if job.run_at_start else {}
        scheduler.add_job(job.func, job.trigger, id=job.id, name=job.id, replace_existing=True, **first)
    scheduler.start()
    log.info("scheduler started with %d job(s)", len(scheduler.get_jobs()))
    return scheduler


def stop(scheduler: BackgroundScheduler) -> None:
    scheduler.shutdown(wait=True)
