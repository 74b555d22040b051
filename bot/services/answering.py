"""Answering a person who asked for a diagnosis: diagnose, record it durably, hand it to the outbox.

The door acknowledges at once and submits the work here: diagnoses run on a pool of their own
(`work`), few at once, since each already fans out on its collector's pool and the acknowledgements
must not queue behind CPU-bound work for the interpreter lock. A recorded run is published from
another pool (`posting`): its posts wait for Slack's pace, and a diagnosis worker that waited with
them would leave the next commands queued.

Work is bounded: while a diagnosis of a cluster's namespace is queued or running, another ask for the
same namespace joins it (one collection; each asker's run is recorded from its result and posted
where they asked, in the incident's thread), and no more than `queue_limit` diagnoses wait for a
worker: one more is refused (`DiagnosisQueueFull`) and the asker told to try again shortly.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Protocol

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError, StoreUnavailableError, TemporaryError
from bot.logs import bind, carrying, log_context
from bot.services.diagnosing import Diagnoser, DiagnosisResult
from bot.services.health import pool_problems
from bot.services.metrics import Metrics
from bot.services.outbox import Outbox
from bot.services.pools import StartedPool
from bot.services.recording import RECURRENCE_AFTER, Recorded, record
from bot.store.database import Database

log = logging.getLogger(__name__)


class Asker(Protocol):
    """The person who asked, told (only them) when their diagnosis cannot be had."""

    def could_not_diagnose(self, cluster: ClusterName, namespace: str, error: NsstuckError) -> None: ...

    def could_not_save(self, namespace: str, why: str) -> None: ...


class DiagnosisQueueFull(TemporaryError):
    """As many diagnoses as allowed are waiting for a worker already."""


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
        queue_limit: int = 100,
        recurrence_after: int = RECURRENCE_AFTER,
    ) -> None:
        self.db = db
        self.recurrence_after = recurrence_after
        self.diagnose = diagnose
        self.outbox = outbox
        self.metrics = metrics
        self.outage_seconds = outage_seconds
        self.queue_limit = queue_limit
        # their threads started now: a burst's submits do not wait for thread starts (bot.services.pools)
        self.work = StartedPool(max_workers=workers, thread_name_prefix="nsstuck-diagnose")
        self.posting = StartedPool(max_workers=32, thread_name_prefix="nsstuck-post")
        self._lock = threading.Lock()
        self._waiting = 0
        # (cluster, namespace) -> the result of the diagnosis queued or running for it
        self._inflight: dict[tuple[str, str], Future[DiagnosisResult]] = {}

    def submit(self, cluster: ClusterName, namespace: str, *, channel: str, user: str, asker: Asker) -> Future[None]:
        """Diagnose for this asker: a new diagnosis, or the one already queued or running for the same
        namespace. Raises DiagnosisQueueFull when a new one would wait behind `queue_limit` others."""
        key = (str(cluster), namespace)
        done: Future[None] = Future()
        with log_context(cluster=cluster, namespace=namespace, slack_user=user):
            return self._submit(key, done, channel=channel, user=user, asker=asker)

    def _submit(
        self, key: tuple[str, str], done: Future[None], *, channel: str, user: str, asker: Asker
    ) -> Future[None]:
        cluster, namespace = ClusterName(key[0]), key[1]
        with self._lock:
            shared = self._inflight.get(key)
            if shared is None:
                if self._waiting >= self.queue_limit:
                    raise DiagnosisQueueFull(f"{self._waiting} diagnoses are waiting already; try again in a minute")
                shared = Future()
                self._inflight[key] = shared
                self._waiting += 1
                self.work.submit(carrying(self._collect), key, shared)
            else:
                self.metrics.diagnoses_shared.inc()

        def answer(result: Future[DiagnosisResult]) -> None:
            try:
                self._answer(result, cluster, namespace, channel=channel, user=user, asker=asker)
                done.set_result(None)
            except BaseException as e:
                done.set_exception(e)
                raise

        answering = carrying(answer)  # its lines carry the asker's cluster, namespace and user
        shared.add_done_callback(lambda result: self.posting.submit(answering, result))
        return done

    def _collect(self, key: tuple[str, str], shared: Future[DiagnosisResult]) -> None:
        with self._lock:
            self._waiting -= 1
        try:
            with self.metrics.diagnosis_seconds.time():
                shared.set_result(self.diagnose(ClusterName(key[0]), key[1]))
        except NsstuckError as e:  # unreachable, refused, or a kubeconfig that cannot work
            shared.set_exception(e)
        except BaseException as e:
            shared.set_exception(e)
            raise
        finally:
            with self._lock:
                self._inflight.pop(key, None)

    def _answer(
        self,
        shared: Future[DiagnosisResult],
        cluster: ClusterName,
        namespace: str,
        *,
        channel: str,
        user: str,
        asker: Asker,
    ) -> None:
        try:
            result = shared.result()
        except NsstuckError as e:
            self.metrics.diagnoses.labels(state="error", cause="").inc()
            log.info("diagnosis failed: %s", type(e).__name__)
            asker.could_not_diagnose(cluster, namespace, e)
            return
        except Exception as e:  # a defect of nsstuck's own: logged with its traceback, and the asker told
            self.metrics.diagnoses.labels(state="error", cause="").inc()
            log.error("the diagnosis failed on a defect", exc_info=e)
            said = NsstuckError(f"nsstuck failed while diagnosing ({type(e).__name__}); the bot's log has the details")
            asker.could_not_diagnose(cluster, namespace, said)
            return
        summary = result.summary
        self.metrics.diagnoses.labels(state=summary.state.value, cause=summary.cause or "").inc()
        # committed first: if Slack is down now, the outbox job posts it when Slack answers again
        try:
            recorded = self.record_durably(result, user=user, channel=channel, asker=asker)
        except Exception as e:  # refused by the database (not an outage), or a defect: nothing was recorded
            log.error("recording the diagnosis of %s failed", namespace, exc_info=e)
            asker.could_not_save(namespace, "the database refused it (the bot's log has the details)")
            return
        if recorded is not None:
            bind(run_id=recorded.run_id)
            log.info("diagnosis: %s, cause %s", summary.state.value, summary.cause or "none")
            self.outbox.deliver(recorded.run_id)

    def record_durably(self, result: DiagnosisResult, *, user: str, channel: str, asker: Asker) -> Recorded | None:
        """Record an acknowledged diagnosis, waiting out a database outage (a restart, a fail-over) for up
        to NSSTUCK_DB_OUTAGE_SECONDS; the asker is told if it lasts longer. None when it could not be recorded."""
        deadline = time.monotonic() + self.outage_seconds
        pause = 0.25
        told = False
        while True:
            try:
                return record(
                    self.db,
                    result,
                    trigger="slack",
                    requested_by=user,
                    post_channel=channel,
                    recurrence_after=self.recurrence_after,
                )
            except StoreUnavailableError as e:  # the database is down or restarting: the result waits in memory
                if time.monotonic() + pause > deadline:
                    log.error(
                        "recording the diagnosis of %s failed for %ss: %s",
                        result.summary.namespace,
                        self.outage_seconds,
                        type(e.__cause__ or e).__name__,
                    )
                    asker.could_not_save(result.summary.namespace, "the database has been unavailable for too long")
                    return None
                if not told:
                    log.warning("the database is unavailable (%s); retrying", type(e.__cause__ or e).__name__)
                    told = True
                time.sleep(pause)
                pause = min(pause * 2, 5.0, max(0.05, deadline - time.monotonic()))

    def problems(self) -> list[str]:
        """What has died of the pools the diagnoses and their posts run on ([] when both are well)."""
        return pool_problems("diagnosis", self.work) + pool_problems("posting", self.posting)

    def close(self) -> None:
        self.work.shutdown(wait=True, cancel_futures=False)
        self.posting.shutdown(wait=True, cancel_futures=False)  # after `work`, which hands runs to it
