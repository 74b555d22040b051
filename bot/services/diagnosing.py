"""The diagnose use case: connect, collect a snapshot, run the rules.

`diagnose_namespace` takes where a cluster is (an ad-hoc kubeconfig from the CLI, or a registered
target); `Diagnoser` is what the bot's use cases take: a registered cluster's name and a namespace,
diagnosed in a worker process of `nsstuck serve` (`bot.services.supervising`), or in this process with
the client the cluster registry keeps for it (`diagnose_registered`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from bot.diagnosis.context import Context
from bot.diagnosis.engine import diagnose
from bot.diagnosis.family import blocker_family
from bot.diagnosis.log_targets import log_targets
from bot.diagnosis.owners import needs_search
from bot.diagnosis.progress import observe
from bot.domain.findings import Diagnosis, Summary
from bot.domain.refs import ClusterName
from bot.domain.snapshot import Earlier, NamespaceSnapshot, Observation
from bot.domain.snapshot_codec import StoredJson, compress_snapshot, decode_report, decompress_snapshot, encode_report
from bot.errors import ClusterUnreachableError
from bot.kube.collecting import CollectOptions, Collector, utcnow
from bot.kube.connecting import CREDENTIAL_TIMEOUT, ClusterTarget, Connection, ConnectionCache, connect
from bot.kube.podlogs import read_controller_logs
from bot.kube.transport import Transport

if TYPE_CHECKING:
    from bot.kube.registry import ClusterRegistry


class DiagnosisResult:
    """A diagnosis, the snapshot it was made from, and how long it took.

    It holds them as objects (made in this process), or as the database keeps them: the report's JSON
    text and the compressed snapshot, with the diagnosis's `summary` (made in a worker process). Each
    form is made from the other only when it is asked for, so that the process that records a result
    made elsewhere writes the stored forms as they came and never decodes the snapshot; pickled (to
    cross from a worker to the bot), a result is its stored forms and summary alone.
    """

    def __init__(
        self,
        diagnosis: Diagnosis | None,
        snapshot: NamespaceSnapshot | None,
        duration_ms: int,
        *,
        stored: tuple[Summary, StoredJson, bytes] | None = None,
    ) -> None:
        if stored is None and (diagnosis is None or snapshot is None):
            raise ValueError("a result needs its diagnosis and snapshot, or their stored forms")
        self.duration_ms = duration_ms
        self._diagnosis = diagnosis
        self._snapshot = snapshot
        if stored is not None:
            self.__dict__["summary"], self.__dict__["report"], self.__dict__["snapshot_data"] = stored

    @property
    def diagnosis(self) -> Diagnosis:
        if self._diagnosis is None:
            self._diagnosis = decode_report(self.report)
        return self._diagnosis

    @property
    def snapshot(self) -> NamespaceSnapshot:
        if self._snapshot is None:
            self._snapshot = decompress_snapshot(self.snapshot_data)
        return self._snapshot

    @cached_property
    def summary(self) -> Summary:
        # the family reads the snapshot's nodes: made where the snapshot is (the worker that diagnosed)
        return Summary.of(self.diagnosis, family=blocker_family(self.diagnosis, self.snapshot))

    @cached_property
    def observation(self) -> Observation:
        """What a later diagnosis of the same incident needs of this one to see progress (small: a time,
        a count and resourceVersions), kept with the incident."""
        return observe(self.snapshot)

    @cached_property
    def report(self) -> StoredJson:
        """The report as the database keeps it (JSON text)."""
        return encode_report(self.diagnosis)

    @cached_property
    def snapshot_data(self) -> bytes:
        """The snapshot as the database keeps it (compressed JSON)."""
        return compress_snapshot(self.snapshot)

    def stored(self) -> tuple[Summary, StoredJson, bytes]:
        """The summary and the stored forms (made now if they were not yet)."""
        return self.summary, self.report, self.snapshot_data

    def __getstate__(self) -> dict[str, Any]:
        return {"duration_ms": self.duration_ms, "stored": self.stored(), "observation": self.observation}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.duration_ms = state["duration_ms"]
        self._diagnosis = self._snapshot = None
        self.__dict__["summary"], self.__dict__["report"], self.__dict__["snapshot_data"] = state["stored"]
        if state.get("observation") is not None:
            self.__dict__["observation"] = state["observation"]

    def __repr__(self) -> str:
        summary = self.summary
        return f"DiagnosisResult({summary.cluster}/{summary.namespace}: {summary.state.value}, {self.duration_ms} ms)"


# (registered cluster name, namespace) -> the diagnosis; raises ClusterUnreachableError or UserError
Diagnoser = Callable[[ClusterName, str], DiagnosisResult]
# (registered cluster name, namespace) -> the earlier looks of its open incident, if there is one
EarlierOf = Callable[[ClusterName, str], Earlier | None]


def diagnose_registered(
    clusters: ClusterRegistry,
    cluster: ClusterName,
    namespace: str,
    *,
    options: CollectOptions | None = None,
    earlier: Earlier | None = None,
) -> DiagnosisResult:
    """A registered cluster's namespace, with the client the registry keeps for that cluster."""
    return diagnose_namespace(
        clusters.target(cluster), namespace, options=options, connections=clusters.connections, earlier=earlier
    )


def diagnose_namespace(
    target: ClusterTarget,
    namespace: str,
    *,
    options: CollectOptions | None = None,
    clock: Callable[[], datetime] = utcnow,
    connections: ConnectionCache | None = None,
    earlier: Earlier | None = None,
) -> DiagnosisResult:
    """Collect and diagnose, with a client of `connections` (a fresh one, closed after, without).
    `earlier`: the earlier looks of the namespace's open incident, for progress (used only when the
    namespace still has their UID). Raises ClusterUnreachableError or UserError; every other failure is a gap."""
    options = options or CollectOptions()
    started = time.monotonic()
    try:
        snapshot, looked = _collect(target, namespace, options, clock, connections, started, earlier)
    except _Renew:
        # a kept client whose credentials the server no longer takes (an exec plugin's token revoked
        # before its expiry): once more, with the credentials loaded again
        snapshot, looked = _collect(target, namespace, options, clock, connections, started, earlier)
    bound = timedelta(seconds=options.no_progress_after)
    return DiagnosisResult(
        diagnose(snapshot, no_progress_after=bound, context=looked),
        snapshot,
        int((time.monotonic() - started) * 1000),
    )


class _Renew(Exception):
    pass


def searching(options: CollectOptions) -> CollectOptions:
    """The options, with finalizers' controllers searched for in the cluster where the catalogue and their
    name find none (`bot.diagnosis.owners`)."""
    return options if options.owner_search is not None else replace(options, owner_search=needs_search)


def _collect(  # noqa: PLR0917 (diagnose_namespace's arguments, passed on as they are)
    target: ClusterTarget,
    namespace: str,
    options: CollectOptions,
    clock: Callable[[], datetime],
    connections: ConnectionCache | None,
    started: float,
    earlier: Earlier | None,
) -> tuple[NamespaceSnapshot, Context]:
    """The snapshot, with the logs of its blocking objects' controllers, and the context whose logs to read was
    chosen through (for the rules: its controllers are judged once)."""
    options = searching(options)
    with _connection(target, options, connections) as connection:
        transport = Transport(connection, call_timeout=options.call_timeout, max_answer=options.max_answer)
        try:
            snapshot = Collector(transport, cluster=target.name, options=options, clock=clock).collect(namespace)
        except ClusterUnreachableError:
            if connection.refused and connection.lent > 1:
                raise _Renew from None
            raise
        snapshot = with_earlier(snapshot, earlier)
        looked = Context(snapshot, no_progress_after=timedelta(seconds=options.no_progress_after))
        deadline = started + options.deadline
        return with_controller_logs(transport, target, snapshot, options, deadline=deadline, context=looked), looked


def with_earlier(snapshot: NamespaceSnapshot, earlier: Earlier | None) -> NamespaceSnapshot:
    """The snapshot with the earlier looks of its incident: only those of this namespace UID, and made
    before this snapshot."""
    uid = str(((snapshot.namespace_object or {}).get("metadata") or {}).get("uid") or "")
    if earlier is None or not uid or earlier.namespace_uid != uid:
        return snapshot
    seen = tuple(o for o in earlier.observations if o.at < snapshot.observed_at)
    return replace(snapshot, earlier=seen) if seen else snapshot


def with_controller_logs(
    transport: Transport,
    target: ClusterTarget,
    snapshot: NamespaceSnapshot,
    options: CollectOptions,
    *,
    deadline: float,
    context: Context | None = None,
) -> NamespaceSnapshot:
    """The snapshot with what the controllers of its blocking objects logged about them (issue 37 §2): read
    only for live or unknown controllers whose objects stood still past the bound, within the deadline.
    `context`: the snapshot's, kept for the rules (`diagnose`'s `context`); a new one without it."""
    if context is None or context.snapshot is not snapshot:
        context = Context(snapshot, no_progress_after=timedelta(seconds=options.no_progress_after))
    targets = log_targets(context)
    if not targets:
        return snapshot
    # what is left of the diagnosis's deadline, and never less than one call's worth: the reads are few
    deadline = max(deadline, time.monotonic() + min(options.call_timeout, 5.0))
    reading = read_controller_logs(
        transport, targets, deadline=deadline, call_timeout=options.call_timeout, enabled=target.controller_logs
    )
    gaps = tuple(sorted((*snapshot.gaps, *reading.gaps), key=lambda g: (g.what, g.reason, g.detail)))
    return replace(snapshot, controller_logs=reading.logs, gaps=gaps)


@contextmanager
def _connection(
    target: ClusterTarget, options: CollectOptions, connections: ConnectionCache | None
) -> Iterator[Connection]:
    if connections is not None:
        with connections.lease(target) as connection:
            yield connection
        return
    # an exec credential plugin has no more time than the whole diagnosis
    connection = connect(
        target, pool_size=options.workers, credential_timeout=min(CREDENTIAL_TIMEOUT, options.deadline)
    )
    try:
        yield connection
    finally:
        connection.close()
