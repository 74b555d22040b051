"""What a worker process of `nsstuck serve` runs: diagnoses and the re-checks of remediation, one at a time.

The bot hands a worker one job at a time over a pipe (`bot.services.supervising`) and waits for its
answer: a diagnosis in the form the database keeps it (the report's JSON text and the compressed
snapshot, with a summary: `DiagnosisResult` pickles as that), or a re-check's verdict, or the error to
tell the asker; with what the worker counted meanwhile (`bot.services.relaying`), for `/metrics`.

A worker keeps a client per cluster between jobs (`ConnectionCache`, with its rules for giving one
up: a changed kubeconfig, a 401, age, idleness). It logs to the bot's stderr in the bot's format,
each line with the context of the job it runs (cluster, namespace, who asked). It ignores SIGINT (a
Ctrl-C in a terminal reaches the whole process group; the bot stops its workers itself) and runs at
a lower priority than the bot, so that on a busy machine the threads that acknowledge Slack are
served first. It ends when the bot closes the pipe or sends None.

This module is what the fork server preloads: it imports only what a job needs (no database, no
Slack, no settings model).

The client writes a kubeconfig's inline certificates and keys to files: a worker has it write them in a
directory the bot made for that worker (`bot.kube.clientfiles`), removed when the worker ends cleanly,
and by the bot whenever it stops or replaces the worker (one killed runs no `finally`).

Its answers cross the pipe framed by this module (`send_answer`, `receive_answer`): a length, then the
pickled answer. One larger than `max_answer_bytes` is not sent (its asker is told why instead), and the
bot reads an answer with a bound on its size and on its time, so that a worker that stops in the middle
of one (stopped, swapped out, wedged) cannot hold the thread that watches it.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from pathlib import Path

from bot import logs
from bot.domain.snapshot import Earlier
from bot.errors import (
    ClusterUnreachableError,
    NsstuckError,
    PermanentError,
    StoreError,
    StoreUnavailableError,
    TemporaryError,
    UserError,
)
from bot.kube import clientfiles
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget, Connection, ConnectionCache, connect
from bot.kube.transport import Transport
from bot.remediation.rechecking import CauseCheck, CauseChecked, check_cause
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.relaying import RELAY, Relayed, RelayedCalls

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# the largest answer a worker sends (NSSTUCK_WORKER_MAX_ANSWER_MB): a report and its compressed
# snapshot, some hundred KB for a namespace of thousands of objects
MAX_ANSWER_BYTES = 256 * MIB
# how long an answer may take to arrive once its first byte has (NSSTUCK_WORKER_ANSWER_SECONDS): a
# local socket carries the largest in well under a second
ANSWER_SECONDS = 10.0


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker is started with."""

    log_level: str
    log_format: str
    credential_timeout: float
    pool_size: int  # connections a kept client holds: a collection's calls at once
    niceness: int = 0  # added to the worker's scheduling priority (lower priority than the bot's)
    max_answer_bytes: int = MAX_ANSWER_BYTES  # a larger answer is not sent: its asker is told why


@dataclass(frozen=True)
class Diagnose:
    """Collect and diagnose a namespace."""

    target: ClusterTarget
    namespace: str
    options: CollectOptions
    # the earlier looks of the namespace's open incident (a few times, counts and resourceVersions), for progress
    earlier: Earlier | None = None


Job = Diagnose | CauseCheck


def kind_of(job: Job) -> str:
    return "diagnose" if isinstance(job, Diagnose) else "recheck"


# the error families an answer names (an error of another class crosses as the nearest of these: its
# own constructor may take other arguments than a message)
ERRORS: dict[str, type[NsstuckError]] = {
    cls.__name__: cls
    for cls in (
        NsstuckError,
        UserError,
        ClusterUnreachableError,
        TemporaryError,
        PermanentError,
        StoreUnavailableError,
        StoreError,
    )
}


@dataclass(frozen=True)
class Failure:
    """Why a job gave no result: an error to tell the asker (`family`, one of ERRORS), or a bug
    (`family` empty; the worker logged its traceback)."""

    family: str
    message: str

    def error(self) -> NsstuckError:
        if not self.family:
            return NsstuckError(f"nsstuck failed while diagnosing ({self.message}); the bot's log has the details")
        return ERRORS.get(self.family, NsstuckError)(self.message)


@dataclass(frozen=True)
class Answer:
    value: DiagnosisResult | CauseChecked | None
    failure: Failure | None
    relayed: Relayed


def failure_of(error: NsstuckError) -> Failure:
    family = next(cls.__name__ for cls in type(error).__mro__ if cls.__name__ in ERRORS)
    return Failure(family, str(error))


# what the worker's clients tell of their calls to the clusters
CALLS = RelayedCalls(RELAY)


def main(pipe: Pipe, setup: WorkerSetup, files: str | None = None) -> None:
    """The worker process: answer the jobs that come through `pipe` until it closes; the client's files
    of inline credentials in `files` (a directory the bot made for this worker, removed here at the end)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if setup.niceness:
        with suppress(OSError):
            os.nice(setup.niceness)
    logs.setup(setup.log_level, setup.log_format)
    if files is not None:
        clientfiles.use(Path(files))
    # what the fork server imported stays untouched by the collector: its pages stay shared
    gc.freeze()
    # the worker's calls to the clusters are counted on its relay: they reach the bot's /metrics with its answers
    connections = ConnectionCache(
        pool_size=setup.pool_size, credential_timeout=setup.credential_timeout, observer=CALLS
    )
    try:
        while True:
            try:
                message = pipe.recv()
            except (EOFError, OSError):  # the bot closed its end, or is gone
                return
            if message is None:
                return
            job, context = message
            with logs.log_context(**context):
                answer = answer_job(job, connections, setup)
                try:
                    send_answer(pipe, answer, setup.max_answer_bytes)
                except OSError:  # the bot is gone, or gave up on this job
                    return
    finally:
        connections.close()
        pipe.close()
        if files is not None:
            clientfiles.remove(Path(files))


# -- answers on the pipe ------------------------------------------------------------------------

# before each answer: its length in bytes
_LENGTH = struct.Struct("!Q")


class AnswerRefusedError(Exception):
    """An answer the bot does not take: larger than allowed (`too_large`), or not arriving in time, or
    unreadable (its worker is stopped: what follows on its pipe would not start where an answer starts)."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def send_answer(pipe: Pipe, answer: Answer, max_bytes: int) -> None:
    """Write the answer to the pipe; one larger than `max_bytes` is replaced by the failure to tell."""
    data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > max_bytes:
        kind = "diagnosis" if isinstance(answer.value, DiagnosisResult) else "answer"
        said = (
            f"the {kind} came to {_size(len(data))}, more than the {_size(max_bytes)} a diagnosis worker may "
            "send to the bot (NSSTUCK_WORKER_MAX_ANSWER_MB); nothing was recorded"
        )
        log.error("%s; its asker is told so", said)
        data = pickle.dumps(Answer(None, Failure("PermanentError", said), answer.relayed))
    view = memoryview(_LENGTH.pack(len(data)) + data)
    fd = pipe.fileno()
    while view:
        view = view[os.write(fd, view) :]


def receive_answer(pipe: Pipe, *, max_bytes: int, seconds: float) -> Answer | None:
    """Read one answer from the pipe: None when its writer ended before the whole answer came (it
    died). Raises AnswerRefusedError for an answer longer than `max_bytes`, or one not whole `seconds`
    after this was called (call it once the pipe has something to read)."""
    deadline = time.monotonic() + seconds
    header = _read(pipe, _LENGTH.size, deadline)
    if isinstance(header, int):
        raise AnswerRefusedError(f"its answer stopped arriving before its length ({seconds:g}s)")
    if not header:
        return None
    (length,) = _LENGTH.unpack(header)
    if length > max_bytes:
        raise AnswerRefusedError(
            f"its answer would be {_size(length)}, more than the {_size(max_bytes)} allowed", too_large=True
        )
    data = _read(pipe, length, deadline)
    if isinstance(data, int):
        raise AnswerRefusedError(f"its answer stopped arriving: {_size(data)} of {_size(length)} came in {seconds:g}s")
    if not data:
        return None
    try:
        # written by our own worker process, as multiprocessing's own `recv` would unpickle it
        answer = pickle.loads(data)  # noqa: S301
    except Exception as e:
        raise AnswerRefusedError(f"its answer could not be read ({type(e).__name__})") from None
    if not isinstance(answer, Answer):
        raise AnswerRefusedError(f"it sent a {type(answer).__name__} instead of an answer")
    return answer


def _read(pipe: Pipe, length: int, deadline: float) -> bytes | int:
    """`length` bytes from the pipe by the deadline: b"" when it ends before them (its writer is gone),
    how many had come when the deadline passed."""
    chunks = bytearray()
    fd = pipe.fileno()
    while len(chunks) < length:
        left = deadline - time.monotonic()
        if left <= 0 or not wait([pipe], timeout=left):
            return len(chunks)
        chunk = os.read(fd, min(length - len(chunks), MIB))
        if not chunk:
            return b""
        chunks += chunk
    return bytes(chunks)


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MB" if n >= MIB / 10 else f"{n} bytes"


def answer_job(job: Job, connections: ConnectionCache, setup: WorkerSetup) -> Answer:
    """Run one job; its answer, with what was counted meanwhile."""
    kind = kind_of(job)
    cpu, started = time.process_time(), time.monotonic()
    value: DiagnosisResult | CauseChecked | None = None
    failure = None
    try:
        if isinstance(job, Diagnose):
            result = diagnose_namespace(
                job.target, job.namespace, options=job.options, connections=connections, earlier=job.earlier
            )
            # encoded here (not while the answer is pickled, where a failure would end the worker)
            result.stored()
            value = result
        else:
            with _recheck_connection(job, connections, setup) as connection:
                value = check_cause(job, Transport(connection, call_timeout=job.call_timeout))
    except NsstuckError as e:  # unreachable, refused, a kubeconfig that cannot work: told to the asker
        failure = failure_of(e)
    except Exception as e:  # a bug: the asker is told, the worker goes on with the next job
        log.exception("the %s job failed", kind)
        failure = Failure("", type(e).__name__)
    cpu = time.process_time() - cpu
    RELAY.inc("nsstuck_worker_cpu_seconds_total", {"kind": kind}, cpu)
    log.debug(
        "%s job %s in worker pid %d: %.0f ms, %.0f ms of CPU",
        kind,
        "failed" if failure else "done",
        os.getpid(),
        (time.monotonic() - started) * 1000,
        cpu * 1000,
    )
    return Answer(value, failure, RELAY.drain())


@contextmanager
def _recheck_connection(check: CauseCheck, connections: ConnectionCache, setup: WorkerSetup) -> Iterator[Connection]:
    """The kept client of the cluster; with act_as_approver, a client of its own acting as the approver."""
    if check.impersonate is None:
        with connections.lease(check.target) as connection:
            yield connection
        return
    credential_timeout = min(setup.credential_timeout, max(1.0, check.deadline))
    connection = connect(
        check.target,
        pool_size=setup.pool_size,
        credential_timeout=credential_timeout,
        impersonate=check.impersonate,
        observer=CALLS,
    )
    try:
        yield connection
    finally:
        connection.close()
