"""What the use cases tell people, as protocols: a door that can speak (Slack) implements them.

A use case says *what* happened (an incident resolved, a request expired, a run to publish); the
implementation decides how it reads, in which thread, paced how, and keeps what it could not say yet.
No use case renders a message: Slack's mrkdwn, emoji and links live in `bot.slack`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.remediation.executing import Outcome
from bot.remediation.requests import RequestView
from bot.services.digesting import Digest
from bot.services.recording import PendingPost
from bot.store.audit import Appended


@dataclass(frozen=True)
class Thread:
    """A Slack thread an incident or a request lives in."""

    channel: str
    ts: str


class IncidentNotifier(Protocol):
    """The follow-up of open incidents tells their threads what changed."""

    def incident_resolved(self, thread: Thread, *, namespace: str, after_seconds: int) -> None: ...

    def cause_changed(self, thread: Thread, *, before: str | None, after: str | None, summary: str) -> None: ...


class RunAttempt(Protocol):
    """One attempt at publishing a recorded diagnosis run (`RunPublisher.attempt`)."""

    def verdict(self, thread_ts: str | None) -> str | None:
        """Post the verdict (in `thread_ts`, or as a new message) and wait for it; its ts (None when the
        answer had none)."""
        ...

    def report(self, thread_ts: str, *, remediable: bool) -> Callable[[], None]:
        """Queue the report in the thread (with Request buttons when `remediable`); returns a wait
        that raises when a part could not be posted."""
        ...

    def failed(self) -> None:
        """The attempt failed: remember what of it may still land, for the next attempt."""
        ...

    def posted(self) -> None: ...


class RunPublisher(Protocol):
    """Publishes recorded diagnosis runs (the outbox), and retries whatever else it kept."""

    def attempt(self, run: PendingPost) -> RunAttempt: ...

    def retry_kept(self) -> int:
        """Say again what could not be said earlier (notes, request messages); how many went out."""
        ...


class RemediationNotifier(Protocol):
    """Remediation requests are shown, and what becomes of them said, in their threads."""

    def request_filed(self, view: RequestView, *, thread_ts: str | None, posted: Callable[[str], None]) -> None:
        """Post the request's message in its channel (`thread_ts`); `posted(ts)` once it is posted,
        which may be later when Slack is down."""
        ...

    def request_changed(self, view: RequestView) -> None:
        """Redraw the request's message as the request stands now."""
        ...

    # Each message about how a request ended quotes the audit entry that recorded it (its seq and
    # hash): a copy of the chain's hash kept outside the database, for `audit verify --expect-head`.

    def request_rejected(self, view: RequestView, *, by: str, entry: Appended) -> None: ...

    def vote_dropped(self, view: RequestView, *, voter: str, reason: str, entry: Appended) -> None:
        """An earlier approval no longer counted when the quorum was judged (`view`: the request after)."""
        ...

    def request_expired(self, view: RequestView, *, entry: Appended) -> None: ...

    def outcome(self, outcome: Outcome) -> None:
        """An execution ended (applied, failed, stale), by its executor or by reconciliation."""
        ...

    def verified(self, outcome: Outcome) -> None:
        """How the namespace fared after an applied change."""
        ...


class DigestPublisher(Protocol):
    """Posts a built digest; its first message's ts, or None when nothing was posted."""

    def post_digest(self, digest: Digest) -> str | None: ...


class ClusterNotifier(Protocol):
    """The watch tells a watched cluster's channel when the cluster stops answering, and when it is back
    (once each, not every round)."""

    def cluster_unreachable(self, channel: str, *, cluster: str, reason: str) -> None: ...

    def cluster_back(self, channel: str, *, cluster: str, after_seconds: int) -> None: ...


class ClockNotifier(IncidentNotifier, ClusterNotifier, DigestPublisher, Protocol):
    """What the scheduled jobs tell people: follow-ups in incident threads, digests, and the watch's
    word on its clusters (its verdicts go through the outbox)."""
