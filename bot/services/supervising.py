"""The worker processes of `nsstuck serve`, started at boot and kept alive: the pool behind `Diagnoser`.

The CPU-heavy part of a diagnosis (decoding the cluster's JSON, trimming it, the rules, encoding the
report and the snapshot) holds the interpreter lock; done in the process that acknowledges Slack, it
made fifty commands sent at once wait for their acknowledgements behind it. So diagnoses, and the
re-checks that remediation makes right before acting, run in a few worker processes
(`bot.services.working`), one job at a time each, and the bot only waits for their answers. Every
use case that diagnoses (a person's command, follow-ups, anything scheduled) goes through the same
pool, through `diagnoser()`: a `Diagnoser` like any other.

The workers are forked from a fork server (`multiprocessing`'s forkserver: a clean process started
once, that imported what a worker needs, so a worker starts in milliseconds; never a fork of the bot,
whose threads could hold locks at that moment), or spawned where there is none. Each is watched by a
thread of its own here, which hands it one job, then waits for its answer, its death or the job's
time limit, whichever comes first:
- an answer resolves the job (and what the worker counted goes to `/metrics`);
- a worker that dies in the middle of a job (killed, out of memory) fails that job only, with an
  error its asker is told (`WorkerLostError`); the others' jobs carry on, and it is replaced at once;
- a worker still busy past the job's limit (its collection deadline, plus the time a credential
  plugin and a last call may take, plus a grace) is killed and replaced, its job failed the same way;
- a worker holding more memory than `max_rss_mb` after its job is replaced by a fresh one;
- an answer is read with bounds (`max_answer_bytes`, and `answer_seconds` from its first byte): a worker
  whose answer is larger, or stops arriving (stopped, or wedged in the middle of sending it), is killed
  and replaced, its job failed with words that say so, and the thread is free again.
Each worker has a directory of its own for the files the kubernetes client writes for inline
kubeconfig credentials (`bot.kube.clientfiles`); the worker removes it when it ends cleanly, and this
module whenever it stops or replaces the worker (one killed runs no `finally`).
Unlike `concurrent.futures.ProcessPoolExecutor`, where a worker that dies breaks the pool and fails
every job in it. While it waits for a job, the thread looks every second whether its worker is still
there (one that dies as it starts, again and again, makes `/healthz` fail). Jobs wait in one queue:
an approved change's re-check first (when every worker is busy it gets a worker of its own, stopped
after it: a change never waits for a diagnosis), then a person's command, then the clock's jobs
(`Priority`).
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from enum import IntEnum
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TypeVar

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError, PermanentError, TemporaryError
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.logs import current, log_context
from bot.remediation.rechecking import CauseCheck, CauseChecked
from bot.services.diagnosing import Diagnoser, DiagnosisResult, EarlierOf
from bot.services.metrics import Metrics
from bot.services.working import (
    ANSWER_SECONDS,
    Answer,
    AnswerRefusedError,
    Diagnose,
    Job,
    WorkerSetup,
    kind_of,
    receive_answer,
)
from bot.services.working import main as worker_main

log = logging.getLogger(__name__)

T = TypeVar("T")

# past its collection deadline, the credential plugin's time and the last call's, the time a job has
# for the rules and for encoding its answer before its worker is taken for hung
GRACE_SECONDS = 5.0
# a worker that cannot be started is tried again after this long, doubled up to the maximum
RESTART_PAUSE = 0.5
RESTART_PAUSE_MAX = 30.0
# how many starts in a row may fail before /healthz says the pool is broken
FAILED_STARTS_UNHEALTHY = 3
# how often an idle worker's thread looks whether its worker is still there
IDLE_CHECK_SECONDS = 1.0
# added to the workers' scheduling priority: on a busy machine the bot's threads (acknowledging Slack,
# recording, posting) are served before the diagnoses
WORKER_NICENESS = 10


class Priority(IntEnum):
    """Who waits for a job: an approved change first (its re-check never waits for a diagnosis: when
    no worker is free, one more is started for it alone), then a person's command, then the clock's jobs."""

    CHANGE = 0
    PERSON = 1
    SCHEDULE = 2


class WorkerLostError(TemporaryError):
    """The worker process running the job died, or was stopped for taking too long: that job failed."""


class AnswerTooLargeError(PermanentError):
    """The worker's answer was larger than the bot takes: the job failed (trying again will not help)."""


class PoolClosedError(TemporaryError):
    """The bot is shutting down: the job was not run."""


def machine_cpus() -> int:
    """The CPUs this process may use: those it is pinned to, or fewer under a cgroup's CPU quota (a
    container's limit)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def default_size() -> int:
    """Workers for this machine: one per CPU and one more (a diagnosis also waits for the network), two
    at least, four at most (each holds its own interpreter and cluster clients: some 40-60 MB)."""
    return min(4, max(2, machine_cpus() + 1))


def job_limit(job: Job, credential_timeout: float) -> float:
    """Seconds a job may run before its worker is taken for hung: the credential plugin's time, the
    collection's deadline and a last call's timeout (a call sent just before the deadline), and a grace."""
    if isinstance(job, Diagnose):
        deadline, call = job.options.deadline, job.options.call_timeout
    else:
        deadline, call = job.deadline, job.call_timeout
    return credential_timeout + deadline + call + GRACE_SECONDS


@dataclass(eq=False)
class _Task:
    job: Job
    future: Future[Any]
    context: dict[str, str]  # the log context of whoever submitted it
    limit: float


_STOP = object()


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    pipe: Pipe
    files: Path  # its directory for the client's files of inline credentials
    jobs: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    def how_it_ended(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with code {code}"


@dataclass(eq=False)
class _Slot:
    index: int
    worker: _Worker | None = None
    failed_starts: int = 0
    pause: float = RESTART_PAUSE
    thread: threading.Thread | None = field(default=None, repr=False)


class WorkerPool:
    """`size` worker processes, each watched by a thread of its own; jobs in one priority queue."""

    def __init__(
        self,
        *,
        size: int,
        setup: WorkerSetup,
        metrics: Metrics | None = None,
        start_method: str | None = None,
        max_rss_mb: float | None = None,
        answer_seconds: float = ANSWER_SECONDS,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs one worker at least")
        self.size = size
        self.setup = setup
        # a worker holding more than this after a job (a huge namespace's objects, which CPython keeps
        # in its arenas) is replaced by a fresh one, so that the bot's memory stays bounded
        self.max_rss_mb = max_rss_mb
        # an answer larger than the workers may send, or not whole this long after its first byte, is
        # not waited for: its worker is killed and replaced
        self.max_answer_bytes = setup.max_answer_bytes
        self.answer_seconds = answer_seconds
        self.metrics = metrics or Metrics()
        method = start_method or ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
        self.context: Any = multiprocessing.get_context(method)
        if method == "forkserver":
            # the fork server imports what a worker needs, once; each worker is forked from it
            self.context.set_forkserver_preload(["bot.services.working"])
        self._queue: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self._idle = 0  # workers waiting for a job
        self._extra: list[threading.Thread] = []  # the one-job workers of approved changes
        self._slots = [_Slot(i) for i in range(size)]
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=self._supervise, args=(slot,), name=f"nsstuck-worker-{slot.index}", daemon=True
            )
            slot.thread.start()

    # -- jobs ----------------------------------------------------------------------------------

    def submit(self, job: Job, *, priority: Priority = Priority.PERSON) -> Future[Any]:
        """Queue a job; its future gets the worker's answer (a DiagnosisResult or a CauseChecked), or
        the error to tell the asker (an NsstuckError: WorkerLostError when its worker died or hung)."""
        future: Future[Any] = Future()
        task = _Task(job, future, current(), job_limit(job, self.setup.credential_timeout))
        with self._lock:
            if self._closed:
                raise PoolClosedError("nsstuck is shutting down; try again in a minute")
            if priority is Priority.CHANGE and self._idle == 0:
                # every worker is at a diagnosis (which may take its whole deadline): an approved change
                # does not wait for one, it gets a worker of its own, stopped once it answered
                extra = threading.Thread(target=self._run_once, args=(task,), name="nsstuck-worker-extra", daemon=True)
                self._extra = [*(t for t in self._extra if t.is_alive()), extra]
                extra.start()
            else:
                self._queue.put((int(priority), next(self._order), task))
        return future

    def run(self, job: Job, *, priority: Priority = Priority.PERSON) -> Any:
        """Submit a job and wait for its answer."""
        return self.submit(job, priority=priority).result()

    def diagnoser(
        self,
        target: Callable[[ClusterName], ClusterTarget],
        *,
        priority: Priority,
        options: CollectOptions,
        earlier: EarlierOf | None = None,
    ) -> Diagnoser:
        """A `Diagnoser` that runs on this pool: `target` says where a registered cluster is (raising
        UnknownClusterError in this process, before anything is queued); `earlier` finds the earlier looks
        of the namespace's open incident, sent with the job (read here: the workers have no database)."""

        def diagnose(cluster: ClusterName, namespace: str) -> DiagnosisResult:
            job = Diagnose(target(cluster), namespace, options, earlier(cluster, namespace) if earlier else None)
            result: DiagnosisResult = self.run(job, priority=priority)
            return result

        return diagnose

    def check_cause(self, check: CauseCheck) -> CauseChecked:
        """Remediation's re-check of a cause right before acting, in a worker (a person waits for it)."""
        checked: CauseChecked = self.run(check, priority=Priority.CHANGE)
        return checked

    # -- health and shutdown ----------------------------------------------------------------------

    def problems(self) -> list[str]:
        """What keeps the pool from running jobs (/healthz): shut down, a watching thread dead, or no
        worker running while starting them keeps failing ([] when it is well)."""
        if self._closed:
            return ["the diagnosis worker processes have been shut down"]
        problems = []
        dead = sum(1 for slot in self._slots if slot.thread is not None and not slot.thread.is_alive())
        if dead:
            problems.append(f"{dead} thread(s) watching the diagnosis worker processes have died")
        alive = sum(1 for slot in self._slots if slot.worker is not None and slot.worker.process.is_alive())
        failing = min(slot.failed_starts for slot in self._slots)
        if alive == 0 and failing >= FAILED_STARTS_UNHEALTHY:
            problems.append(f"no diagnosis worker process can be started ({failing} attempts in a row failed)")
        return problems

    def pids(self) -> list[int]:
        """The worker processes running now."""
        return [slot.worker.pid for slot in self._slots if slot.worker is not None]

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking jobs, fail those still queued, and stop the workers once their job is done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while True:
                try:
                    _, _, task = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(task, _Task) and task.future.set_running_or_notify_cancel():
                    task.future.set_exception(PoolClosedError("nsstuck is shutting down; try again in a minute"))
            for _ in self._slots:
                self._queue.put((-1, next(self._order), _STOP))
        for thread in [*(slot.thread for slot in self._slots), *self._extra]:
            if thread is not None:
                thread.join(timeout)

    # -- each worker's thread -------------------------------------------------------------------

    def _supervise(self, slot: _Slot) -> None:
        try:
            self._start(slot)
            while True:
                with self._lock:
                    self._idle += 1
                try:
                    _, _, task = self._queue.get(timeout=IDLE_CHECK_SECONDS)
                except queue.Empty:
                    task = None
                finally:
                    with self._lock:
                        self._idle -= 1
                if task is None:  # nothing to do: is the worker still there?
                    self._check_idle(slot)
                    continue
                if task is _STOP:
                    return
                if not task.future.set_running_or_notify_cancel():
                    continue  # cancelled while it waited
                with log_context(**task.context):
                    try:
                        self._run(slot, task)
                    except PoolClosedError as e:
                        if not task.future.done():
                            task.future.set_exception(e)
                    except Exception:  # the edge of this thread: a bug here must not stop the pool
                        log.exception("watching a diagnosis worker failed")
                        if not task.future.done():
                            task.future.set_exception(NsstuckError("nsstuck failed while diagnosing (a bug; logged)"))
        except PoolClosedError:
            return
        finally:
            self._stop(slot)

    def _check_idle(self, slot: _Slot) -> None:
        """Replace a worker that died while it waited for a job (one that never ran a job counts as a start
        that failed: the next is tried after a pause, growing, and /healthz says so after a few)."""
        worker = slot.worker
        if worker is None or worker.process.is_alive():
            return
        if worker.jobs == 0:
            slot.failed_starts += 1
            time.sleep(slot.pause)
            slot.pause = min(slot.pause * 2, RESTART_PAUSE_MAX)
        self._replace(slot, "died", f"worker pid {worker.pid} {worker.how_it_ended()} while idle")
        self._start(slot)

    def _run_once(self, task: _Task) -> None:
        """One job on a worker of its own, stopped once it answered."""
        slot = _Slot(-1)
        if not task.future.set_running_or_notify_cancel():
            return
        with log_context(**task.context):
            try:
                self._run(slot, task, replace=False)
            except PoolClosedError as e:
                task.future.set_exception(e)
            except Exception:  # the edge of this thread: logged, and the job fails
                log.exception("running a job on a worker of its own failed")
                if not task.future.done():
                    task.future.set_exception(NsstuckError("nsstuck failed while re-checking (a bug; logged)"))
            finally:
                self._stop(slot)

    def _start(self, slot: _Slot) -> _Worker:
        """The slot's worker, started now if it has none (tried again, with pauses, until it starts)."""
        while slot.worker is None:
            if self._closed:
                raise PoolClosedError("nsstuck is shutting down; try again in a minute")
            try:
                files = Path(tempfile.mkdtemp(prefix=f"nsstuck-worker-{_name(slot)}-"))
            except OSError as e:  # no writable temporary directory: the client could not write its files either
                slot.failed_starts += 1
                log.error("could not make a diagnosis worker's directory (%s); trying again in %gs", e, slot.pause)
                time.sleep(slot.pause)
                slot.pause = min(slot.pause * 2, RESTART_PAUSE_MAX)
                continue
            mine, theirs = self.context.Pipe(duplex=True)
            process = self.context.Process(
                target=worker_main,
                args=(theirs, self.setup, str(files)),
                name=f"nsstuck-worker-{_name(slot)}",
                daemon=True,
            )
            try:
                process.start()
            except (OSError, RuntimeError) as e:  # out of processes or memory, the fork server gone
                mine.close()
                theirs.close()
                shutil.rmtree(files, ignore_errors=True)
                slot.failed_starts += 1
                log.error("could not start a diagnosis worker process (%s); trying again in %gs", e, slot.pause)
                time.sleep(slot.pause)
                slot.pause = min(slot.pause * 2, RESTART_PAUSE_MAX)
                continue
            theirs.close()  # the worker's end: once it exits, reading ours ends
            slot.worker = _Worker(process, mine, files)
            self.metrics.workers_alive.inc()
            log.debug("diagnosis worker %s started (pid %d)", _name(slot), slot.worker.pid)
        return slot.worker

    def _run(self, slot: _Slot, task: _Task, *, replace: bool = True) -> None:
        kind = kind_of(task.job)
        worker = self._start(slot)
        while not worker.process.is_alive():  # died between two jobs: this one never reached it
            if worker.jobs == 0:  # nor any before it: a worker that cannot run at all, paused for
                slot.failed_starts += 1
                time.sleep(slot.pause)
                slot.pause = min(slot.pause * 2, RESTART_PAUSE_MAX)
            self._replace(slot, "died", f"worker pid {worker.pid} {worker.how_it_ended()} while idle")
            worker = self._start(slot)
        what = _describe(task.job)
        log.debug("%s on worker pid %d", what, worker.pid)
        started = time.monotonic()
        try:
            worker.pipe.send((task.job, task.context))
        except (OSError, ValueError):  # its end is closed: it died just now
            ready: list[Any] = [worker.process.sentinel]
        else:
            ready = wait([worker.pipe, worker.process.sentinel], timeout=task.limit)
        answer: Answer | None = None
        refused: str | None = None
        too_large = False
        if worker.pipe in ready:
            try:
                answer = receive_answer(worker.pipe, max_bytes=self.max_answer_bytes, seconds=self.answer_seconds)
            except AnswerRefusedError as e:  # too large, or it stopped in the middle of sending it
                refused, too_large = str(e), e.too_large
            except OSError:  # it died before it answered
                answer = None
        if refused is not None:
            outcome = "answer_too_large" if too_large else "answer_stalled"
            self.metrics.worker_jobs.labels(kind=kind, outcome=outcome).inc()
            self._replace(slot, outcome, f"worker pid {worker.pid} after {what}: {refused}; stopped it")
            if too_large:
                task.future.set_exception(
                    AnswerTooLargeError(f"the process doing it stopped: {refused} (nothing was recorded)")
                )
            else:
                task.future.set_exception(
                    WorkerLostError(f"the process doing it was stopped: {refused} (nothing was recorded); try again")
                )
            if replace:
                self._start(slot)
            return
        if answer is not None:
            worker.jobs += 1
            slot.failed_starts, slot.pause = 0, RESTART_PAUSE
            self.metrics.apply(answer.relayed)
            if answer.failure is not None:
                self.metrics.worker_jobs.labels(kind=kind, outcome="error").inc()
                task.future.set_exception(answer.failure.error())
            else:
                self.metrics.worker_jobs.labels(kind=kind, outcome="done").inc()
                task.future.set_result(answer.value)
            held = _rss_mb(worker.pid) if self.max_rss_mb is not None and replace else None
            if held is not None and self.max_rss_mb is not None and held > self.max_rss_mb:
                log.info(
                    "worker pid %d holds %.0f MB after the %s (more than %g MB): replaced by a fresh one",
                    worker.pid,
                    held,
                    what,
                    self.max_rss_mb,
                )
                self._stop(slot)
                self.metrics.workers_replaced.labels(reason="memory").inc()
                self._start(slot)
            return
        if ready:  # died in the middle of the job
            worker.process.join(5)
            ended = worker.how_it_ended()
            self.metrics.worker_jobs.labels(kind=kind, outcome="died").inc()
            self._replace(slot, "died", f"worker pid {worker.pid} {ended} during {what}; only that job failed")
            task.future.set_exception(
                WorkerLostError(f"the process doing it {ended} before it finished (nothing was recorded); try again")
            )
        else:  # still at it past its limit
            took = time.monotonic() - started
            self.metrics.worker_jobs.labels(kind=kind, outcome="hung").inc()
            self._replace(slot, "hung", f"worker pid {worker.pid} was still at {what} after {took:.0f}s; stopped it")
            task.future.set_exception(
                WorkerLostError(f"it did not finish within {task.limit:g}s and was stopped; try again")
            )
        if replace:
            self._start(slot)  # at once, so that the next job does not wait for the start

    def _replace(self, slot: _Slot, reason: str, said: str) -> None:
        """Give up the slot's worker (killed if it still runs); the next `_start` makes another."""
        worker = slot.worker
        if worker is None:
            return
        slot.worker = None
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(10)
        worker.pipe.close()
        shutil.rmtree(worker.files, ignore_errors=True)  # what a killed worker left of its client's files
        self.metrics.workers_alive.dec()
        self.metrics.workers_replaced.labels(reason=reason).inc()
        log.error("%s; replacing it", said)

    def _stop(self, slot: _Slot) -> None:
        """At shutdown: ask the worker to end (it finishes nothing more), kill it if it does not."""
        worker = slot.worker
        if worker is None:
            return
        slot.worker = None
        with suppress(OSError, ValueError):  # gone already
            worker.pipe.send(None)
        worker.process.join(5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(5)
        worker.pipe.close()
        shutil.rmtree(worker.files, ignore_errors=True)  # emptied by the worker, unless it had to be killed
        self.metrics.workers_alive.dec()


def _rss_mb(pid: int) -> float | None:
    """The resident memory of a process (Linux), or None where /proc does not tell."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _name(slot: _Slot) -> str:
    return str(slot.index) if slot.index >= 0 else "extra"


def _describe(job: Job) -> str:
    if isinstance(job, Diagnose):
        return f"diagnosis of {job.target.name}/{job.namespace}"
    return f"re-check of {job.target.name}/{job.namespace} (request {job.request_id})"
