"""What the transport tells about each call it makes to an API server: which cluster, how it ended,
how long it took. An observer is handed in (to the cluster registry, which gives it to the connections
it makes, or to a Transport directly), never reached through a module global: a process that diagnoses
on behalf of another (a worker process) hands in one that relays what it observes to its parent.

The outcomes are a short fixed list, so that a metric labelled with them stays small.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol


class CallOutcome(StrEnum):
    """How one request to an API server ended (one attempt: a retried GET is two calls)."""

    SUCCESS = "success"  # a 2xx answer
    CLIENT_ERROR = "client_error"  # a 4xx other than those below (a 404 of a type the cluster lacks...)
    UNAUTHORIZED = "unauthorized"  # 401 or 403: our credentials or our role
    THROTTLED = "throttled"  # 429
    SERVER_ERROR = "server_error"  # a 5xx, or a 2xx whose body was not what an API server sends
    TIMEOUT = "timeout"  # no answer in time
    CONNECTION_ERROR = "connection_error"  # no connection, TLS failed, or it was dropped


def status_outcome(status: int | None) -> CallOutcome:
    """The outcome of an answer with this HTTP status."""
    if status is None or status == 0:
        return CallOutcome.CONNECTION_ERROR
    if 200 <= status < 300:
        # a 2xx reported as a failure: its body could not be read
        return CallOutcome.SERVER_ERROR
    if status in (401, 403):
        return CallOutcome.UNAUTHORIZED
    if status == 429:
        return CallOutcome.THROTTLED
    if 400 <= status < 500:
        return CallOutcome.CLIENT_ERROR
    return CallOutcome.SERVER_ERROR


class CallObserver(Protocol):
    """Told of every call a Transport makes (from the thread that made it: it must be thread-safe and
    quick)."""

    def call_observed(self, cluster: str, outcome: CallOutcome, seconds: float) -> None: ...
