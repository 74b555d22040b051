"""Prometheus metrics of the bot, in a registry of its own (no global state): counted by the use cases
and the doors alike, served by `/metrics`; what worker processes count reaches it relayed
(`bot.services.relaying`: `inc`, `observe` and `apply` here)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.services.relaying import Relayed

log = logging.getLogger(__name__)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.commands = Counter(
            "nsstuck_slash_commands_total", "Slash commands received, by kind", ["kind"], registry=self.registry
        )
        self.diagnoses = Counter(
            "nsstuck_diagnoses_total", "Diagnoses run, by namespace state and cause", ["state", "cause"],
            registry=self.registry,
        )  # fmt: skip
        self.diagnosis_seconds = Histogram(
            "nsstuck_diagnosis_seconds", "Time to collect and diagnose a namespace", registry=self.registry,
            buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 60),
        )  # fmt: skip
        self.commands_refused = Counter(
            "nsstuck_slash_commands_refused_total",
            "Slash commands refused before any work, by reason (user_rate, channel_rate, queue_full)",
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

        self.worker_jobs = Counter(
            "nsstuck_worker_jobs_total",
            "Jobs of the worker processes (diagnoses, re-checks), by kind and outcome: done, error (an error "
            "the asker is told, such as an unreachable cluster), died (the worker died during it), hung "
            "(stopped past its deadline)",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.workers_replaced = Counter(
            "nsstuck_workers_replaced_total",
            "Worker processes replaced, by why: died (exited or killed during a job, or between jobs), hung, "
            "memory (holding more than NSSTUCK_WORKER_MAX_RSS_MB after a job)",
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
                self.commands, self.diagnoses, self.diagnosis_seconds, self.commands_refused, self.diagnoses_shared,
                self.posts, self.socket_connected, self.worker_jobs, self.workers_replaced, self.workers_alive,
                self.worker_cpu,
            )
        }  # fmt: skip
        self._unknown: set[str] = set()

    def render(self) -> bytes:
        return generate_latest(self.registry)

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
