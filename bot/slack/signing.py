"""Who may talk to the bot over HTTP: requests that Slack signed, recently, and that were not seen before.

Bolt checks the signature and the five-minute window, and nothing else: the same signed request,
sent again within the window, runs again (tests/slack_emulator/test_bolt_http.py). So every request
is checked here first, and the signature of each one let in is recorded in the database, shared by
every replica, until it is too old to be accepted anyway. A second request with a signature on record
is a replay and is refused.

Slack's own repeats are not replays. Commands and clicks are never retried, and a second click is
a new payload (its own action_ts and trigger_id). A retried Events API delivery (X-Slack-Retry-Num)
is a new request signed when it is sent: the last retry comes about five minutes after the first
try, where the first timestamp would already be refused as stale, so it carries its own timestamp
and passes. Should a byte-identical retry come all the same, it is a duplicate of a delivery that
was let in already: the door answers it 200 with X-Slack-No-Retry, and it does nothing.

While the database is unavailable (a restart, a fail-over), each replica's own memory of the
signatures it let in decides, so that commands keep working; a replay sent to another replica in
that time is not caught.

The signature and the window are checked by slack_sdk's `SignatureVerifier` (the one Bolt uses), on
what Slack sends and nothing else: the headers are first held to their form here, since the verifier
takes any timestamp `int()` reads (" 1", "+1", "1_0", digits of other scripts), raises on a signature
past ASCII (`hmac.compare_digest` of two strings) and on a body that is not UTF-8 (it signs the decoded
text). Such a body is refused: Bolt, which checks the signature again, could never let it in (it reads
the body decoded with replacement characters).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.signature import Clock, SignatureVerifier

from bot.errors import StoreError, StoreUnavailableError
from bot.store.database import Database

log = logging.getLogger(__name__)

# at most this many signatures remembered in memory before the expired ones are dropped
_HERE_LIMIT = 100_000

WINDOW_SECONDS = 300  # Slack's tolerance for X-Slack-Request-Timestamp, both ways (SignatureVerifier's)
PRUNE_SECONDS = 60  # how often a process forgets the signatures that are past the window
_MARGIN_SECONDS = 60  # kept a little past the window, for clocks that disagree a little


class Verdict(enum.Enum):
    ACCEPTED = "accepted"
    INVALID = "invalid"  # unsigned, badly signed, stale or from the future
    REPLAYED = "replayed"  # signed and fresh, but this very request was let in before


def signature_of(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: `v0=` and HMAC-SHA256 of `v0:<timestamp>:<raw body>` (a UTF-8 body)."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signature is not None  # None only without a timestamp
    return signature


class _Clock(Clock):
    """slack_sdk's clock (an object with now()) reading ours."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


@dataclass
class _Sighting:
    """A request waiting for its signature to be recorded; `first` is decided once `done`."""

    signature: str
    signed_at: int
    first: bool = False
    done: bool = False  # set with `first`, under the gate's condition


class RequestGate:
    """Checks a raw request's signature and freshness, then records it so that it is let in once.

    The signatures of requests that arrive together are recorded together, in one transaction (a
    group commit): the first to come writes, the others wait for that write and go in the next one,
    all of theirs at once. Fifty commands at the same moment made fifty commits one after the other
    (SQLite has one writer), the last waiting some 60 ms for its turn; now a few. No request is let in
    before its record is committed."""

    def __init__(self, signing_secret: str, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._verifier = SignatureVerifier(signing_secret, clock=_Clock(clock))
        self._db = db
        self._clock = clock
        self._next_prune = 0.0
        self._prune_lock = threading.Lock()
        self._here: dict[str, int] = {}
        self._here_pruned = 0.0
        self._turn = threading.Condition()
        self._queued: list[_Sighting] = []
        self._writing = False

    def check(self, body: bytes, timestamp: str | None, signature: str | None) -> Verdict:
        if not timestamp or not signature or len(timestamp) > 12 or not (timestamp.isascii() and timestamp.isdigit()):
            return Verdict.INVALID
        if not signature.isascii():  # never a signature; the verifier would raise on it
            return Verdict.INVALID
        try:
            valid = self._verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
        except UnicodeDecodeError:  # a body that is not UTF-8, which Slack never sends
            return Verdict.INVALID
        if not valid:  # badly signed, or out of the window
            return Verdict.INVALID
        now = self._clock()
        return Verdict.ACCEPTED if self._first_sighting(signature, int(timestamp), now) else Verdict.REPLAYED

    def _first_sighting(self, signature: str, signed_at: int, now: float) -> bool:
        mine = _Sighting(signature, signed_at)
        with self._turn:
            self._queued.append(mine)
            while self._writing and not mine.done:
                self._turn.wait()
            if mine.done:  # written by the one whose turn it was
                return mine.first
            self._writing = True
            batch, self._queued = self._queued, []
        firsts: list[bool] | None = None
        try:
            firsts = self._record(batch, now)
        finally:
            with self._turn:
                for k, sighting in enumerate(batch):  # no firsts: recording raised what it does not catch
                    sighting.first = (
                        firsts[k]
                        if firsts is not None
                        else self._first_here(sighting.signature, sighting.signed_at, now)
                    )
                    sighting.done = True
                self._writing = False
                self._turn.notify_all()
        return mine.first

    def _record(self, batch: list[_Sighting], now: float) -> list[bool]:
        """Whether each is the first sighting of its signature, recorded in one transaction."""
        try:
            with self._db.unit_of_work() as uow:
                if self._prune_due(now):
                    uow.seen_requests.prune(int(now) - WINDOW_SECONDS - _MARGIN_SECONDS)
                firsts = uow.seen_requests.first_sightings([(s.signature, s.signed_at) for s in batch])
        except (StoreUnavailableError, StoreError) as e:  # the database is down or restarting, or refuses:
            # this process's own record decides
            log.warning(
                "cannot record %d request signature(s) (%s); checked by this replica only",
                len(batch),
                type(e.__cause__ or e).__name__,
            )
            return [self._first_here(s.signature, s.signed_at, now) for s in batch]
        for s in batch:
            self._first_here(s.signature, s.signed_at, now)
        return firsts

    def _first_here(self, signature: str, signed_at: int, now: float) -> bool:
        """This process's record of the signatures let in within the window: what stands between a replay
        and the bot while the database is unavailable (commands keep working through a restart of it)."""
        with self._prune_lock:
            if len(self._here) > _HERE_LIMIT or now >= self._here_pruned + PRUNE_SECONDS:
                cutoff = now - WINDOW_SECONDS - _MARGIN_SECONDS
                self._here = {k: v for k, v in self._here.items() if v >= cutoff}
                self._here_pruned = now
            if signature in self._here:
                return False
            self._here[signature] = signed_at
            return True

    def _prune_due(self, now: float) -> bool:
        with self._prune_lock:
            if now < self._next_prune:
                return False
            self._next_prune = now + PRUNE_SECONDS
            return True
