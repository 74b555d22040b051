"""The diagnose use case: connect, collect a snapshot, run the rules.

`diagnose_namespace` takes where a cluster is (an ad-hoc kubeconfig from the CLI, or a registered
target); `Diagnoser` is what the bot's use cases take: a registered cluster's name and a namespace,
diagnosed with the client the cluster registry keeps for it (`diagnose_registered`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Diagnosis
from bot.domain.refs import ClusterName
from bot.domain.snapshot import NamespaceSnapshot
from bot.errors import ClusterUnreachableError
from bot.kube.collecting import CollectOptions, Collector, utcnow
from bot.kube.connecting import CREDENTIAL_TIMEOUT, ClusterTarget, Connection, ConnectionCache, connect
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import Transport


@dataclass(frozen=True)
class DiagnosisResult:
    diagnosis: Diagnosis
    snapshot: NamespaceSnapshot
    duration_ms: int


# (registered cluster name, namespace) -> the diagnosis; raises ClusterUnreachableError or UserError
Diagnoser = Callable[[ClusterName, str], DiagnosisResult]


def diagnose_registered(
    clusters: ClusterRegistry, cluster: ClusterName, namespace: str, *, options: CollectOptions | None = None
) -> DiagnosisResult:
    """A registered cluster's namespace, with the client the registry keeps for that cluster."""
    return diagnose_namespace(clusters.target(cluster), namespace, options=options, connections=clusters.connections)


def diagnose_namespace(
    target: ClusterTarget,
    namespace: str,
    *,
    options: CollectOptions | None = None,
    clock: Callable[[], datetime] = utcnow,
    connections: ConnectionCache | None = None,
) -> DiagnosisResult:
    """Collect and diagnose, with a client of `connections` (a fresh one, closed after, without).
    Raises ClusterUnreachableError or UserError; every other failure is a gap."""
    options = options or CollectOptions()
    started = time.monotonic()
    try:
        snapshot = _collect(target, namespace, options, clock, connections)
    except _Renew:
        # a kept client whose credentials the server no longer takes (an exec plugin's token revoked
        # before its expiry): once more, with the credentials loaded again
        snapshot = _collect(target, namespace, options, clock, connections)
    return DiagnosisResult(diagnose(snapshot), snapshot, int((time.monotonic() - started) * 1000))


class _Renew(Exception):
    pass


def _collect(
    target: ClusterTarget,
    namespace: str,
    options: CollectOptions,
    clock: Callable[[], datetime],
    connections: ConnectionCache | None,
) -> NamespaceSnapshot:
    with _connection(target, options, connections) as connection:
        transport = Transport(connection, call_timeout=options.call_timeout)
        try:
            return Collector(transport, cluster=target.name, options=options, clock=clock).collect(namespace)
        except ClusterUnreachableError:
            if connection.refused and connection.lent > 1:
                raise _Renew from None
            raise


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
