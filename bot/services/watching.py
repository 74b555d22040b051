"""The watch: stuck namespaces of watched clusters are found and posted before anyone asks.

Every round (NSSTUCK_WATCH_SECONDS) each watched cluster (`watch:` in the config file) is claimed in
the database for that round, so that one replica, whichever claims it first, lists its namespaces
once. Then, with that one list:
- a namespace Terminating for longer than the cluster's `watch.after`, whose incident the watch has not
  posted yet, is diagnosed through the `Diagnoser` (the same one `/nsstuck` uses), its incident opened
  and its run recorded with the mark "posted unasked" in one transaction (a conditional update: one
  replica wins), then published by the outbox to the watch's channel like any command's (verdict,
  report in the thread, retried while Slack is down); the incident's thread is followed from then on
  as any other's (the follow-up job: cause changes, resolution);
- an open incident of the cluster whose namespace is no longer listed is resolved, and its thread told;
- whether the cluster answered is kept per cluster: when that changes, the channel is told once (the
  replica whose conditional update made the change tells it), not every round.
A round diagnoses at most `batch` namespaces of a cluster, oldest first; the others are left for the
next rounds.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Protocol

from bot.domain.findings import NamespaceState
from bot.domain.refs import ClusterName, KubeObject, deletion_time, meta
from bot.errors import NsstuckError
from bot.kube.collecting import list_namespaces
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import Transport
from bot.logs import carrying, log_context
from bot.services.diagnosing import Diagnoser
from bot.services.followup import open_incidents, resolve_gone
from bot.services.metrics import Metrics
from bot.services.notifying import ClusterNotifier, IncidentNotifier
from bot.services.outbox import Outbox
from bot.services.recording import RECURRENCE_AFTER, record_unasked
from bot.settings import AppConfig
from bot.store.database import Database

log = logging.getLogger(__name__)

# who asked, in the runs the watch records (the verdict says "found by the watch" instead of a person)
WATCHER = "nsstuck-watch"
# claims of rounds are kept this long (to look back at who scanned what), then pruned
KEEP_ROUNDS = timedelta(days=1)

# (registered cluster) -> its namespaces; raises ClusterUnreachableError, or UserError for a kubeconfig
# that cannot work
NamespaceLister = Callable[[ClusterName], list[KubeObject]]


@dataclass(frozen=True)
class Watched:
    """A watched cluster: after how long a Terminating namespace is posted, and where."""

    cluster: ClusterName
    after: timedelta
    channel: str


def watched_clusters(config: AppConfig) -> list[Watched]:
    """The clusters of the config file with `watch:` (the config refuses one without a channel)."""
    found = []
    for cluster in config.clusters:
        channel = cluster.watch_channel
        if cluster.watch is not None and channel is not None:
            found.append(Watched(cluster.cluster_name, cluster.watch.after, channel))
    return found


def registry_lister(clusters: ClusterRegistry, *, timeout: float = 10.0) -> NamespaceLister:
    """One list of a cluster's namespaces, on the client the registry keeps for it."""

    def listed(cluster: ClusterName) -> list[KubeObject]:
        with clusters.lease(cluster) as connection:
            return list_namespaces(Transport(connection, call_timeout=timeout), timeout=timeout)

    return listed


class WatchNotifier(IncidentNotifier, ClusterNotifier, Protocol):
    """What the watch tells people besides the verdicts (those go by the outbox): resolutions in
    incident threads, and a cluster that stopped answering or is back."""


@dataclass(frozen=True)
class ClusterRound:
    """What one round did on one cluster (for the logs and the tests)."""

    cluster: str
    claimed: bool  # False: another replica (or an earlier tick of this one) has this round
    reachable: bool | None = None
    terminating: int = 0
    posted: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()


class Watch:
    def __init__(
        self,
        db: Database,
        *,
        watched: Sequence[Watched],
        lister: NamespaceLister,
        diagnoser: Diagnoser,
        outbox: Outbox,
        notifier: WatchNotifier | None,
        round_seconds: float,
        clock: Callable[[], datetime],
        by: str,
        metrics: Metrics | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        batch: int = 10,
        parallel: int = 4,
        recurrence_after: int = RECURRENCE_AFTER,
    ) -> None:
        """`clock` says how long a namespace has been Terminating (the digests' clock: NSSTUCK_CLOCK_FILE
        in rehearsals); `wall` numbers the rounds and times the bot's own events. `by` names this replica
        in the claims."""
        self.db = db
        self.watched = tuple(watched)
        self.lister = lister
        self.diagnoser = diagnoser
        self.outbox = outbox
        self.notifier = notifier
        self.round_seconds = round_seconds
        self.clock = clock
        self.by = by
        self.metrics = metrics
        self.wall = wall
        self.recurrence_after = recurrence_after
        self.batch = batch
        self.parallel = parallel

    def round_start(self, at: datetime) -> datetime:
        """The start of the round `at` falls in: rounds are numbered from the epoch, so that every
        replica names the same round the same way."""
        number = math.floor(at.timestamp() / self.round_seconds)
        return datetime.fromtimestamp(number * self.round_seconds, UTC)

    def run_round(self) -> list[ClusterRound]:
        """This round, on every watched cluster whose round no one has claimed yet (several at once)."""
        if not self.watched:
            return []
        start = self.round_start(self.wall())
        with self.db.unit_of_work() as uow:
            uow.watch.prune_rounds(start - KEEP_ROUNDS)
        one = carrying(partial(self._cluster, round_start=start))
        with ThreadPoolExecutor(max_workers=min(self.parallel, len(self.watched)), thread_name_prefix="watch") as pool:
            return list(pool.map(one, self.watched))

    def _cluster(self, watched: Watched, *, round_start: datetime) -> ClusterRound:
        with log_context(cluster=watched.cluster):
            with self.db.unit_of_work() as uow:
                round_id = uow.watch.claim_round(cluster=watched.cluster, round_start=round_start, by=self.by)
            if round_id is None:
                return ClusterRound(watched.cluster, claimed=False)
            listed_at = self.wall()
            try:
                listed = self.lister(watched.cluster)
            except NsstuckError as e:  # unreachable, refused, or a kubeconfig that cannot work
                log.info("watch: cluster %s did not answer: %s", watched.cluster, e)
                self._reachability(watched, reachable=False, reason=str(e))
                self._finish(watched, round_id, "unreachable", None)
                return ClusterRound(watched.cluster, claimed=True, reachable=False)
            self._reachability(watched, reachable=True, reason=None)
            terminating: dict[str, tuple[str, datetime]] = {}
            present: set[str] = set()
            for item in listed:
                m = meta(item)
                uid = str(m.get("uid", ""))
                present.add(uid)
                since = deletion_time(item)
                if since is not None:
                    terminating[uid] = (str(m.get("name", "")), since)
            resolved = self._resolve_gone(watched, present, listed_at=listed_at)
            posted = self._post_stuck(watched, terminating)
            self._finish(watched, round_id, "listed", len(listed))
            return ClusterRound(
                watched.cluster,
                claimed=True,
                reachable=True,
                terminating=len(terminating),
                posted=posted,
                resolved=resolved,
            )

    def _finish(self, watched: Watched, round_id: int, outcome: str, namespaces: int | None) -> None:
        with self.db.unit_of_work() as uow:
            uow.watch.finish_round(round_id, outcome=outcome, namespaces=namespaces, at=self.wall())
        if self.metrics is not None:
            self.metrics.watch_rounds.labels(cluster=watched.cluster, outcome=outcome).inc()

    def _reachability(self, watched: Watched, *, reachable: bool, reason: str | None) -> None:
        at = self.wall()
        with self.db.unit_of_work() as uow:
            change = uow.watch.observe(watched.cluster, reachable=reachable, reason=reason, at=at)
        if change is None or self.notifier is None:
            return
        try:
            if change.reachable:
                took = int((at - change.since).total_seconds())
                self.notifier.cluster_back(watched.channel, cluster=watched.cluster, after_seconds=took)
            else:
                self.notifier.cluster_unreachable(watched.channel, cluster=watched.cluster, reason=reason or "")
        except Exception:  # the change is committed; a lost note must not stop the round
            log.exception("could not say that cluster %s is %s", watched.cluster, "back" if reachable else "down")

    def _resolve_gone(self, watched: Watched, present: set[str], *, listed_at: datetime) -> tuple[str, ...]:
        """Open incidents of the cluster whose namespace the list no longer has: gone, resolved. Only
        those opened before the list was asked for (a newer one's namespace may be newer than the list)."""
        resolved = []
        for incident in open_incidents(self.db, watched.cluster):
            if incident.namespace_uid in present or incident.first_seen >= listed_at:
                continue
            if resolve_gone(self.db, incident, notifier=self.notifier, at=self.clock()):
                log.info("watch: %s/%s is gone: resolved", watched.cluster, incident.namespace)
                resolved.append(incident.namespace)
        return tuple(resolved)

    def _post_stuck(self, watched: Watched, terminating: dict[str, tuple[str, datetime]]) -> tuple[str, ...]:
        now = self.clock()
        old = {uid for uid, (_, since) in terminating.items() if now - since >= watched.after}
        with self.db.unit_of_work() as uow:
            done = uow.incidents.not_for_the_watch(watched.cluster, old)
        due = sorted((since, name, uid) for uid, (name, since) in terminating.items() if uid in old - done)
        posted = []
        for _, name, uid in due[: self.batch]:
            with log_context(namespace=name):
                if self._post_one(watched, name, uid):
                    posted.append(name)
        return tuple(posted)

    def _post_one(self, watched: Watched, name: str, uid: str) -> bool:
        try:
            result = self.diagnoser(watched.cluster, name)
        except NsstuckError as e:  # the cluster stopped answering mid-round: the next round tries again
            log.info("watch: diagnosing %s/%s failed: %s", watched.cluster, name, e)
            if self.metrics is not None:
                self.metrics.diagnoses.labels(state="error", cause="").inc()
            return False
        # its summary: made where it was diagnosed (a worker process), read here without decoding the report
        summary = result.summary
        if self.metrics is not None:
            self.metrics.diagnoses.labels(state=summary.state.value, cause=summary.cause or "").inc()
        if summary.state is not NamespaceState.TERMINATING or summary.namespace_uid != uid:
            return False  # gone (or gone and made again) since the list: nothing stuck to say
        recorded = record_unasked(
            self.db,
            result,
            requested_by=WATCHER,
            post_channel=watched.channel,
            at=self.wall(),
            recurrence_after=self.recurrence_after,
        )
        if recorded is None:
            return False  # its verdict was posted unasked already (another replica, an earlier round)
        log.info("watch: %s/%s stuck (%s): posting it", watched.cluster, name, summary.cause or "no cause")
        self.outbox.deliver(recorded.run_id)
        return True
