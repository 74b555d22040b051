"""Following open incidents until their namespace is gone.

A scheduled job diagnoses every open incident again: when the namespace is gone (or was recreated
under a new UID) the incident is resolved, once across replicas (a conditional update), and its
thread says after how long; when the cause changed, the thread says that too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError
from bot.services.diagnosing import Diagnoser
from bot.services.notifying import IncidentNotifier, Thread
from bot.services.recording import RECURRENCE_AFTER, note_observation, record
from bot.store.database import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenIncident:
    id: int
    cluster: ClusterName
    namespace: str
    namespace_uid: str
    cause: str | None
    since: datetime
    channel: str | None
    thread_ts: str | None
    first_seen: datetime


@dataclass(frozen=True)
class FollowUp:
    checked: int = 0
    resolved: int = 0
    cause_changed: int = 0
    unreachable: int = 0


def open_incidents(db: Database, cluster: str | None = None) -> list[OpenIncident]:
    """Every open incident (of `cluster`, when given), oldest first, as plain values."""
    with db.unit_of_work() as uow:
        return [
            OpenIncident(
                id=i.id,
                cluster=ClusterName(i.cluster),
                namespace=i.namespace,
                namespace_uid=i.namespace_uid,
                cause=i.cause,
                since=i.terminating_since or i.first_seen_at,
                channel=i.slack_channel,
                thread_ts=i.slack_thread_ts,
                first_seen=i.first_seen_at,
            )
            for i in uow.incidents.open_incidents(cluster)
        ]


def follow_up(
    db: Database,
    *,
    registered: Callable[[str], bool],
    diagnoser: Diagnoser,
    notifier: IncidentNotifier | None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    recurrence_after: int = RECURRENCE_AFTER,
) -> FollowUp:
    checked = resolved = changed = unreachable = 0
    for incident in open_incidents(db):
        if not registered(incident.cluster):
            continue  # no longer registered: nothing to ask
        try:
            result = diagnoser(incident.cluster, incident.namespace)
        except NsstuckError as e:
            log.info("follow-up of %s/%s: %s", incident.cluster, incident.namespace, e)
            unreachable += 1
            continue
        checked += 1
        summary = result.summary  # (a result made in a worker process: its report is not decoded here)
        gone = summary.namespace_uid != incident.namespace_uid  # deleted, or deleted and recreated
        if gone:
            resolved += resolve_gone(db, incident, notifier=notifier, at=now())
            continue
        new_cause = summary.cause.value if summary.cause else None
        if new_cause != incident.cause:
            changed += 1
            record(db, result, trigger="schedule", requested_by="schedule", recurrence_after=recurrence_after)
            _note(notifier, incident, cause=new_cause, summary=summary.headline)
        else:  # no run recorded: what this look saw is kept all the same, for the next one's progress
            note_observation(db, incident.id, result.observation)
        with db.unit_of_work() as uow:
            uow.incidents.mark_checked(incident.id, now())
    return FollowUp(checked, resolved, changed, unreachable)


def resolve_gone(db: Database, incident: OpenIncident, *, notifier: IncidentNotifier | None, at: datetime) -> bool:
    """The incident's namespace is gone (or was recreated under a new UID): resolve it, once across
    replicas (a conditional update), and tell its thread after how long. True for the caller that did."""
    with db.unit_of_work() as uow:
        won = uow.incidents.resolve(incident.id, at)
    if not won:
        return False
    _note(notifier, incident, resolved_after=int((at - incident.since).total_seconds()))
    with db.unit_of_work() as uow:
        uow.incidents.mark_resolution_posted(incident.id, at)
    return True


def _note(
    notifier: IncidentNotifier | None,
    incident: OpenIncident,
    *,
    resolved_after: int | None = None,
    cause: str | None = None,
    summary: str = "",
) -> None:
    """Tell the incident's thread that it was resolved (after `resolved_after` seconds), or that its
    cause changed to `cause`."""
    if notifier is None or incident.channel is None or incident.thread_ts is None:
        return
    thread = Thread(incident.channel, incident.thread_ts)
    try:
        if resolved_after is not None:
            notifier.incident_resolved(thread, namespace=incident.namespace, after_seconds=resolved_after)
        else:
            notifier.cause_changed(thread, before=incident.cause, after=cause, summary=summary)
    except Exception:  # the incident's state is committed; a lost note must not stop the job
        log.exception("could not post the follow-up of incident %s", incident.id)
