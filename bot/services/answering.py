"""Answering a person who asked for a diagnosis: diagnose, record it durably, hand it to the outbox.

The door acknowledges at once and submits the work here: diagnoses run on a pool of their own
(`work`), few at once, since each already fans out on its collector's pool and the acknowledgements
must not queue behind CPU-bound work for the interpreter lock. A recorded run is published from
another pool (`posting`): its posts wait for Slack's pace, and a diagnosis worker that waited with
them would leave the next commands queued.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError, StoreUnavailableError
from bot.services.diagnosing import Diagnoser, DiagnosisResult
from bot.services.metrics import Metrics
from bot.services.outbox import Outbox
from bot.services.recording import Recorded, record
from bot.store.database import Database

log = logging.getLogger(__name__)


class Asker(Protocol):
    """The person who asked, told (only them) when their diagnosis cannot be had."""

    def could_not_diagnose(self, cluster: ClusterName, namespace: str, error: NsstuckError) -> None: ...

    def could_not_save(self, namespace: str) -> None: ...


class Answering:
    def __init__(
        self,
        db: Database,
        *,
        diagnose: Diagnoser,
        outbox: Outbox,
        metrics: Metrics,
        outage_seconds: float,
        workers: int = 4,
    ) -> None:
        self.db = db
        self.diagnose = diagnose
        self.outbox = outbox
        self.metrics = metrics
        self.outage_seconds = outage_seconds
        self.work = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsstuck-diagnose")
        self.posting = ThreadPoolExecutor(max_workers=32, thread_name_prefix="nsstuck-post")

    def submit(self, cluster: ClusterName, namespace: str, *, channel: str, user: str, asker: Asker) -> Future[None]:
        return self.work.submit(self.answer, cluster, namespace, channel=channel, user=user, asker=asker)

    def answer(self, cluster: ClusterName, namespace: str, *, channel: str, user: str, asker: Asker) -> None:
        with self.metrics.diagnosis_seconds.time():
            try:
                result = self.diagnose(cluster, namespace)
            except NsstuckError as e:  # unreachable, refused, or a kubeconfig that cannot work
                self.metrics.diagnoses.labels(state="error", cause="").inc()
                asker.could_not_diagnose(cluster, namespace, e)
                return
        diagnosis = result.diagnosis
        self.metrics.diagnoses.labels(state=diagnosis.state.value, cause=diagnosis.cause or "").inc()
        # committed first: if Slack is down now, the outbox job posts it when Slack answers again
        recorded = self.record_durably(result, user=user, channel=channel, asker=asker)
        if recorded is not None:
            self.posting.submit(self.outbox.deliver, recorded.run_id)

    def record_durably(self, result: DiagnosisResult, *, user: str, channel: str, asker: Asker) -> Recorded | None:
        """Record an acknowledged diagnosis, waiting out a database outage (a restart, a fail-over) for up
        to NSSTUCK_DB_OUTAGE_SECONDS; the asker is told if it lasts longer. None when it could not be recorded."""
        deadline = time.monotonic() + self.outage_seconds
        pause = 0.25
        told = False
        while True:
            try:
                return record(self.db, result, trigger="slack", requested_by=user, post_channel=channel)
            except StoreUnavailableError as e:  # the database is down or restarting: the result waits in memory
                if time.monotonic() + pause > deadline:
                    log.error(
                        "recording the diagnosis of %s failed for %ss: %s",
                        result.diagnosis.namespace,
                        self.outage_seconds,
                        type(e.__cause__ or e).__name__,
                    )
                    asker.could_not_save(result.diagnosis.namespace)
                    return None
                if not told:
                    log.warning("the database is unavailable (%s); retrying", type(e.__cause__ or e).__name__)
                    told = True
                time.sleep(pause)
                pause = min(pause * 2, 5.0, max(0.05, deadline - time.monotonic()))

    def close(self) -> None:
        self.work.shutdown(wait=True, cancel_futures=False)
        self.posting.shutdown(wait=True, cancel_futures=False)  # after `work`, which hands runs to it
