"""Prometheus metrics of the bot, in a registry of its own (no global state): counted by the use cases
and the doors alike, served by `/metrics`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


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

    def render(self) -> bytes:
        return generate_latest(self.registry)
