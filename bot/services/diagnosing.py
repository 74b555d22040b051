"""The diagnose use case: connect, collect a snapshot, run the rules."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Diagnosis
from bot.domain.snapshot import NamespaceSnapshot
from bot.kube.collecting import CollectOptions, Collector, utcnow
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import Transport


@dataclass(frozen=True)
class DiagnosisResult:
    diagnosis: Diagnosis
    snapshot: NamespaceSnapshot
    duration_ms: int


def diagnose_namespace(
    target: ClusterTarget,
    namespace: str,
    *,
    options: CollectOptions | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> DiagnosisResult:
    """Collect and diagnose. Raises ClusterUnreachableError or UserError; every other failure is a gap."""
    options = options or CollectOptions()
    started = time.monotonic()
    connection = connect(target, pool_size=options.workers)
    try:
        transport = Transport(connection, call_timeout=options.call_timeout)
        snapshot = Collector(transport, cluster=target.name, options=options, clock=clock).collect(namespace)
    finally:
        connection.close()
    return DiagnosisResult(diagnose(snapshot), snapshot, int((time.monotonic() - started) * 1000))
