"""The scan use case: which namespaces of which clusters are stuck, and why.

For each cluster: one connection, one list of its namespaces, and one collection (`collect_each`)
for the namespaces terminating for at least `stuck_after`, diagnosed by the rules. Clusters are
scanned in parallel on a bounded pool; within a cluster the collector's own pool bounds the calls.
A cluster that cannot be reached is reported as such, never raised and never skipped. Time is
injected: `now` is the only clock a scan reads.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from itertools import islice

from bot.diagnosis.engine import diagnose
from bot.domain.refs import ClusterName, KubeObject, deletion_time, meta
from bot.errors import ClusterUnreachableError, UserError
from bot.kube.collecting import CollectOptions, Collector, list_namespaces
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.observing import CallObserver
from bot.kube.transport import Transport
from bot.services.diagnosing import DiagnosisResult, searching

log = logging.getLogger(__name__)

# 8 calls at a time per cluster rather than the 32 of a single diagnosis: a scan collects several
# clusters at once, where the work is bound by our CPU rather than by latency, and every connection
# costs a TLS handshake and a thread (bench/digest.py: faster than 16 and 32 per cluster). Inside a
# stuck namespace only the types its controller reports as remaining are listed, where its conditions
# can be trusted (`remaining_types`): 38 requests per cluster of the benchmark instead of 173
SCAN_OPTIONS = CollectOptions(workers=8, contents_from_conditions=True)


@dataclass(frozen=True)
class StuckNamespace:
    cluster: ClusterName
    namespace: str
    uid: str
    terminating_since: datetime
    result: DiagnosisResult | None  # diagnosis, snapshot and duration; None when it could not be diagnosed
    error: str | None  # why it could not be diagnosed (short, secret-free)


@dataclass(frozen=True)
class ClusterScan:
    cluster: ClusterName
    reachable: bool
    error: str | None  # why not (unreachable, unauthorized, bad kubeconfig), secret-free
    namespaces: int  # how many namespaces were listed
    terminating: dict[str, datetime]  # uid -> deletionTimestamp of every terminating namespace
    stuck: tuple[StuckNamespace, ...]  # terminating for at least stuck_after, diagnosed, oldest first


def _unreachable(cluster: ClusterName, error: str) -> ClusterScan:
    return ClusterScan(cluster=cluster, reachable=False, error=error, namespaces=0, terminating={}, stuck=())


def scan_cluster(
    target: ClusterTarget,
    *,
    stuck_after: timedelta,
    now: datetime,
    options: CollectOptions | None = None,
    observer: CallObserver | None = None,
) -> ClusterScan:
    """One cluster. Namespaces whose deletion is at least `stuck_after` old at `now` are diagnosed
    (with `options`, by default SCAN_OPTIONS).

    Raises nothing the cluster can cause: an unreachable or unauthorized cluster, or a kubeconfig
    that cannot work, gives `reachable=False` with the reason. Its calls are told to `observer`.
    """
    options = options or SCAN_OPTIONS
    try:
        connection = connect(target, pool_size=options.workers, observer=observer)
    except UserError as e:
        return _unreachable(target.name, str(e))
    try:
        transport = Transport(connection, call_timeout=options.call_timeout, max_answer=options.max_answer)
        try:
            listed = list_namespaces(transport, timeout=options.call_timeout)
        except ClusterUnreachableError as e:
            return _unreachable(target.name, str(e))
        terminating: dict[str, datetime] = {}
        old: list[tuple[datetime, str, str]] = []  # (since, name, uid)
        for item in listed:
            since = deletion_time(item)
            if since is None:
                continue
            m = meta(item)
            uid, name = str(m.get("uid", "")), str(m.get("name", ""))
            terminating[uid] = since
            if now - since >= stuck_after:
                old.append((since, name, uid))
        old.sort()
        stuck = _diagnose_all(transport, target.name, old, now=now, options=options) if old else ()
        return ClusterScan(
            cluster=target.name,
            reachable=True,
            error=None,
            namespaces=len(listed),
            terminating=terminating,
            stuck=stuck,
        )
    finally:
        connection.close()


def _diagnose_all(
    transport: Transport,
    cluster: ClusterName,
    old: list[tuple[datetime, str, str]],
    *,
    now: datetime,
    options: CollectOptions,
) -> tuple[StuckNamespace, ...]:
    started = time.monotonic()
    # only terminating namespaces are asked for: one made again since the list is read alone, and skipped
    collector = Collector(
        transport, cluster=cluster, options=replace(searching(options), predict=False), clock=lambda: now
    )
    outcomes = collector.collect_each([name for _, name, _ in old])
    collected_ms = int((time.monotonic() - started) * 1000)
    stuck: list[StuckNamespace] = []
    for since, name, uid in old:
        outcome = outcomes[name]
        if isinstance(outcome, ClusterUnreachableError):
            stuck.append(StuckNamespace(cluster, name, uid, since, None, f"the namespace could not be read: {outcome}"))
            continue
        if not _still_terminating(outcome.namespace_object, uid):
            continue  # removed (or removed and made again) between the list and the read: not stuck any more
        began = time.monotonic()
        try:
            diagnosis = diagnose(outcome)
        except Exception as e:  # one rule failing on one namespace must not lose the whole digest
            log.exception("diagnosing %s/%s failed", cluster, name)
            stuck.append(StuckNamespace(cluster, name, uid, since, None, f"the diagnosis failed ({type(e).__name__})"))
            continue
        duration_ms = collected_ms + int((time.monotonic() - began) * 1000)
        stuck.append(StuckNamespace(cluster, name, uid, since, DiagnosisResult(diagnosis, outcome, duration_ms), None))
    return tuple(stuck)


def _still_terminating(namespace_object: KubeObject | None, uid: str) -> bool:
    return (
        namespace_object is not None
        and str(meta(namespace_object).get("uid", "")) == uid
        and deletion_time(namespace_object) is not None
    )


def _scan_one(
    target: ClusterTarget,
    *,
    stuck_after: timedelta,
    now: datetime,
    options: CollectOptions | None,
    observer: CallObserver | None = None,
) -> ClusterScan:
    try:
        return scan_cluster(target, stuck_after=stuck_after, now=now, options=options, observer=observer)
    except Exception as e:  # the edge of one cluster's scan: the other clusters still get theirs
        log.exception("scanning cluster %s failed", target.name)
        return _unreachable(target.name, f"the scan failed (internal error: {type(e).__name__})")


def scan(
    targets: Sequence[ClusterTarget],
    *,
    stuck_after: timedelta,
    now: datetime,
    parallel_clusters: int = 8,
    options: CollectOptions | None = None,
    observer: CallObserver | None = None,
) -> list[ClusterScan]:
    """Every target, at most `parallel_clusters` at a time; the scans in the order of the targets.

    Never raises because of one cluster: a failure that is not the cluster's (a bug) is logged with
    its traceback and that cluster is reported unreachable with a short reason. Every cluster's
    snapshots are alive at the end (most of their weight is the cluster-wide workloads): a caller
    that takes the scans one by one should use `scan_iter`.
    """
    if not targets:
        return []
    one = partial(_scan_one, stuck_after=stuck_after, now=now, options=options, observer=observer)
    workers = max(1, min(parallel_clusters, len(targets)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsstuck-scan") as pool:
        return list(pool.map(one, targets))


def scan_iter(
    targets: Sequence[ClusterTarget],
    *,
    stuck_after: timedelta,
    now: datetime,
    parallel_clusters: int = 8,
    options: CollectOptions | None = None,
    observer: CallObserver | None = None,
) -> Iterator[ClusterScan]:
    """`scan`, handed over one cluster at a time, in the order of the targets, as soon as it is done.

    At most `parallel_clusters` clusters are scanned at once, and at most twice that many scans
    exist at any time (being made, or done and not yet taken), so that memory holds a few clusters'
    snapshots instead of all of them. The look-ahead keeps the workers busy while a slow cluster
    holds the head of the line. Leaving the loop early cancels what has not started.
    """
    if not targets:
        return
    one = partial(_scan_one, stuck_after=stuck_after, now=now, options=options, observer=observer)
    workers = max(1, min(parallel_clusters, len(targets)))
    queue = iter(targets)
    pending: deque[Future[ClusterScan]] = deque()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsstuck-scan")
    try:
        for target in islice(queue, 2 * workers):
            pending.append(pool.submit(one, target))
        while pending:
            result = pending.popleft().result()
            following = next(queue, None)
            if following is not None:
                pending.append(pool.submit(one, following))
            yield result
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=False)
