"""The audit use cases: verify the trail, export it, show a backup.

`verify` walks the hash chain (`AuditLog.verify`: changed, missing, reordered entries, a removed
tail, an edited head) and then the backups: each stored object must still match its sha256, and
that sha256 must be the one the trail's `backed_up` entry recorded (details.backups[].sha256), so an
object rewritten together with its checksum is noticed too; a recorded backup that is gone is
reported as missing. With `expect_head` (a hash kept outside the database: the one a remediation's
outcome message in Slack quotes, or an export's head) the chain must also still hold that entry and be
unbroken up to it, which is what shows a tail cut off with the head moved back, or a consistent
rewrite: the chain alone cannot (its hash has no key).

`export` streams the trail in seq order, as one JSON document or as CSV, without holding it in
memory. JSON, schema "nsstuck.audit/v1"::

    {"schema": "nsstuck.audit/v1", "head": {"seq": 42, "hash": "9f1c..."},
     "exported_at": "2026-11-21T10:05:00Z", "filters": {"since": null, "request_id": null}, "entries": [
    {"seq": 1, "at": "2026-11-21T10:00:00.000000Z", "event": "requested", "actor": "U0123", "cluster": "prod-eu",
     "namespace": "istio-system", "request_id": 7, "objects": [...], "details": {...},
     "prev_hash": "000...", "hash": "5e2a..."},
    ...
    ]}

`head` is the chain's head when the export began (null if its row is gone), `exported_at` when that
was; entries appended later are not included. Kept where the database's owners cannot rewrite it,
`head.hash` is what `nsstuck audit verify --expect-head` checks the chain against later (so is any
entry's `hash`; in CSV, unfiltered, the last row's is the head's). Each entry's `hash` is sha256 of
the compact, key-sorted JSON (ensure_ascii off) of its other fields but `hash`, so anyone can
re-check an export, and a later chain against it.
CSV: a header and one row per entry, the same fields, `objects` and `details` as compact JSON,
empty cells for nulls.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from bot.domain.values import holds_values, values_in, without_values
from bot.errors import UserError
from bot.store.audit import PAGE_SIZE, SHORT_HASH, AuditRecord, Expected
from bot.store.backups import SERVER_SET_METADATA, object_sha256, recreatable
from bot.store.database import Database
from bot.store.records import BackupRecord, record_of

SCHEMA = "nsstuck.audit/v1"
FORMATS = ("json", "csv")
FIELDS = (
    "seq",
    "at",
    "event",
    "actor",
    "cluster",
    "namespace",
    "request_id",
    "objects",
    "details",
    "prev_hash",
    "hash",
)
# problems of the backups that a report keeps in detail (it counts them all)
MAX_BACKUP_PROBLEMS = 1000
# CSV is handed out in chunks of about this many characters
_CSV_CHUNK = 64 * 1024


# ---------------------------------------------------------------------------------------------
# verify


_HEX = re.compile(r"[0-9a-fA-F]+")


def expected_head(value: str) -> str:
    """An --expect-head value: a whole hash (64 hex digits) or a prefix of at least 12, any case;
    returned in lower case. Anything else is refused (UserError, exit 2)."""
    if not (SHORT_HASH <= len(value) <= 64 and _HEX.fullmatch(value)):
        shown = value if len(value) <= 70 else value[:67] + "..."
        raise UserError(
            f"--expect-head takes a hash of the audit trail: 64 hex digits, or the first {SHORT_HASH} or more "
            f"of them (not {shown!r})"
        )
    return value.lower()


@dataclass(frozen=True)
class VerifyReport:
    entries: int
    head_seq: int | None
    head_hash: str | None
    backups: int
    problems: tuple[str, ...]
    problem_count: int
    expected: Expected | None = None  # with --expect-head: what became of it (its problem is counted above)

    @property
    def intact(self) -> bool:
        """Nothing wrong, and (with --expect-head) the expected entry is in the chain."""
        return self.problem_count == 0

    def lines(self) -> list[str]:
        """What `nsstuck audit verify` prints: one line when intact, else a heading and one line per
        problem; with --expect-head, a last line when the chain reaches the expected entry."""
        if self.intact:
            head = (self.head_hash or "")[:12]
            lines = [f"audit trail intact: {_plural(self.head_seq or 0, 'entry', 'entries')}, head {head}"]
        else:
            lines = [f"audit trail TAMPERED: {_plural(self.problem_count, 'problem', 'problems')}"]
            lines += [f"  {problem}" for problem in self.problems]
            if self.problem_count > len(self.problems):
                lines.append(f"  ... and {self.problem_count - len(self.problems)} more")
        found = self.expected
        if found is not None and found.reached:
            after = "" if self.intact else "; the problems are after it"
            lines.append(
                f"expected entry {found.seq} ({found.shown}) is in the chain, unbroken up to it{after}{found.several}"
            )
        return lines


def verify(db: Database, *, page_size: int = PAGE_SIZE, expect_head: str | None = None) -> VerifyReport:
    """Check the hash chain and the backups, and that the chain holds `expect_head`; read-only."""
    expect = None if expect_head is None else expected_head(expect_head)
    with db.unit_of_work() as uow:
        chain = uow.audit.verify(page_size=page_size, expect=expect)
        recorded: dict[int, tuple[int, str]] = {}  # backup id -> (seq of its backed_up entry, sha256)
        through = None if chain.head is None else chain.head[0]
        for record in uow.audit.records(event="backed_up", through=through, page_size=page_size):
            for backup_id, sha256 in _recorded_backups(record):
                recorded.setdefault(backup_id, (record.seq, sha256))
        problems: list[str] = []
        count = 0

        def problem(text: str) -> None:
            nonlocal count
            count += 1
            if len(problems) < MAX_BACKUP_PROBLEMS:
                problems.append(text)

        backups = 0
        for backup_id, stored, actual in uow.backups.fingerprints(page_size=page_size):
            backups += 1
            seen = recorded.pop(backup_id, None)
            if actual != stored:
                problem(f"backup {backup_id} was changed: its object no longer matches its sha256")
            elif seen is not None and seen[1] != stored:
                problem(
                    f"backup {backup_id} was changed: its object and sha256 are not the ones entry {seen[0]} recorded"
                )
        for backup_id, (seq, _) in sorted(recorded.items()):
            problem(f"backup {backup_id} is missing (entry {seq} recorded it)")
    return VerifyReport(
        entries=chain.entries,
        head_seq=None if chain.head is None else chain.head[0],
        head_hash=None if chain.head is None else chain.head[1],
        backups=backups,
        problems=(*chain.problems, *problems),
        problem_count=chain.problem_count + count,
        expected=chain.expected,
    )


def _recorded_backups(record: AuditRecord) -> Iterator[tuple[int, str]]:
    """(id, sha256) of the backups a backed_up entry lists; anything else in it is not ours to judge."""
    listed = record.details.get("backups")
    if not isinstance(listed, list):
        return
    for item in listed:
        if isinstance(item, dict) and isinstance(item.get("id"), int) and isinstance(item.get("sha256"), str):
            yield item["id"], item["sha256"]


# ---------------------------------------------------------------------------------------------
# export


def export(
    db: Database,
    fmt: str,
    since: datetime | None = None,
    request: int | None = None,
    *,
    page_size: int = PAGE_SIZE,
) -> Iterator[str]:
    """The trail (or the entries at/after `since`, of request `request`) as chunks of text, in seq order.

    Arguments are checked now; the database is read as the chunks are consumed, in one unit of work
    that stays open until the iterator is exhausted or closed.
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r} (use {' or '.join(FORMATS)})")
    if since is not None and since.tzinfo is None:
        raise UserError("the --since time needs a time zone (for example 2026-11-21T10:00:00Z)")
    if request is not None and request < 1:
        raise UserError("--request must be a positive request id")
    if fmt == "json":
        return _json_chunks(db, since, request, page_size)
    return _csv_chunks(db, since, request, page_size)


def _json_chunks(db: Database, since: datetime | None, request: int | None, page_size: int) -> Iterator[str]:
    with db.unit_of_work() as uow:
        head = uow.audit.find_head()
        preamble = {
            "schema": SCHEMA,
            "head": None if head is None else {"seq": head[0], "hash": head[1]},
            "exported_at": _iso(datetime.now(UTC)),
            "filters": {"since": None if since is None else _iso(since), "request_id": request},
        }
        # the document is written by hand around the entries so that it streams: `{..., "entries": [`
        yield json.dumps(preamble, ensure_ascii=False)[:-1] + ', "entries": [\n'
        separator = ""
        records = uow.audit.records(
            through=None if head is None else head[0], since=since, request_id=request, page_size=page_size
        )
        for record in records:
            yield separator + json.dumps(record.to_json(), ensure_ascii=False)
            separator = ",\n"
        yield "\n]}\n"


def _csv_chunks(db: Database, since: datetime | None, request: int | None, page_size: int) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    with db.unit_of_work() as uow:
        head = uow.audit.find_head()
        records = uow.audit.records(
            through=None if head is None else head[0], since=since, request_id=request, page_size=page_size
        )
        for record in records:
            writer.writerow(_csv_row(record))
            if buffer.tell() >= _CSV_CHUNK:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()


def _csv_row(record: AuditRecord) -> list[Any]:
    row = record.to_json()
    for key in ("objects", "details"):
        row[key] = json.dumps(row[key], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ["" if row[key] is None else row[key] for key in FIELDS]


# ---------------------------------------------------------------------------------------------
# backups


@dataclass(frozen=True)
class BackupView(BackupRecord):
    """A backup as the store keeps it, with whether its stored object still matches its sha256."""

    @property
    def intact(self) -> bool:
        return object_sha256(self.object) == self.sha256

    @property
    def title(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.api_version})"


def load_backup(db: Database, backup_id: int) -> BackupView:
    with db.unit_of_work() as uow:
        backup = uow.backups.get(backup_id)
        if backup is None:
            raise UserError(f"there is no backup {backup_id}")
        return record_of(BackupView, backup)


def render_backup(view: BackupView, *, raw: bool = False) -> str:
    """YAML of the backup, after comment lines that say what it is and whether it is intact.

    Values are never printed, raw or not: a Secret's or ConfigMap's data, the last-applied annotation
    that repeats it, a pod's environment values. nsstuck reads Secrets and ConfigMaps as metadata only,
    so their backups hold none (the header says so); a backup taken before it did may, and what it
    holds of them is named in the header and left out of the YAML.
    """
    header = [
        f"nsstuck backup {view.id}: {view.title}",
        f"cluster {view.cluster}, remediation request {view.request_id}, taken {_iso(view.taken_at)}",
    ]
    if view.uid or view.resource_version:
        header.append(f"uid {view.uid or '-'}, resourceVersion {view.resource_version or '-'} when taken")
    if view.intact:
        header.append(f"sha256 {view.sha256}: the stored object still matches it")
    else:
        header.append(f"sha256 {view.sha256}: DOES NOT MATCH, the stored object was changed after it was taken")
    withheld = values_in(view.object)
    kind = view.kind
    if withheld:
        header.append(f"this {kind} backup holds {_and(withheld)}, from before nsstuck stopped keeping")
        header.append("values: they stay in the database and are not printed here")
    elif holds_values(view.api_version, kind):
        header.append(f"only the {kind}'s metadata was read and kept, never its data: the YAML below")
        header.append(
            f"re-creates its metadata and finalizers, without its {'data and type' if kind == 'Secret' else 'data'}"
        )
    if raw:
        header.append("the object exactly as it was read (--raw)" + (", less its values" if withheld else ""))
    else:
        header.append(f"without what the API server sets ({', '.join(SERVER_SET_METADATA)}, status),")
        header.append("so that `kubectl create -f` recreates it; --raw shows it exactly as it was read")
    body = yaml.safe_dump(backup_document(view, raw=raw), sort_keys=False, allow_unicode=True, default_flow_style=False)
    return "".join(f"# {line}\n" for line in header) + body


def backup_document(view: BackupView, *, raw: bool = False) -> dict[str, Any]:
    """The object `render_backup` prints (never its values): as read (`raw`), or ready to re-create."""
    shown = without_values(json.loads(json.dumps(view.object))) if values_in(view.object) else view.object
    return dict(shown if raw else recreatable(shown))


def backup_yaml(db: Database, backup_id: int, raw: bool = False) -> str:
    return render_backup(load_backup(db, backup_id), raw=raw)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
