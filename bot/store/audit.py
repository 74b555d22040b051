"""The audit trail: an append-only chain of entries, each hashed together with the one before it.

Appending locks the single `audit_head` row first (an UPDATE), so entries from concurrent
transactions, threads and replicas are written strictly one after the other; the entry commits or
rolls back together with the state change it records, in the caller's unit of work.

Reading (`records`, `verify`) pages through the chain by seq, a page per statement, so that a chain
of any length is checked and exported in constant memory. Verification walks the entries from
GENESIS up to the head as it was when the walk began (entries appended meanwhile are left for the
next run) and reports each break where it happened:

- an entry whose stored content no longer hashes to its stored hash: "entry N was changed";
- a gap in seq: "entry N is missing";
- an entry that hashes correctly only under another seq, found by following its prev_hash back to
  the entry it was written after: "entry N is out of order: it was written as entry M";
- an intact entry whose prev_hash is not the hash of the entry before it (that entry was rewritten
  with a recomputed hash, or the entry it was chained after now sits elsewhere);
- a head row (`audit_head`) that the last entry does not match: a removed tail ("the last K entries
  are missing"), an edited head, or entries that lie beyond the head.

The hash is not keyed: someone who can rewrite the tables can remove the last entries and move the
head back, or rewrite the whole chain and the head, consistently, and the chain alone then looks
intact. What they cannot do is make it agree with a hash kept outside the database (a remediation's
outcome message in its Slack thread names its entry's seq and hash; `nsstuck audit export` carries
the head): `verify(expect=...)` checks that the chain still holds an entry with that hash (a prefix
will do) and is intact up to it. The check rides on the same walk, in constant memory.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bot.store.models import AuditEntry, AuditHead, utcnow

GENESIS = "0" * 64
# the digits of a hash that messages show, and the fewest `verify(expect=...)` is given by the CLI
SHORT_HASH = 12
SYSTEM_ACTOR = "nsstuck"

# entries read per statement when walking or exporting the chain
PAGE_SIZE = 500
# problems a verification keeps in detail (it counts them all); a wholesale rewrite would otherwise
# produce one line, and one record in memory, per entry of the chain
MAX_PROBLEMS = 1000

# The events of the trail (the list, plus the start of an execution and a reconciliation).
EVENTS = (
    "requested",
    "approved",
    "refused",
    "vote_dropped",  # an approval that no longer counted when the quorum was judged (issue 36)
    "rejected",
    "expired",
    "stale",
    "backed_up",
    "dry_run",
    "execution_started",
    "applied",
    "failed",
    "reconciled",
    "verified",
    # the namespace-delete webhook in `nsstuck serve` (issue 38): a refused delete, and a delete let
    # through although the prediction was certain (warn mode, or the delete-anyway annotation)
    "admission_denied",
    "admission_allowed",
)


def canonical_time(at: datetime) -> str:
    """Microsecond UTC ISO time: what both databases give back for what we stored."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_hash(
    *,
    seq: int,
    at: datetime,
    event: str,
    actor: str,
    cluster: str | None,
    namespace: str | None,
    request_id: int | None,
    objects: Sequence[Any],
    details: dict[str, Any],
    prev_hash: str,
) -> str:
    document = {
        "seq": seq,
        "at": canonical_time(at),
        "event": event,
        "actor": actor,
        "cluster": cluster,
        "namespace": namespace,
        "request_id": request_id,
        "objects": list(objects),
        "details": details,
        "prev_hash": prev_hash,
    }
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


def hash_of(entry: AuditEntry) -> str:
    """The hash an entry's stored content amounts to (compare with `entry.hash`)."""
    return entry_hash(
        seq=entry.seq,
        at=entry.at,
        event=entry.event,
        actor=entry.actor,
        cluster=entry.cluster,
        namespace=entry.namespace,
        request_id=entry.request_id,
        objects=entry.objects,
        details=entry.details,
        prev_hash=entry.prev_hash,
    )


def _plain(value: Any) -> Any:
    """JSON-safe (and JSON-stable) copy of a value: what the database will give back."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@dataclass(frozen=True)
class Appended:
    """The entry an `append` wrote: what a message about it quotes (`short` is its hash's first 12 digits)."""

    seq: int
    hash: str

    @property
    def short(self) -> str:
        return self.hash[:SHORT_HASH]


class AuditLog:
    """Appends to and reads the chain inside the caller's session (never commits)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def append(
        self,
        event: str,
        *,
        actor: str,
        cluster: str | None = None,
        namespace: str | None = None,
        request_id: int | None = None,
        objects: Iterable[dict[str, Any]] = (),
        details: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> Appended:
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        # the UPDATE takes the row lock (PostgreSQL) or the write lock (SQLite) before we read the head
        self._session.execute(update(AuditHead).where(AuditHead.id == 1).values(seq=AuditHead.seq + 1))
        head = self._session.execute(select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == 1)).one()
        seq, prev_hash = int(head.seq), str(head.hash)
        when = (at or utcnow()).astimezone(UTC)
        plain_objects = _plain(list(objects))
        plain_details = _plain(details or {})
        entry = AuditEntry(
            seq=seq,
            at=when,
            event=event,
            actor=actor,
            cluster=cluster,
            namespace=namespace,
            request_id=request_id,
            objects=plain_objects,
            details=plain_details,
            prev_hash=prev_hash,
        )
        digest = entry.hash = hash_of(entry)  # the same function verify uses on the stored row
        self._session.add(entry)
        self._session.execute(update(AuditHead).where(AuditHead.id == 1).values(hash=digest))
        self._session.flush()
        return Appended(seq, digest)

    def dropped_votes(self, request_id: int) -> frozenset[str]:
        """The people whose approval of this request was dropped from its count (`vote_dropped`)."""
        query = select(AuditEntry.details).where(
            AuditEntry.request_id == request_id, AuditEntry.event == "vote_dropped"
        )
        return frozenset(str(details.get("voter")) for details in self._session.scalars(query))

    def for_request(self, request_id: int) -> list[AuditRecord]:
        """The entries of one remediation request, in seq order."""
        return list(self.records(request_id=request_id))

    def head(self) -> tuple[int, str]:
        row = self._session.execute(select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == 1)).one()
        return int(row.seq), str(row.hash)

    def find_head(self) -> tuple[int, str] | None:
        """The head row, or None when it is gone (which only tampering does)."""
        row = self._session.execute(select(AuditHead.seq, AuditHead.hash).where(AuditHead.id == 1)).one_or_none()
        return None if row is None else (int(row.seq), str(row.hash))

    def records(
        self,
        *,
        through: int | None = None,
        since: datetime | None = None,
        request_id: int | None = None,
        event: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[AuditRecord]:
        """The entries in seq order, read a page at a time (keyset on seq, one statement per page).

        `through` stops at that seq (inclusive); `since` keeps entries at or after that time;
        `request_id` keeps the entries of one remediation request, `event` those of one event. Keep
        the session open while iterating.
        """
        if page_size < 1:
            raise ValueError("page_size must be positive")
        if since is not None and since.tzinfo is None:
            raise ValueError("since must be timezone-aware")
        after: int | None = None
        while True:
            query = select(*_RECORD_COLUMNS).order_by(AuditEntry.seq).limit(page_size)
            if after is not None:
                query = query.where(AuditEntry.seq > after)
            if through is not None:
                query = query.where(AuditEntry.seq <= through)
            if since is not None:
                query = query.where(AuditEntry.at >= since)
            if request_id is not None:
                query = query.where(AuditEntry.request_id == request_id)
            if event is not None:
                query = query.where(AuditEntry.event == event)
            rows = self._session.execute(query).all()
            for row in rows:
                yield AuditRecord(
                    seq=int(row.seq),
                    at=row.at,
                    event=row.event,
                    actor=row.actor,
                    cluster=row.cluster,
                    namespace=row.namespace,
                    request_id=None if row.request_id is None else int(row.request_id),
                    objects=list(row.objects),
                    details=dict(row.details),
                    prev_hash=row.prev_hash,
                    hash=row.hash,
                )
            if len(rows) < page_size:
                return
            after = int(rows[-1].seq)

    def _hashes(self, page_size: int) -> Iterator[tuple[int, str]]:
        """(seq, hash) of every entry, in seq order, a page at a time."""
        after: int | None = None
        while True:
            query = select(AuditEntry.seq, AuditEntry.hash).order_by(AuditEntry.seq).limit(page_size)
            if after is not None:
                query = query.where(AuditEntry.seq > after)
            rows = self._session.execute(query).all()
            for row in rows:
                yield int(row.seq), str(row.hash)
            if len(rows) < page_size:
                return
            after = int(rows[-1].seq)

    def _beyond(self, seq: int) -> tuple[int, int | None, int | None]:
        """How many entries lie after `seq`, and the first and last of them."""
        row = self._session.execute(
            select(func.count(), func.min(AuditEntry.seq), func.max(AuditEntry.seq)).where(AuditEntry.seq > seq)
        ).one()
        count, low, high = row
        return int(count), None if low is None else int(low), None if high is None else int(high)

    def verify(
        self, *, page_size: int = PAGE_SIZE, max_problems: int = MAX_PROBLEMS, expect: str | None = None
    ) -> ChainReport:
        """Walk the chain from GENESIS to the head and report every break (see the module docstring).

        `expect` (lower-case hex, a whole hash or a prefix of one) is a hash kept elsewhere: the chain
        must hold an entry whose hash starts with it, and be unbroken up to it; otherwise that is one
        more problem. When several entries match a prefix, it counts as found, and the last of them
        is the one the chain must be unbroken up to.
        """
        head = self.find_head()
        through = None if head is None else head[0]
        problems = _Problems(max_problems)
        suspects: dict[int, _Suspect] = {}
        prev_seq, prev_hash, prev_sound = 0, GENESIS, True
        last: AuditRecord | None = None
        walked = 0
        matched: _Matches | None = None if expect is None else _Matches(expect)
        for record in self.records(through=through, page_size=page_size):
            if record.seq < 1:
                problems.add(record.seq, f"entry {record.seq} is not part of the chain (its seq is below 1)")
                continue
            walked += 1
            if matched is not None:
                matched.see(record)
            sound = record.recomputed_hash() == record.hash
            gap = record.seq > prev_seq + 1
            if gap:
                problems.add(prev_seq + 1, _missing(prev_seq + 1, record.seq - 1))
            # after a gap the link cannot hold, and after a changed entry its break is that entry's problem
            broken_link = record.prev_hash != prev_hash and not gap and prev_sound
            if not sound or broken_link:
                if len(suspects) < max_problems:
                    suspects[record.seq] = _Suspect(record, sound)
                else:
                    problems.add(record.seq, f"entry {record.seq} was changed or does not link to entry {prev_seq}")
            prev_seq, prev_hash, prev_sound, last = record.seq, record.hash, sound, record
        for seq, text in _explain(suspects, self._locate({s.record.prev_hash for s in suspects.values()}, page_size)):
            problems.add(seq, text)

        tail: list[str] = []
        # where the tail's problems are, for an expected entry (a missing head row: after everything)
        tail_first: int | None = None
        if head is None:
            tail.append("the head row (audit_head) is missing")
        else:
            head_seq, head_hash = head
            if prev_seq < head_seq:
                tail_first = prev_seq + 1
                if head_seq - prev_seq == 1:
                    tail.append(f"the last entry is missing ({head_seq}): the head says the chain ends there")
                else:
                    tail.append(
                        f"the last {head_seq - prev_seq} entries are missing ({prev_seq + 1}-{head_seq}): "
                        f"the head says the chain ends at entry {head_seq}"
                    )
            elif (last.hash if last is not None else GENESIS) != head_hash:
                tail_first = head_seq
                tail.append(
                    f"the head row does not match entry {head_seq} (head hash {head_hash[:12]}, entry hash "
                    f"{(last.hash if last is not None else GENESIS)[:12]}): one of them was changed"
                )
            count, low, high = self._beyond(head_seq)
            if count and high is not None:
                now = self.find_head()
                if now is None or now[0] < high:  # not entries appended while we walked
                    where = f"seq {low}" if low == high else f"seq {low}-{high}"
                    tail_first = tail_first if tail_first is not None else low
                    tail.append(
                        f"{count} {'entry lies' if count == 1 else 'entries lie'} beyond the head ({where}, "
                        f"the head says {head_seq}): the head row was changed, or entries were added behind its back"
                    )
        expected: Expected | None = None
        if matched is not None:
            first_break = min((s for s in (problems.lowest, tail_first) if s is not None), default=None)
            expected = matched.result(first_break=first_break)
            if expected.problem is not None:
                tail.append(expected.problem)
        return ChainReport(
            entries=walked,
            head=head,
            problems=(*problems.sorted(), *tail),
            problem_count=problems.count + len(tail),
            expected=expected,
        )

    def _locate(self, hashes: set[str], page_size: int) -> dict[str, int]:
        """Where (seq) the entries with these hashes are now; one pass, only when something is wrong."""
        wanted = hashes - {GENESIS}
        found: dict[str, int] = {}
        if not wanted:
            return found
        for seq, digest in self._hashes(page_size):
            if digest in wanted and digest not in found:
                found[digest] = seq
        return found


_RECORD_COLUMNS = (
    AuditEntry.seq,
    AuditEntry.at,
    AuditEntry.event,
    AuditEntry.actor,
    AuditEntry.cluster,
    AuditEntry.namespace,
    AuditEntry.request_id,
    AuditEntry.objects,
    AuditEntry.details,
    AuditEntry.prev_hash,
    AuditEntry.hash,
)


@dataclass(frozen=True)
class AuditRecord:
    """One entry as stored, detached from the session (plain values, usable after it closes)."""

    seq: int
    at: datetime
    event: str
    actor: str
    cluster: str | None
    namespace: str | None
    request_id: int | None
    objects: list[Any]
    details: dict[str, Any]
    prev_hash: str
    hash: str

    def recomputed_hash(self, *, seq: int | None = None) -> str:
        """The hash of the stored content (under another seq, to recognise an entry that was moved)."""
        return entry_hash(
            seq=self.seq if seq is None else seq,
            at=self.at,
            event=self.event,
            actor=self.actor,
            cluster=self.cluster,
            namespace=self.namespace,
            request_id=self.request_id,
            objects=self.objects,
            details=self.details,
            prev_hash=self.prev_hash,
        )

    def to_json(self) -> dict[str, Any]:
        """The exported form; `at` is the canonical time, so the hash can be recomputed from it."""
        return {
            "seq": self.seq,
            "at": canonical_time(self.at),
            "event": self.event,
            "actor": self.actor,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "request_id": self.request_id,
            "objects": self.objects,
            "details": self.details,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class ChainReport:
    """The outcome of `AuditLog.verify`: `problems` holds at most `max_problems` lines plus the head's."""

    entries: int
    head: tuple[int, str] | None
    problems: tuple[str, ...]
    problem_count: int
    expected: Expected | None = None  # what became of `verify(expect=...)`; its problem is counted above

    @property
    def intact(self) -> bool:
        return self.problem_count == 0


@dataclass(frozen=True)
class Expected:
    """An expected hash (or prefix) looked for along the chain."""

    prefix: str
    seq: int | None  # the entry that has it (the last one, when a prefix matches several); None: none
    hash: str | None
    matches: int  # how many entries of the chain have a hash starting with `prefix`
    first_match: int | None  # the first of them
    first_break: int | None  # the seq of the chain's first problem, if any

    @property
    def reached(self) -> bool:
        """Found, and nothing wrong up to it (the chain may still be broken after it)."""
        return self.seq is not None and (self.first_break is None or self.first_break > self.seq)

    @property
    def shown(self) -> str:
        return self.prefix[:SHORT_HASH]

    @property
    def problem(self) -> str | None:
        """The problem to report, or None when the chain reaches the entry unbroken."""
        if self.seq is None:
            return (
                f"no entry of the chain has the expected hash {self.shown}: entries were removed from its end "
                "(and the head moved back) or the chain was rewritten, or the hash is not from this trail"
            )
        if not self.reached:
            return (
                f"the chain is broken at or before the expected entry {self.seq} ({self.shown}): its first "
                f"problem is at entry {self.first_break}"
            )
        return None

    @property
    def several(self) -> str:
        """How many entries a prefix matches, when more than one ("" otherwise)."""
        if self.matches < 2:
            return ""
        return (
            f" (its prefix matches {self.matches} entries, from entry {self.first_match}; more digits tell them apart)"
        )


@dataclass
class _Matches:
    """The entries of a walk whose hash starts with a prefix: counted, the first and the last kept."""

    prefix: str
    count: int = 0
    first: int | None = None
    last: AuditRecord | None = None

    def see(self, record: AuditRecord) -> None:
        if record.hash.lower().startswith(self.prefix):
            self.count += 1
            self.first = record.seq if self.first is None else self.first
            self.last = record

    def result(self, *, first_break: int | None) -> Expected:
        return Expected(
            prefix=self.prefix,
            seq=None if self.last is None else self.last.seq,
            hash=None if self.last is None else self.last.hash,
            matches=self.count,
            first_match=self.first,
            first_break=first_break,
        )


@dataclass(frozen=True)
class _Suspect:
    record: AuditRecord
    sound: bool  # its content still hashes to its stored hash (then only its link is broken)


@dataclass
class _Problems:
    """Counts every problem, keeps the `limit` with the lowest seqs (a heap: constant memory)."""

    limit: int
    count: int = 0
    lowest: int | None = None  # the seq of the first problem
    _heap: list[tuple[int, int, str]] = field(default_factory=list)  # (-seq, -order, text): largest on top

    def add(self, seq: int, text: str) -> None:
        self.count += 1
        self.lowest = seq if self.lowest is None else min(self.lowest, seq)
        item = (-seq, -self.count, text)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        elif item > self._heap[0]:
            heapq.heapreplace(self._heap, item)

    def sorted(self) -> list[str]:
        return [text for _, _, text in sorted(self._heap, reverse=True)]


def _missing(first: int, last: int) -> str:
    return f"entry {first} is missing" if first == last else f"entries {first}-{last} are missing"


def _explain(suspects: dict[int, _Suspect], located: dict[str, int]) -> Iterator[tuple[int, str]]:
    """One line per suspect entry: moved (with where it was written), changed, or unlinked."""
    original: dict[int, int | None] = {}

    def original_seq(seq: int) -> int | None:
        """The seq an entry was written with: its own when it is sound, else found through its links.

        Follows prev_hash back to an entry whose seq is known (a sound one, or GENESIS), then
        works forward: an entry written after entry M was written as M + 1, if its hash agrees.
        Iterative, since a renumbered stretch makes a long path.
        """
        path: list[int] = []
        on_path: set[int] = set()
        current = seq
        base: int | None
        while True:
            suspect = suspects.get(current)
            if suspect is None or suspect.sound:
                base = current
                break
            if current in original:
                base = original[current]
                break
            if current in on_path:  # forged links that go round in a circle
                base = None
                break
            path.append(current)
            on_path.add(current)
            prev_hash = suspect.record.prev_hash
            if prev_hash == GENESIS:
                base = 0
                break
            if prev_hash not in located:
                base = None
                break
            current = located[prev_hash]
        for step in reversed(path):
            record = suspects[step].record
            # besides the link: renumbered by one, around a removed or an inserted row
            candidates = ([] if base is None else [base + 1]) + [step - 1, step + 1]
            base = next(
                (c for c in candidates if c != step and record.recomputed_hash(seq=c) == record.hash),
                None,
            )
            original[step] = base
        return original.get(seq)

    for seq in sorted(suspects):
        record = suspects[seq].record
        if not suspects[seq].sound:
            written = original_seq(seq)
            text = (
                f"entry {seq} was changed"
                if written is None
                else f"entry {seq} is out of order: it was written as entry {written}"
            )
        elif record.prev_hash == GENESIS:
            text = f"entry {seq} is out of order: it was chained as the first entry, not after entry {seq - 1}"
        elif record.prev_hash in located:
            text = (
                f"entry {seq} is out of order: it was chained after the entry now at seq {located[record.prev_hash]}, "
                f"not after entry {seq - 1}"
            )
        else:
            text = (
                f"entry {seq} does not link to entry {seq - 1}: entry {seq - 1} was rewritten "
                "(with a recomputed hash) or replaced"
            )
        yield seq, text
