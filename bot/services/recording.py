"""Recording a diagnosis: its incident (one per namespace UID), the run, the report and the snapshot."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.findings import Diagnosis, NamespaceState, Summary
from bot.domain.refs import ClusterName
from bot.domain.seen import (
    BY_ITSELF,
    RECURRENCE_DAYS,
    REMEDY,
    SEEN_LIMIT,
    STILL_OPEN,
    EndedBy,
    Recurrence,
    SeenBefore,
    Thread,
    recurrence_text,
)
from bot.domain.slack_links import thread_url
from bot.domain.snapshot import Earlier, Observation, kept_observations
from bot.domain.snapshot_codec import StoredJson, with_keys
from bot.errors import NsstuckError
from bot.services.diagnosing import DiagnosisResult
from bot.store.database import Database, UnitOfWork
from bot.store.records import IncidentRecord

log = logging.getLogger(__name__)

# NSSTUCK_RECURRENCE_AFTER's default: a cause and family seen in more incidents than this in 30 days recur
RECURRENCE_AFTER = 3


@dataclass(frozen=True)
class Recorded:
    run_id: int
    incident_id: int | None
    # the Slack thread the incident already lives in, if any
    slack_channel: str | None = None
    slack_thread_ts: str | None = None


def record(
    db: Database,
    result: DiagnosisResult,
    *,
    trigger: str,
    requested_by: str,
    post_channel: str | None = None,
    recurrence_after: int = RECURRENCE_AFTER,
) -> Recorded:
    """Commit the run (and its incident, for a terminating namespace) before anything is posted."""
    # in the stored forms, made before the transaction (in the worker process that diagnosed, for the
    # bot): the database (SQLite's one writer) is not held while the CPU works
    stored = result.stored()
    with db.unit_of_work() as uow:
        incident = _incident(uow, result.summary)
        return _run(
            uow,
            result,
            incident,
            stored,
            trigger=trigger,
            requested_by=requested_by,
            post_channel=post_channel,
            recurrence_after=recurrence_after,
        )


def record_unasked(
    db: Database,
    result: DiagnosisResult,
    *,
    requested_by: str,
    post_channel: str,
    at: datetime,
    recurrence_after: int = RECURRENCE_AFTER,
) -> Recorded | None:
    """The watch's run of a terminating namespace, to be posted to `post_channel`, committed with the
    mark that its incident's verdict was posted unasked; None (nothing recorded) when that mark was
    made already, by this replica or another, or the namespace is not terminating."""
    summary = result.summary
    if summary.state is not NamespaceState.TERMINATING or not summary.namespace_uid:
        return None
    stored = result.stored()
    with db.unit_of_work() as uow:
        incident = _incident(uow, summary)
        if incident is None or not uow.incidents.claim_watch_post(incident.id, at):
            return None
        return _run(
            uow,
            result,
            incident,
            stored,
            trigger="schedule",
            requested_by=requested_by,
            post_channel=post_channel,
            recurrence_after=recurrence_after,
        )


def _incident(uow: UnitOfWork, summary: Summary) -> IncidentRecord | None:
    """The incident of a terminating namespace (opened if need be), None for any other."""
    if summary.state is not NamespaceState.TERMINATING or not summary.namespace_uid:
        return None
    return uow.incidents.open_for(
        cluster=summary.cluster,
        namespace=summary.namespace,
        namespace_uid=summary.namespace_uid,
        terminating_since=summary.deletion_timestamp,
        cause=summary.cause.value if summary.cause else None,
        blocker=summary.family,
    )


def _run(
    uow: UnitOfWork,
    result: DiagnosisResult,
    incident: IncidentRecord | None,
    stored: tuple[Summary, StoredJson, bytes],
    *,
    trigger: str,
    requested_by: str,
    post_channel: str | None,
    recurrence_after: int = RECURRENCE_AFTER,
) -> Recorded:
    summary, report, snapshot = stored
    if incident is not None:
        report = _with_memory(uow, report, summary, incident, recurrence_after)
    run_id = uow.diagnoses.record(
        incident_id=incident.id if incident else None,
        cluster=summary.cluster,
        namespace=summary.namespace,
        trigger=trigger,
        requested_by=requested_by,
        started_at=summary.observed_at,
        duration_ms=result.duration_ms,
        state=summary.state.value,
        cause=summary.cause.value if summary.cause else None,
        complete=summary.complete,
        report=report,
        snapshot=snapshot,
        post_channel=post_channel,
    )
    if incident is not None:
        _observed(uow, incident, result.observation)
    return Recorded(
        run_id=run_id,
        incident_id=incident.id if incident else None,
        slack_channel=incident.slack_channel if incident else None,
        slack_thread_ts=incident.slack_thread_ts if incident else None,
    )


def _with_memory(
    uow: UnitOfWork, report: StoredJson, summary: Summary, incident: IncidentRecord, recurrence_after: int
) -> StoredJson:
    """The report with `seen_before` (empty without a family or a cause) and, past the threshold, the
    recurrence line (issue 39 §3)."""
    seen, recurrence = seen_before(uow, summary, incident.id, recurrence_after)
    return with_keys(report, _memory_keys(seen, recurrence))


def _memory_keys(seen: list[SeenBefore], recurrence: Recurrence | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"seen_before": [s.to_json() for s in seen]}
    if recurrence is not None:
        extra["recurrence"] = recurrence.to_json()
    return extra


def recall(
    open_database: Callable[[], Database],
    diagnosis: Diagnosis,
    family: str | None,
    *,
    recurrence_after: int = RECURRENCE_AFTER,
) -> tuple[Diagnosis, str | None]:
    """Reading only, for a door that records nothing (`nsstuck diagnose`, the MCP door): the diagnosis with
    the `seen_before` and `recurrence` a recorded report of this terminating namespace carries (`family`: its
    blocking object family, `Summary.family`), and None; a namespace in any other state as it is. Its own
    incident, when it is recorded already, is not among the earlier ones; when it is not, the recurrence
    counts it all the same (as recording it would). A database that cannot be opened or read: the diagnosis
    as it is, and why (for the door to say "seen before: unknown")."""
    summary = Summary.of(diagnosis, family=family)
    if summary.state is not NamespaceState.TERMINATING or not summary.namespace_uid:
        return diagnosis, None
    try:
        db = open_database()
    except NsstuckError as e:
        return diagnosis, str(e)
    try:
        with db.unit_of_work() as uow:
            own = uow.incidents.by_namespace_uid(summary.cluster, summary.namespace_uid)
            seen, recurrence = seen_before(
                uow, summary, -1 if own is None else own.id, recurrence_after, unrecorded=1 if own is None else 0
            )
    except NsstuckError as e:
        return diagnosis, str(e)
    finally:
        db.dispose()
    return replace(diagnosis, seen_before=tuple(seen), recurrence=recurrence), None


def seen_before(
    uow: UnitOfWork, summary: Summary, exclude: int, recurrence_after: int, *, unrecorded: int = 0
) -> tuple[list[SeenBefore], Recurrence | None]:
    """The earlier incidents of the same cluster, cause and blocking object family (less the incident
    `exclude`), most recent first, and the recurrence when more than `recurrence_after` incidents (this one
    included: `unrecorded` when it is not in the database) had them in 30 days."""
    cause, family = summary.cause, summary.family
    if cause is None or family is None:
        return [], None
    now = summary.observed_at
    rows = uow.history.seen_before(
        cluster=summary.cluster, cause=cause.value, blocker=family, exclude=exclude, limit=SEEN_LIMIT
    )
    seen = []
    for row in rows:
        earlier = row.incident
        started = earlier.terminating_since or earlier.first_seen_at
        ended = earlier.resolved_at or now
        if row.fix is not None:
            fix = row.fix
            digest = fix.audit_hash[:12] if fix.audit_hash else None
            ended_by = EndedBy(
                REMEDY, action=fix.action, request=fix.request_id, audit_seq=fix.audit_seq, audit_hash=digest
            )
        else:
            ended_by = EndedBy(BY_ITSELF if earlier.status == "resolved" else STILL_OPEN)
        thread = None
        if earlier.slack_channel and earlier.slack_thread_ts:
            link = thread_url(earlier.slack_channel, earlier.slack_thread_ts)
            thread = Thread(channel=earlier.slack_channel, ts=earlier.slack_thread_ts, permalink=link)
        seen.append(
            SeenBefore(
                incident=earlier.id,
                started_at=started,
                stuck_for_seconds=max(0, int((ended - started).total_seconds())),
                ended_by=ended_by,
                thread=thread,
            )
        )
    # first_seen_at is the database writer's clock (this process's), not the cluster's
    since = datetime.now(UTC) - timedelta(days=RECURRENCE_DAYS)
    count = unrecorded + uow.history.recurrences(
        cluster=summary.cluster, cause=cause.value, blocker=family, since=since
    )
    recurrence = None
    if count > recurrence_after:
        text = recurrence_text(cause.value, family, count)
        recurrence = Recurrence(incidents=count, days=RECURRENCE_DAYS, family=family, text=text)
    return seen, recurrence


def _seen(stored: list[Any] | None) -> tuple[Observation, ...]:
    seen = []
    for entry in stored or ():
        try:
            seen.append(Observation.from_json(entry))
        except (KeyError, TypeError, ValueError):  # not one this release wrote: left out
            continue
    return tuple(seen)


def _observed(uow: UnitOfWork, incident: IncidentRecord, observation: Observation) -> None:
    kept = kept_observations(_seen(incident.observations), observation)
    uow.incidents.set_observations(incident.id, [o.to_json() for o in kept])


def note_observation(db: Database, incident_id: int, observation: Observation) -> None:
    """Keep what a look at the incident's namespace saw (a follow-up that recorded no run)."""
    with db.unit_of_work() as uow:
        incident = uow.incidents.get(incident_id)
        if incident is not None:
            _observed(uow, incident, observation)


def earlier_of(db: Database, cluster: ClusterName, namespace: str) -> Earlier | None:
    """The earlier looks of the namespace's open incident, for progress; None when it has none, or the
    database cannot tell now (a diagnosis does not wait for it: it then sees no earlier look)."""
    try:
        with db.unit_of_work() as uow:
            incident = uow.incidents.open_by_name(cluster, namespace)
    except NsstuckError as e:
        log.warning("the earlier looks at %s/%s could not be read: %s", cluster, namespace, type(e).__name__)
        return None
    if incident is None or not incident.observations:
        return None
    return Earlier(namespace_uid=incident.namespace_uid, observations=_seen(incident.observations))


def attach_thread(db: Database, incident_id: int, channel: str, thread_ts: str) -> tuple[str, str]:
    """The incident's thread: this one, unless another post attached one first."""
    with db.unit_of_work() as uow:
        return uow.incidents.claim_thread(incident_id, channel, thread_ts)


def current_thread(db: Database, incident_id: int) -> tuple[str, str] | None:
    """The Slack thread the incident lives in, if one is attached yet."""
    with db.unit_of_work() as uow:
        incident = uow.incidents.get(incident_id)
        if incident is None or incident.slack_channel is None or incident.slack_thread_ts is None:
            return None
        return incident.slack_channel, incident.slack_thread_ts


@dataclass(frozen=True)
class PendingPost:
    run_id: int
    channel: str
    diagnosis: Diagnosis
    requested_by: str
    incident_id: int | None
    attempts: int
    created_at: datetime


def pending_post(db: Database, run_id: int) -> PendingPost | None:
    """A run that is still to be posted, as the poster needs it; None once it is posted."""
    with db.unit_of_work() as uow:
        run = uow.diagnoses.get(run_id)
        if run is None or run.posted_at is not None or run.post_channel is None:
            return None
        return PendingPost(
            run_id=run.id,
            channel=run.post_channel,
            diagnosis=Diagnosis.from_json(run.report),
            requested_by=run.requested_by,
            incident_id=run.incident_id,
            attempts=run.post_attempts,
            created_at=run.created_at,
        )


def claim_post(db: Database, run_id: int, attempts_seen: int) -> bool:
    with db.unit_of_work() as uow:
        return uow.diagnoses.claim_post(run_id, attempts_seen)


def mark_posted(db: Database, run_id: int, at: datetime) -> None:
    with db.unit_of_work() as uow:
        uow.diagnoses.mark_posted(run_id, at)


def mark_post_failed(db: Database, run_id: int, error: str) -> None:
    with db.unit_of_work() as uow:
        uow.diagnoses.mark_post_failed(run_id, error)


def unposted_runs(
    db: Database, *, now: datetime, max_attempts: int = 20, lease: timedelta = timedelta(minutes=20)
) -> list[int]:
    """Runs to post again: failed ones at once, silent ones (a crashed poster) after `lease`, which is
    longer than any wait for Slack's rate limit, so a slow post in flight is never posted twice."""
    with db.unit_of_work() as uow:
        return list(uow.diagnoses.unposted(max_attempts=max_attempts, older_than=now - lease))


def prune_snapshots(db: Database, *, keep: timedelta, now: datetime | None = None) -> int:
    """Retention: snapshots older than `keep` are dropped; incidents, runs and verdicts are kept."""
    cutoff = (now or datetime.now(UTC)) - keep
    with db.unit_of_work() as uow:
        return uow.diagnoses.prune_snapshots(cutoff)


def run_cluster(db: Database, run_id: int) -> str | None:
    """The cluster a recorded diagnosis run was about."""
    with db.unit_of_work() as uow:
        run = uow.diagnoses.get(run_id)
        return run.cluster if run is not None else None


def incident_namespace_uid(db: Database, incident_id: int | None) -> str | None:
    """The UID of the namespace an incident is about (a recreated namespace has another one)."""
    if incident_id is None:
        return None
    with db.unit_of_work() as uow:
        incident = uow.incidents.get(incident_id)
        return incident.namespace_uid if incident is not None else None
