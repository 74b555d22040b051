"""Every scheduled job of `nsstuck serve`, in one list, with its interval.

Each job calls a use case; what it has to tell people goes through the notifier it is given (Slack
implements it), so this module never imports a door. Every job is safe on several replicas: digests,
the watch's rounds and request expiry are claimed in the database, posts and executions are
conditional updates.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from apscheduler.triggers.interval import IntervalTrigger

from bot.kube.registry import ClusterRegistry
from bot.scheduler.running import Job
from bot.services.diagnosing import Diagnoser
from bot.services.digesting import replica_name, run_due
from bot.services.followup import follow_up
from bot.services.metrics import Metrics
from bot.services.notifying import ClockNotifier
from bot.services.outbox import Outbox
from bot.services.recording import prune_snapshots
from bot.services.remediating import Remediation
from bot.services.watching import Watch, registry_lister, watched_clusters
from bot.settings import AppConfig, Settings
from bot.store.database import Database


def job_list(
    settings: Settings,
    *,
    config: AppConfig,
    db: Database,
    clusters: ClusterRegistry,
    diagnoser: Diagnoser,
    outbox: Outbox,
    remediation: Remediation,
    notifier: ClockNotifier,
    clock: Callable[[], datetime],
    metrics: Metrics | None = None,
) -> list[Job]:
    """The jobs, built from the use cases and the notifier. `clock` is the digests' clock, which the
    watch also measures how long namespaces have been Terminating against."""

    def digests() -> None:
        run_due(db, config, clusters, now=clock(), poster=notifier.post_digest)

    watch = Watch(
        db,
        watched=watched_clusters(config),
        lister=registry_lister(clusters),
        diagnoser=diagnoser,
        outbox=outbox,
        notifier=notifier,
        round_seconds=settings.watch_seconds,
        clock=clock,
        by=replica_name(),
        metrics=metrics,
        recurrence_after=settings.recurrence_after,
    )

    return [
        Job("repost-unposted-reports", outbox.repost_pending, IntervalTrigger(seconds=settings.repost_seconds)),
        Job(
            "follow-up-open-incidents",
            partial(
                follow_up,
                db,
                registered=clusters.knows,
                diagnoser=diagnoser,
                notifier=notifier,
                recurrence_after=settings.recurrence_after,
            ),
            IntervalTrigger(seconds=settings.follow_up_seconds),
        ),
        Job(
            "prune-old-snapshots",
            partial(prune_snapshots, db, keep=timedelta(days=settings.snapshot_retention_days)),
            IntervalTrigger(hours=1),
        ),
        # digests: due ones are claimed in the database, so one replica posts each; at start-up too,
        # to make up a run missed while nsstuck was down
        Job("digests", digests, IntervalTrigger(seconds=settings.digest_tick_seconds), run_at_start=True),
        # the watch: a round every NSSTUCK_WATCH_SECONDS, each cluster's claimed in the database by one
        # replica; looked at twice a round, so that no round passes unclaimed for a late tick
        Job("watch", watch.run_round, IntervalTrigger(seconds=settings.watch_seconds / 2), run_at_start=True),
        # expiry of requests, reconciliation of executions cut short by a crash, follow-through
        Job(
            "remediation-chores",
            remediation.chores,
            IntervalTrigger(seconds=min(settings.repost_seconds, 30.0)),
            run_at_start=True,
        ),
    ]
