"""Counting where the work runs, and relaying the counts to the registry `/metrics` serves.

A diagnosis of `nsstuck serve` runs in a worker process (`bot.services.supervising`), whose counters
would be lost in a registry of its own. Whatever counts there counts through the `Counting` protocol:
in a worker, on a `Relay`, which keeps the increments and observations until the worker's answer to
its job carries them to the bot (`Relay.drain`); in the bot, the same calls go to `Metrics` directly,
and `Metrics.apply` adds what a worker relayed. So a counter such as the per-cluster API requests a
transport observer counts is written once, against `Counting`, and reaches `/metrics` from either
process: its metric is declared in `Metrics` (by name) and counted with `inc` or `observe`.

This module imports nothing heavy: a worker process imports it without the Prometheus client.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from bot.kube.observing import CallOutcome

Labels = tuple[tuple[str, str], ...]
# what a worker relays: counter increments by (name, labels), and histogram observations by (name, labels)
Relayed = tuple[tuple[tuple[str, Labels, float], ...], tuple[tuple[str, Labels, tuple[float, ...]], ...]]

NOTHING: Relayed = ((), ())


class Counting(Protocol):
    """Where counts go: a metric declared in `Metrics`, by its name (with `_total` for a counter)."""

    def inc(self, name: str, labels: Mapping[str, str] | None = None, amount: float = 1.0) -> None: ...

    def observe(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None: ...


def count_call(counting: Counting, cluster: str, outcome: CallOutcome, seconds: float) -> None:
    """One request to a cluster's API server (a `CallObserver`'s call), counted and timed."""
    labels = {"cluster": cluster, "outcome": outcome.value}
    counting.inc("nsstuck_kube_requests_total", labels)
    counting.observe("nsstuck_kube_request_duration_seconds", seconds, labels)


class RelayedCalls:
    """A `CallObserver` for a worker process: its calls counted on its relay, for the bot's `/metrics`."""

    def __init__(self, counting: Counting) -> None:
        self.counting = counting

    def call_observed(self, cluster: str, outcome: CallOutcome, seconds: float) -> None:
        count_call(self.counting, cluster, outcome, seconds)


def _key(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


class Relay:
    """The counts of a worker process, kept until its next answer carries them (thread-safe: a
    collection counts from its pool's threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, Labels], float] = {}
        self._observed: dict[tuple[str, Labels], list[float]] = {}

    def inc(self, name: str, labels: Mapping[str, str] | None = None, amount: float = 1.0) -> None:
        key = (name, _key(labels))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0.0) + amount

    def observe(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        key = (name, _key(labels))
        with self._lock:
            self._observed.setdefault(key, []).append(value)

    def drain(self) -> Relayed:
        """Everything counted since the last drain, which starts afresh."""
        with self._lock:
            counts, self._counts = self._counts, {}
            observed, self._observed = self._observed, {}
        return (
            tuple((name, labels, amount) for (name, labels), amount in counts.items()),
            tuple((name, labels, tuple(values)) for (name, labels), values in observed.items()),
        )


# the worker process's relay (one per process: a worker runs one job at a time, so what is counted
# between two drains belongs to the job it answers)
RELAY = Relay()
