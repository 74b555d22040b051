"""The re-check of a remedy's cause right before acting: the namespace collected and diagnosed again.

It is the CPU-heavy step of an execution (a collection, the rules), so `nsstuck serve` runs it in a
worker process (`bot.services.supervising`) with a connection of the worker's own; run here, it uses
the executor's. Everything it needs crosses as data: where the cluster is and who it acts as, the
remedy, its targets as just read, and the snapshot the remedy was requested from as the database
keeps it (decoded only here, never in the process that acknowledges Slack).
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

from bot.diagnosis.engine import diagnose
from bot.diagnosis.owners import needs_search
from bot.domain.findings import Diagnosis, Remedy
from bot.domain.refs import KubeObject
from bot.domain.snapshot import NamespaceSnapshot
from bot.domain.snapshot_codec import decompress_snapshot
from bot.kube.collecting import CollectOptions, Collector
from bot.kube.connecting import ClusterTarget, Impersonation
from bot.kube.transport import Transport
from bot.remediation import planning

log = logging.getLogger(__name__)

# the re-check collects on this many threads: a client that acts for it keeps at least this many
# connections (with fewer, urllib3 opens one per call and throws it away, saying so at WARNING)
RECHECK_THREADS = 8


@dataclass(frozen=True)
class CauseCheck:
    target: ClusterTarget
    namespace: str
    remedy: Remedy
    present: tuple[KubeObject, ...]  # the remedy's targets as just read, those still there
    then: bytes | None  # the stored snapshot of the diagnosis the remedy was requested from, if kept
    deadline: float  # seconds for the collection
    call_timeout: float
    impersonate: Impersonation | None = None  # act_as_approver: who the reads act as
    request_id: int | None = None  # for what is logged


@dataclass(frozen=True)
class CauseChecked:
    reasons: tuple[str, ...]  # why the cause no longer holds ([] when it still does)
    recheck: dict[str, object]  # what the re-check saw, for the audit trail
    blocked: str | None  # the cause holds, but a fail-closed webhook would reject the write


def check_cause(check: CauseCheck, transport: Transport) -> CauseChecked:
    """Collect the namespace again through `transport`, diagnose it, and say whether the remedy still
    rests on its cause. Raises ClusterUnreachableError as a collection does."""
    options = CollectOptions(
        workers=RECHECK_THREADS,
        deadline=check.deadline,
        call_timeout=check.call_timeout,
        owner_search=needs_search,  # the controllers found as the diagnosis finds them
    )
    now = Collector(transport, cluster=check.target.name, options=options).collect(check.namespace)
    fresh = diagnose(now)
    reasons = planning.cause_reasons(check.remedy, list(check.present), now, fresh, then=_then(check))
    blocked = None if reasons else planning.blocked_now(check.remedy, fresh)
    return CauseChecked(tuple(reasons), recheck_details(fresh, still=not reasons), blocked)


def _then(check: CauseCheck) -> NamespaceSnapshot | None:
    if check.then is None:
        return None
    try:
        return decompress_snapshot(check.then)
    except (ValueError, KeyError, TypeError, zlib.error) as e:
        log.warning("request %s: the snapshot it was requested from cannot be read: %s", check.request_id, e)
        return None


def recheck_details(fresh: Diagnosis, *, still: bool) -> dict[str, object]:
    """What the re-check of the cause saw, for the audit trail."""
    return {
        "recheck": {
            "observed_at": fresh.observed_at.isoformat(),
            "state": fresh.state.value,
            "cause": fresh.cause.value if fresh.cause else None,
            "complete": fresh.complete,
            "still_proposed": still,
        }
    }
