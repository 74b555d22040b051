"""Digests: what is stuck, for how long and why, per cluster, delivered on time and once.

The schedule is a cron expression in a time zone (APScheduler's CronTrigger does the calendar,
daylight-saving changes included). A tick looks at every digest: if its latest scheduled time is
due (and not older than its `catch_up`), the tick claims that (digest, time) in the database; only
the replica whose insert went in builds and posts it. A run missed while nsstuck was down is thus
made up once at start-up, and never twice. Time comes from an injected clock.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.domain.refs import ClusterName
from bot.errors import UserError
from bot.kube.connecting import ClusterTarget
from bot.kube.registry import ClusterRegistry
from bot.remediation.requests import open_requests
from bot.services.recording import record
from bot.services.scanning import ClusterScan, scan_iter
from bot.settings import AppConfig, DigestConfig, cron_trigger
from bot.store.database import Database

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# yields one cluster's scan at a time, so that a 50-cluster digest never holds every snapshot at once
Scanner = Callable[..., Iterable[ClusterScan]]
# posts a built digest; returns the message's ts, or None when there was nothing to post
Poster = Callable[["Digest"], str | None]


def wall_clock() -> datetime:
    return datetime.now(UTC)


def file_clock(path: Path) -> Clock:
    """A clock that reads "now" from a file (an ISO 8601 time), for rehearsals and tests."""

    def now() -> datetime:
        try:
            moment = datetime.fromisoformat(path.read_text().strip().replace("Z", "+00:00"))
        except (OSError, ValueError):
            log.warning("clock file %s is unreadable; using the wall clock", path)
            return wall_clock()
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    return now


def clock_for(clock_file: Path | None) -> Clock:
    """The digests' clock: the wall clock, or NSSTUCK_CLOCK_FILE's time when that is set."""
    return file_clock(clock_file) if clock_file else wall_clock


def replica_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# -- the schedule --------------------------------------------------------------------------------


def due(digest: DigestConfig, now: datetime) -> datetime | None:
    """The digest's latest scheduled time at or before `now`, if it is at most `catch_up` old."""
    trigger = cron_trigger(digest.schedule, digest.timezone)
    earliest = now - digest.catch_up
    fire = trigger.get_next_fire_time(None, earliest)
    latest: datetime | None = None
    while fire is not None and fire <= now:
        latest = fire
        fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
    return latest.astimezone(UTC) if latest is not None else None


def next_time(digest: DigestConfig, after: datetime) -> datetime | None:
    trigger = cron_trigger(digest.schedule, digest.timezone)
    fire = trigger.get_next_fire_time(None, after + timedelta(microseconds=1))
    return fire.astimezone(UTC) if fire is not None else None


# -- what a digest says --------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """A stuck namespace (or one that was, for the resolved list)."""

    cluster: str
    namespace: str
    uid: str
    incident_id: int | None = None
    stuck_for: int = 0  # seconds since its deletion, at the digest's time
    cause: str | None = None
    summary: str = ""
    channel: str | None = None
    thread_ts: str | None = None
    error: str | None = None  # why it could not be diagnosed

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Waiting:
    """A remediation request waiting for approval (or being applied)."""

    id: int
    namespace: str
    description: str
    approvals: int
    required: int
    status: str
    channel: str | None = None
    thread_ts: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Section:
    """One cluster's part of a digest."""

    cluster: str
    reachable: bool = True
    error: str | None = None
    new: tuple[Entry, ...] = ()
    still: tuple[Entry, ...] = ()
    resolved: tuple[Entry, ...] = ()
    unverified: tuple[Entry, ...] = ()  # stuck at the last digest, but the cluster cannot be asked now
    waiting: tuple[Waiting, ...] = ()

    @property
    def quiet(self) -> bool:
        return self.reachable and not (self.new or self.still or self.resolved or self.waiting)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "reachable": self.reachable,
            "error": self.error,
            "new": [e.to_json() for e in self.new],
            "still": [e.to_json() for e in self.still],
            "resolved": [e.to_json() for e in self.resolved],
            "unverified": [e.to_json() for e in self.unverified],
            "waiting": [w.to_json() for w in self.waiting],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Section:
        return cls(
            cluster=data["cluster"],
            reachable=bool(data.get("reachable", True)),
            error=data.get("error"),
            new=tuple(Entry.from_json(e) for e in data.get("new", ())),
            still=tuple(Entry.from_json(e) for e in data.get("still", ())),
            resolved=tuple(Entry.from_json(e) for e in data.get("resolved", ())),
            unverified=tuple(Entry.from_json(e) for e in data.get("unverified", ())),
            waiting=tuple(Waiting(**w) for w in data.get("waiting", ())),
        )


@dataclass(frozen=True)
class Digest:
    key: str
    channel: str
    timezone: str
    stuck_after: int  # seconds
    scheduled_for: datetime
    previous: datetime | None  # the time of the digest this one compares with
    sections: tuple[Section, ...] = field(default=())
    manual: bool = False

    @property
    def stuck(self) -> int:
        return sum(len(s.new) + len(s.still) for s in self.sections)

    @property
    def all_clear(self) -> bool:
        return all(s.quiet for s in self.sections)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "nsstuck.digest/v1",
            "key": self.key,
            "channel": self.channel,
            "timezone": self.timezone,
            "stuck_after": self.stuck_after,
            "scheduled_for": self.scheduled_for.isoformat(),
            "previous": self.previous.isoformat() if self.previous else None,
            "manual": self.manual,
            "sections": [s.to_json() for s in self.sections],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Digest:
        previous = data.get("previous")
        return cls(
            key=data["key"],
            channel=data["channel"],
            timezone=data["timezone"],
            stuck_after=int(data["stuck_after"]),
            scheduled_for=datetime.fromisoformat(data["scheduled_for"]),
            previous=datetime.fromisoformat(previous) if previous else None,
            sections=tuple(Section.from_json(s) for s in data.get("sections", ())),
            manual=bool(data.get("manual")),
        )

    def summary(self) -> dict[str, Any]:
        """What the next digest compares with: every namespace known stuck, and where we could not look."""
        stuck = [e.to_json() for s in self.sections for e in (*s.new, *s.still, *s.unverified)]
        return {
            "stuck": [{k: e[k] for k in ("cluster", "namespace", "uid") if k in e} for e in stuck],
            "unreachable": [s.cluster for s in self.sections if not s.reachable],
            "clusters": [s.cluster for s in self.sections],
        }


# -- building one --------------------------------------------------------------------------------


def _targets(config: AppConfig, clusters: ClusterRegistry, digest: DigestConfig) -> list[ClusterTarget]:
    # a digest that names no cluster covers those its channel may use, never those kept to other channels
    names = config.digest_clusters(digest)
    return [clusters.target(ClusterName(name)) for name in names]  # names the config file validated


def compose(
    db: Database,
    config: AppConfig,
    clusters: ClusterRegistry,
    digest: DigestConfig,
    *,
    now: datetime,
    scheduled_for: datetime | None = None,
    scanner: Scanner = scan_iter,
    record_runs: bool = True,
    manual: bool = False,
) -> Digest:
    """Scan the digest's clusters, record what was diagnosed (incidents included), and compare with
    the previous digest. With `record_runs` false (a dry run) nothing is written."""
    when = scheduled_for or now
    scans = scanner(
        _targets(config, clusters, digest), stuck_after=digest.stuck_after, now=now, observer=clusters.observer
    )
    with db.unit_of_work() as uow:
        before = uow.digests.previous(digest.key, when)
        previous = dict(before.summary or {}) if before is not None else None
        previous_time = before.scheduled_for if before is not None else None
    known: dict[str, list[dict[str, Any]]] = {}
    for item in (previous or {}).get("stuck", ()):
        known.setdefault(str(item.get("cluster")), []).append(item)
    waiting_by_cluster: dict[str, list[Waiting]] = {}
    for view in open_requests(db):
        waiting_by_cluster.setdefault(view.cluster, []).append(
            Waiting(
                id=view.id,
                namespace=view.namespace,
                description=view.remedy.description,
                approvals=len(view.approvals),
                required=view.required_approvals,
                status=view.status,
                channel=view.channel,
                thread_ts=view.thread_ts,
            )
        )
    sections = []
    for result in scans:
        before_here = known.get(result.cluster, [])
        waiting = tuple(waiting_by_cluster.get(result.cluster, ()))
        if not result.reachable:
            unverified = tuple(Entry.from_json(item) for item in before_here)
            sections.append(Section(result.cluster, False, result.error, unverified=unverified, waiting=waiting))
            continue
        entries = [_entry(db, found, now=now, record_runs=record_runs) for found in result.stuck]
        seen_before = {str(item.get("uid")) for item in before_here}
        new = tuple(e for e in entries if e.uid not in seen_before)
        still = tuple(e for e in entries if e.uid in seen_before)
        stuck_now = {e.uid for e in entries}
        resolved = tuple(
            _resolved(db, item)
            for item in before_here
            if str(item.get("uid")) not in stuck_now and str(item.get("uid")) not in result.terminating
        )
        sections.append(Section(result.cluster, True, None, new=new, still=still, resolved=resolved, waiting=waiting))
    return Digest(
        key=digest.key,
        channel=digest.channel,
        timezone=digest.timezone,
        stuck_after=int(digest.stuck_after.total_seconds()),
        scheduled_for=when,
        previous=previous_time,
        sections=tuple(sections),
        manual=manual,
    )


def _entry(db: Database, found: Any, *, now: datetime, record_runs: bool) -> Entry:
    stuck_for = int((now - found.terminating_since).total_seconds())
    if found.result is None:
        incident = _incident(db, found.cluster, found.uid)
        return Entry(
            found.cluster,
            found.namespace,
            found.uid,
            incident_id=incident[0] if incident else None,
            stuck_for=stuck_for,
            channel=incident[1] if incident else None,
            thread_ts=incident[2] if incident else None,
            error=found.error or "could not be diagnosed",
        )
    diagnosis = found.result.diagnosis
    blocking = [f for f in diagnosis.findings if f.blocking]
    summary = blocking[0].summary if blocking else ""
    incident_id = channel = thread_ts = None
    if record_runs:
        recorded = record(db, found.result, trigger="schedule", requested_by="digest")
        incident_id, channel, thread_ts = recorded.incident_id, recorded.slack_channel, recorded.slack_thread_ts
    else:
        incident = _incident(db, found.cluster, found.uid)
        if incident:
            incident_id, channel, thread_ts = incident
    return Entry(
        found.cluster,
        found.namespace,
        found.uid,
        incident_id=incident_id,
        stuck_for=stuck_for,
        cause=diagnosis.cause.value if diagnosis.cause else None,
        summary=summary,
        channel=channel,
        thread_ts=thread_ts,
    )


def _incident(db: Database, cluster: str, uid: str) -> tuple[int, str | None, str | None] | None:
    with db.unit_of_work() as uow:
        incident = uow.incidents.by_namespace_uid(cluster, uid)
        if incident is None:
            return None
        return incident.id, incident.slack_channel, incident.slack_thread_ts


def _resolved(db: Database, item: dict[str, Any]) -> Entry:
    cluster, uid = str(item.get("cluster")), str(item.get("uid"))
    incident = _incident(db, cluster, uid)
    return Entry(
        cluster,
        str(item.get("namespace")),
        uid,
        incident_id=incident[0] if incident else None,
        channel=incident[1] if incident else None,
        thread_ts=incident[2] if incident else None,
    )


# -- running them --------------------------------------------------------------------------------


def _deliver(db: Database, run_id: int, digest: Digest, poster: Poster, *, now: datetime) -> str | None:
    with db.unit_of_work() as uow:
        run = uow.digests.get(run_id)
        attempts = run.post_attempts if run is not None else 0
        if not uow.digests.claim_post(run_id, attempts):
            return None
    try:
        ts = poster(digest)
    except Exception as e:  # Slack refused or is down: the run waits for the next tick
        log.warning("posting digest %s failed (%s); it will be retried", digest.key, e)
        with db.unit_of_work() as uow:
            uow.digests.post_failed(run_id, f"{e.__class__.__name__}: {e}")
        return None
    with db.unit_of_work() as uow:
        uow.digests.posted(run_id, ts=ts, at=now)
    return ts


def build_and_post(
    db: Database,
    config: AppConfig,
    clusters: ClusterRegistry,
    digest: DigestConfig,
    *,
    run_id: int,
    now: datetime,
    scheduled_for: datetime,
    poster: Poster,
    scanner: Scanner = scan_iter,
    manual: bool = False,
) -> Digest:
    built = compose(db, config, clusters, digest, now=now, scheduled_for=scheduled_for, scanner=scanner, manual=manual)
    silent = built.all_clear and not digest.all_clear
    with db.unit_of_work() as uow:
        uow.digests.built(run_id, summary=built.summary(), message=None if silent else built.to_json(), at=now)
    if not silent:
        _deliver(db, run_id, built, poster, now=now)
    return built


def run_due(
    db: Database,
    config: AppConfig,
    clusters: ClusterRegistry,
    *,
    now: datetime,
    poster: Poster,
    scanner: Scanner = scan_iter,
    by: str | None = None,
) -> list[Digest]:
    """Every digest whose scheduled time has come (once per time, across replicas), and retries of
    digests whose posting failed."""
    done = []
    for digest in config.digests:
        when = due(digest, now)
        if when is None:
            continue
        with db.unit_of_work() as uow:
            run_id = uow.digests.claim(
                key=digest.key, channel=digest.channel, scheduled_for=when, by=by or replica_name()
            )
        if run_id is None:
            continue  # this time's run is someone else's (or ours, earlier)
        log.info("digest %s for %s: building", digest.key, when.isoformat())
        done.append(
            build_and_post(
                db,
                config,
                clusters,
                digest,
                run_id=run_id,
                now=now,
                scheduled_for=when,
                poster=poster,
                scanner=scanner,
            )
        )
    with db.unit_of_work() as uow:
        retry = [(r, uow.digests.get(r)) for r in uow.digests.unposted()]
        pending = [(r, Digest.from_json(run.message)) for r, run in retry if run is not None and run.message]
    for run_id, built in pending:
        _deliver(db, run_id, built, poster, now=now)
    return done


def run_now(
    db: Database,
    config: AppConfig,
    clusters: ClusterRegistry,
    *,
    channel: str,
    now: datetime,
    poster: Poster | None,
    scanner: Scanner = scan_iter,
) -> Digest:
    """`nsstuck digest run --channel C`: the channel's digest now; with no poster, a dry run that
    writes nothing."""
    digest = next((d for d in config.digests if d.channel == channel), None)
    if digest is None:
        if not config.clusters:
            raise UserError("no cluster is registered (clusters: in the config file)")
        digest = DigestConfig(channel=channel, schedule="0 9 * * *", name=f"{channel} manual")
        if not config.digest_clusters(digest):
            raise UserError(f"no registered cluster may be used from {channel} (each cluster's channels:)")
    if poster is None:
        return compose(db, config, clusters, digest, now=now, scanner=scanner, record_runs=False, manual=True)
    with db.unit_of_work() as uow:
        run_id = uow.digests.claim(key=digest.key, channel=channel, scheduled_for=now, by=replica_name(), manual=True)
    if run_id is None:
        raise UserError("a digest for this channel was made at this very moment; try again")
    return build_and_post(
        db,
        config,
        clusters,
        digest,
        run_id=run_id,
        now=now,
        scheduled_for=now,
        poster=poster,
        scanner=scanner,
        manual=True,
    )
