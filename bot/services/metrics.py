"""Prometheus metrics of the bot, in a registry of its own (no global state): counted by the use cases
and the doors alike, served by `/metrics`.

Two kinds. Counters, gauges and histograms of what this process did (commands, diagnoses, calls to the
clusters, posts, job runs): each replica has its own, and a query sums or maxes them across replicas.
And `StoreMetrics`, computed from the database when `/metrics` is scraped (open incidents, the
outbox's backlog, whether each watched cluster answers): every replica reports the same values, and a
resolved incident is gone from the next scrape. Every label takes a bounded set of values: clusters of
the config file, causes, outcomes, job names; namespaces only while they are stuck. What worker
processes count (`bot.services.supervising`: the calls of the diagnoses they make, their CPU) reaches
this registry relayed (`bot.services.relaying`: `inc`, `observe` and `apply` here).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from bot import __version__
from bot.errors import NsstuckError
from bot.kube.observing import CallOutcome
from bot.services.relaying import Relayed, count_call
from bot.store.database import Database

log = logging.getLogger(__name__)

# what a call to a cluster's API server took: from a cached GET (milliseconds) to a timeout (10 s)
CALL_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# the outbox's attempts after which a run (a digest) is given up: the backlog counts only those still tried
MAX_POST_ATTEMPTS = 20
MAX_DIGEST_ATTEMPTS = 10

# `/metrics` in the Prometheus text format 0.0.4, whatever the scraper asks for (as before): the writer and
# content type the library gives a scrape that asks for no format in particular (`generate_latest`, and
# `text/plain; version=0.0.4; charset=utf-8` in every prometheus-client from 0.20 to 0.26). Not
# CONTENT_TYPE_LATEST: since 0.23 it names the text format 1.0.0, which the library writes only for a
# scraper that asks for it (with the escaping of names it asks for), not the version this body is in.
_ENCODE, CONTENT_TYPE = choose_encoder("")


class Metrics:
    def __init__(self, *, version: str = __version__) -> None:
        self.registry = CollectorRegistry()
        self.build_info = Gauge(
            "nsstuck_build_info", "Always 1; the version of nsstuck running", ["version"], registry=self.registry
        )
        self.build_info.labels(version=version).set(1)
        self.commands = Counter(
            "nsstuck_slash_commands_total", "Slash commands received, by kind", ["kind"], registry=self.registry
        )
        self.diagnoses = Counter(
            "nsstuck_diagnoses_total",
            "Diagnoses run for a person or the watch, by namespace state and cause (state error: failed)",
            ["state", "cause"],
            registry=self.registry,
        )
        self.diagnosis_seconds = Histogram(
            "nsstuck_diagnosis_seconds", "Time to collect and diagnose a namespace", registry=self.registry,
            buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 60),
        )  # fmt: skip
        self.commands_refused = Counter(
            "nsstuck_slash_commands_refused_total",
            "Slash commands refused before any work, by reason (user_rate, channel_rate, queue_full, requester)",
            ["reason"],
            registry=self.registry,
        )
        self.diagnoses_shared = Counter(
            "nsstuck_diagnoses_shared_total",
            "Asks answered from a diagnosis of the same namespace already queued or running",
            registry=self.registry,
        )
        self.posts = Counter("nsstuck_slack_posts_total", "Slack posts, by result", ["result"], registry=self.registry)
        self.socket_connected = Gauge(
            "nsstuck_socket_mode_connected", "1 when the Socket Mode connection is up", registry=self.registry
        )
        self.kube_requests = Counter(
            "nsstuck_kube_requests_total",
            "Requests sent to a cluster's API server (each attempt), by cluster and outcome",
            ["cluster", "outcome"],
            registry=self.registry,
        )
        self.kube_request_seconds = Histogram(
            "nsstuck_kube_request_duration_seconds",
            "Time a request to a cluster's API server took, by cluster and outcome",
            ["cluster", "outcome"],
            registry=self.registry,
            buckets=CALL_BUCKETS,
        )
        self.remediations = Counter(
            "nsstuck_remediations_total",
            "Remediation requests that ended, by result (applied, failed, stale, rejected, expired)",
            ["result"],
            registry=self.registry,
        )
        self.verifications = Counter(
            "nsstuck_remediation_verifications_total",
            "How namespaces fared after an applied change, by result (gone, still_terminating, unknown)",
            ["result"],
            registry=self.registry,
        )
        self.watch_rounds = Counter(
            "nsstuck_watch_rounds_total",
            "Rounds of the watch this replica made on a cluster, by outcome (listed, unreachable)",
            ["cluster", "outcome"],
            registry=self.registry,
        )
        # labelled scheduled_job, not job: Prometheus gives every scraped series a `job` label of its own
        self.job_last_success = Gauge(
            "nsstuck_job_last_success_timestamp_seconds",
            "When each scheduled job last ended without an error (Unix time), by scheduled job",
            ["scheduled_job"],
            registry=self.registry,
        )
        self.worker_jobs = Counter(
            "nsstuck_worker_jobs_total",
            "Jobs of the worker processes (diagnoses, re-checks), by kind and outcome: done, error (an error "
            "the asker is told, such as an unreachable cluster), died (the worker died during it), hung "
            "(stopped past its deadline), answer_too_large (its answer larger than NSSTUCK_WORKER_MAX_ANSWER_MB), "
            "answer_stalled (its answer stopped arriving: not whole NSSTUCK_WORKER_ANSWER_SECONDS after it began)",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.workers_replaced = Counter(
            "nsstuck_workers_replaced_total",
            "Worker processes replaced, by why: died (exited or killed during a job, or between jobs), hung, "
            "memory (holding more than NSSTUCK_WORKER_MAX_RSS_MB after a job), answer_too_large, answer_stalled",
            ["reason"],
            registry=self.registry,
        )
        self.workers_alive = Gauge(
            "nsstuck_workers_alive", "Worker processes running, ready for a job or at one", registry=self.registry
        )
        # relayed from the workers
        self.worker_cpu = Counter(
            "nsstuck_worker_cpu_seconds_total",
            "CPU time the worker processes spent on their jobs, by kind (relayed from the workers)",
            ["kind"],
            registry=self.registry,
        )
        # every metric by the name it is declared with, for the counts relayed by name
        self._by_name: dict[str, Any] = {
            metric._name + ("_total" if isinstance(metric, Counter) else ""): metric
            for metric in (
                self.build_info, self.commands, self.diagnoses, self.diagnosis_seconds, self.commands_refused,
                self.diagnoses_shared, self.posts, self.socket_connected, self.kube_requests, self.kube_request_seconds,
                self.remediations, self.verifications, self.watch_rounds, self.job_last_success, self.worker_jobs,
                self.workers_replaced, self.workers_alive, self.worker_cpu,
            )
        }  # fmt: skip
        self._unknown: set[str] = set()

    def call_observed(self, cluster: str, outcome: CallOutcome, seconds: float) -> None:
        """A CallObserver (bot.kube.observing): every request to a cluster this process makes, counted and
        timed (a worker process counts its own on its relay, the same way)."""
        count_call(self, cluster, outcome, seconds)

    def job_succeeded(self, job: str) -> None:
        self.job_last_success.labels(scheduled_job=job).set(time.time())

    # -- counting by name (bot.services.relaying.Counting), here and relayed from the workers --

    def inc(self, name: str, labels: Mapping[str, str] | None = None, amount: float = 1.0) -> None:
        metric = self._metric(name)
        if metric is not None:
            (metric.labels(**labels) if labels else metric).inc(amount)

    def observe(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        metric = self._metric(name)
        if metric is not None:
            (metric.labels(**labels) if labels else metric).observe(value)

    def apply(self, relayed: Relayed) -> None:
        """Add what a worker process counted (its answer to a job carried it)."""
        counts, observed = relayed
        for name, labels, amount in counts:
            self.inc(name, dict(labels), amount)
        for name, labels, values in observed:
            for value in values:
                self.observe(name, value, dict(labels))

    def _metric(self, name: str) -> Any:
        metric = self._by_name.get(name)
        if metric is None and name not in self._unknown:
            self._unknown.add(name)  # said once: a metric counted in a worker but not declared here
            log.warning("a count for the undeclared metric %s was dropped", name)
        return metric

    def render(self) -> bytes:
        """The registry in the text format that CONTENT_TYPE names."""
        return _ENCODE(self.registry)


class StoreMetrics(Collector):
    """The metrics computed from the database at each scrape, the same on every replica."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Callable[[], datetime],
        registered: Callable[[str], bool],
        watched: Sequence[str],
    ) -> None:
        """`clock`: how long a namespace has been Terminating is measured against it. `registered`:
        incidents of clusters no longer in the config are left out (nothing follows them any more).
        `watched`: the clusters whose reachability the watch keeps."""
        self.db = db
        self.clock = clock
        self.registered = registered
        self.watched = tuple(watched)

    def describe(self) -> Iterable[Metric]:
        return []  # nothing to check at registration, and no query then

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "nsstuck_database_up", "1 when the metrics computed from the database could be read at this scrape"
        )
        try:
            families = self._families()
        except NsstuckError as e:  # the database is down: the scrape still answers, without these
            log.warning("metrics from the database are missing from this scrape: %s", e)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *families]

    def _families(self) -> list[Metric]:
        now = self.clock()
        with self.db.unit_of_work() as uow:
            incidents = [i for i in uow.incidents.open_incidents() if self.registered(i.cluster)]
            reports = uow.diagnoses.backlog(max_attempts=MAX_POST_ATTEMPTS)
            digests = uow.digests.backlog(max_attempts=MAX_DIGEST_ATTEMPTS)
            states = {c.cluster: c for c in uow.watch.clusters()}
        terminating = GaugeMetricFamily(
            "nsstuck_namespace_terminating_seconds",
            "How long each namespace with an open incident has been Terminating, by cluster, namespace and cause",
            labels=["cluster", "namespace", "cause"],
        )
        stuck = GaugeMetricFamily(
            "nsstuck_stuck_namespaces",
            "Namespaces with an open incident (Terminating, diagnosed and not yet gone), by cluster and cause",
            labels=["cluster", "cause"],
        )
        counts: dict[tuple[str, str], int] = {}
        for incident in incidents:
            cause = incident.cause or "none"
            since = incident.terminating_since or incident.first_seen_at
            seconds = max(0.0, (now - since).total_seconds())
            terminating.add_metric([incident.cluster, incident.namespace, cause], seconds)
            counts[(incident.cluster, cause)] = counts.get((incident.cluster, cause), 0) + 1
        for (cluster, cause), count in sorted(counts.items()):
            stuck.add_metric([cluster, cause], count)
        backlog = GaugeMetricFamily(
            "nsstuck_outbox_backlog",
            "Reports and digests recorded but not posted to Slack yet, still being retried, by kind",
            labels=["kind"],
        )
        oldest = GaugeMetricFamily(
            "nsstuck_outbox_oldest_seconds",
            "Age of the oldest report or digest waiting to be posted (0 when none waits), by kind",
            labels=["kind"],
        )
        for kind, (count, first) in (("reports", reports), ("digests", digests)):
            backlog.add_metric([kind], count)
            # the rows' times are the wall clock's (the database's own), not `clock`
            oldest.add_metric([kind], max(0.0, (datetime.now(UTC) - first).total_seconds()) if first else 0.0)
        reachable = GaugeMetricFamily(
            "nsstuck_watched_cluster_reachable",
            "1 when the watch's last round reached the cluster, 0 when it did not (watched clusters only)",
            labels=["cluster"],
        )
        for cluster in self.watched:
            state = states.get(cluster)
            if state is not None:
                reachable.add_metric([cluster], 1 if state.reachable else 0)
        return [terminating, stuck, backlog, oldest, reachable]
