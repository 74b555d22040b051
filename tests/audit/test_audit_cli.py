"""`nsstuck audit verify|export` and `nsstuck backup show` from the command line, on SQLite and
PostgreSQL: every kind of tampering, done directly in the database, is reported where it happened."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Connection, insert, select, text, update

from bot.services import auditing
from bot.store import migrating
from bot.store.audit import entry_hash
from bot.store.database import Database
from bot.store.models import AuditEntry
from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests.audit.test_audit_chain import KIALI, add_backup, append_entries, attacker, make_request

ENTRIES = AuditEntry.__table__


def nsstuck(database: Database, *args: str) -> subprocess.CompletedProcess[str]:
    return run_nsstuck(*args, env={"NSSTUCK_DATABASE_URL": database.url})


def verify_lines(database: Database) -> tuple[int, list[str]]:
    result = nsstuck(database, "audit", "verify")
    assert result.stderr == ""
    return result.returncode, result.stdout.splitlines()


# ---------------------------------------------------------------------------------------------
# tampering, each kind on its own


def _row(conn: Connection, seq: int) -> dict[str, Any]:
    return dict(conn.execute(select(ENTRIES).where(ENTRIES.c.seq == seq)).mappings().one())


def _move(conn: Connection, *moves: tuple[int, int]) -> None:
    """Renumber entries (from, to), through negative seqs so that no step collides."""
    for old, _ in moves:
        conn.execute(text("UPDATE audit_entries SET seq = :tmp WHERE seq = :old"), {"tmp": -old, "old": old})
    for old, new in moves:
        conn.execute(text("UPDATE audit_entries SET seq = :new WHERE seq = :tmp"), {"new": new, "tmp": -old})


def _swap_contents(conn: Connection) -> None:
    """Rows 6 and 7 exchange everything but their seq."""
    six, seven = _row(conn, 6), _row(conn, 7)
    for seq, other in ((6, seven), (7, six)):
        conn.execute(update(ENTRIES).where(ENTRIES.c.seq == seq).values({k: v for k, v in other.items() if k != "seq"}))


def _rewrite_and_rehash(conn: Connection) -> None:
    """Entry 3 gets another actor and a hash recomputed to match (what a careful attacker does)."""
    row = _row(conn, 3)
    row["actor"] = "U0MALLORY"
    digest = entry_hash(**{k: v for k, v in row.items() if k != "hash"})
    conn.execute(update(ENTRIES).where(ENTRIES.c.seq == 3).values(actor="U0MALLORY", hash=digest))


def _forge_after_head(conn: Connection) -> None:
    """A well-formed entry 11, chained to entry 10, without moving the head."""
    last = _row(conn, 10)
    row: dict[str, Any] = {
        "seq": 11,
        "at": datetime(2026, 11, 22, tzinfo=UTC),
        "event": "approved",
        "actor": "U0MALLORY",
        "cluster": "prod-eu",
        "namespace": "istio-system",
        "request_id": None,
        "objects": [],
        "details": {},
        "prev_hash": last["hash"],
    }
    conn.execute(insert(ENTRIES).values(**row, hash=entry_hash(**row)))


def _renumber_after_delete(conn: Connection) -> None:
    conn.execute(text("DELETE FROM audit_entries WHERE seq = 4"))
    for seq in range(5, 11):
        conn.execute(text("UPDATE audit_entries SET seq = :new WHERE seq = :old"), {"new": seq - 1, "old": seq})


Tamper = str | Callable[[Connection], None]

# name: (what is done to a chain of 10 entries, the problem lines expected, as prefixes)
TAMPERING: dict[str, tuple[list[Tamper], list[str]]] = {
    "entry changed": (["UPDATE audit_entries SET actor = 'U0MALLORY' WHERE seq = 3"], ["entry 3 was changed"]),
    "details changed": (
        ["""UPDATE audit_entries SET details = '{"i": 4, "note": "nothing to see"}' WHERE seq = 5"""],
        ["entry 5 was changed"],
    ),
    "time changed": (
        ["UPDATE audit_entries SET at = (SELECT at FROM audit_entries WHERE seq = 1) WHERE seq = 2"],
        ["entry 2 was changed"],
    ),
    "entry deleted": (["DELETE FROM audit_entries WHERE seq = 4"], ["entry 4 is missing"]),
    "entries deleted": (["DELETE FROM audit_entries WHERE seq BETWEEN 4 AND 6"], ["entries 4-6 are missing"]),
    "first entry deleted": (["DELETE FROM audit_entries WHERE seq = 1"], ["entry 1 is missing"]),
    "seqs swapped": (
        [lambda conn: _move(conn, (3, 4), (4, 3))],
        ["entry 3 is out of order: it was written as entry 4", "entry 4 is out of order: it was written as entry 3"],
    ),
    "contents swapped": (
        [_swap_contents],
        ["entry 6 is out of order: it was written as entry 7", "entry 7 is out of order: it was written as entry 6"],
    ),
    "three rotated": (
        [lambda conn: _move(conn, (2, 4), (3, 2), (4, 3))],
        [
            "entry 2 is out of order: it was written as entry 3",
            "entry 3 is out of order: it was written as entry 4",
            "entry 4 is out of order: it was written as entry 2",
        ],
    ),
    "rewritten with a recomputed hash": (
        [_rewrite_and_rehash],
        ["entry 4 does not link to entry 3: entry 3 was rewritten (with a recomputed hash) or replaced"],
    ),
    "deleted and renumbered": (
        [_renumber_after_delete],
        [
            *(f"entry {n} is out of order: it was written as entry {n + 1}" for n in range(4, 10)),
            "the last entry is missing (10): the head says the chain ends there",
        ],
    ),
    "last entry removed": (
        ["DELETE FROM audit_entries WHERE seq = 10"],
        ["the last entry is missing (10): the head says the chain ends there"],
    ),
    "tail removed": (
        ["DELETE FROM audit_entries WHERE seq >= 8"],
        ["the last 3 entries are missing (8-10): the head says the chain ends at entry 10"],
    ),
    "head hash edited": (
        ["UPDATE audit_head SET hash = '" + "f" * 64 + "'"],
        ["the head row does not match entry 10 (head hash ffffffffffff, entry hash "],
    ),
    "head moved back": (
        ["UPDATE audit_head SET seq = 8"],
        [
            "the head row does not match entry 8 (head hash ",
            "2 entries lie beyond the head (seq 9-10, the head says 8): the head row was changed",
        ],
    ),
    "head moved back consistently": (
        ["UPDATE audit_head SET seq = 9, hash = (SELECT hash FROM audit_entries WHERE seq = 9)"],
        ["1 entry lies beyond the head (seq 10, the head says 9)"],
    ),
    "head moved on": (
        ["UPDATE audit_head SET seq = 12"],
        ["the last 2 entries are missing (11-12): the head says the chain ends at entry 12"],
    ),
    "head row removed": (["DELETE FROM audit_head"], ["the head row (audit_head) is missing"]),
    "entry forged after the head": ([_forge_after_head], ["1 entry lies beyond the head (seq 11, the head says 10)"]),
    "several at once": (
        [
            "UPDATE audit_entries SET namespace = 'kube-system' WHERE seq = 2",
            "DELETE FROM audit_entries WHERE seq = 5",
            lambda conn: _move(conn, (7, 8), (8, 7)),
            "DELETE FROM audit_entries WHERE seq = 10",
        ],
        [
            "entry 2 was changed",
            "entry 5 is missing",
            "entry 7 is out of order: it was written as entry 8",
            "entry 8 is out of order: it was written as entry 7",
            "the last entry is missing (10)",
        ],
    ),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_verify_reports_tampering(database: Database, database_url: str, case: str) -> None:
    append_entries(database, 10)
    code, lines = verify_lines(database) if case == "entry changed" else (0, auditing.verify(database).lines())
    assert code == 0
    assert len(lines) == 1
    assert lines[0].startswith("audit trail intact: 10 entries, head ")

    actions, expected = TAMPERING[case]
    with attacker(database_url, "audit_entries") as conn:
        for action in actions:
            if isinstance(action, str):
                conn.execute(text(action))
            else:
                action(conn)

    code, lines = verify_lines(database)
    assert code == 1, lines
    count = len(expected)
    assert lines[0] == f"audit trail TAMPERED: {count} problem{'s' if count > 1 else ''}"
    problems = [line.removeprefix("  ") for line in lines[1:]]
    assert len(problems) == count, problems
    for line, prefix in zip(problems, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_verify_reports_changed_and_missing_backups(database: Database, database_url: str) -> None:
    request_id = make_request(database)
    append_entries(database, 2, request_id=request_id)
    ids = [
        add_backup(database, request_id, {**KIALI, "metadata": {**KIALI["metadata"], "name": f"k{i}"}})
        for i in range(4)
    ]
    assert auditing.verify(database).lines()[0].startswith("audit trail intact: 6 entries, head ")

    forged = {**KIALI, "spec": {"deployment": {"replicas": 0}}}
    with attacker(database_url, "backups") as conn:
        # the object alone, then an object with its sha256 recomputed, then a whole row
        conn.execute(text("UPDATE backups SET object = :o WHERE id = :id"), {"o": json.dumps(forged), "id": ids[0]})
        from bot.store.backups import object_sha256

        conn.execute(
            text("UPDATE backups SET object = :o, sha256 = :s WHERE id = :id"),
            {"o": json.dumps(forged), "s": object_sha256(forged), "id": ids[1]},
        )
        conn.execute(text("DELETE FROM backups WHERE id = :id"), {"id": ids[2]})

    code, lines = verify_lines(database)
    assert code == 1
    assert lines == [
        "audit trail TAMPERED: 3 problems",
        f"  backup {ids[0]} was changed: its object no longer matches its sha256",
        f"  backup {ids[1]} was changed: its object and sha256 are not the ones entry 4 recorded",
        f"  backup {ids[2]} is missing (entry 5 recorded it)",
    ]


# ---------------------------------------------------------------------------------------------
# --expect-head: a hash kept elsewhere


def _hashes(database: Database) -> dict[int, str]:
    with database.unit_of_work() as uow:
        return {r.seq: r.hash for r in uow.audit.records()}


def expect(database: Database, value: str) -> tuple[int, list[str]]:
    result = nsstuck(database, "audit", "verify", "--expect-head", value)
    assert result.stderr == ""
    return result.returncode, result.stdout.splitlines()


def test_expect_head_finds_the_entry_in_an_intact_chain(database: Database) -> None:
    append_entries(database, 10)
    hashes = _hashes(database)

    assert expect(database, hashes[10]) == (
        0,
        [f"audit trail intact: 10 entries, head {hashes[10][:12]}", f"expected entry 10 ({hashes[10][:12]}) "
         "is in the chain, unbroken up to it"],
    )  # fmt: skip
    # a prefix of 12 digits (what the thread shows), in either case; an older entry is fine too
    code, lines = expect(database, hashes[7][:12].upper())
    assert code == 0
    assert lines[1] == f"expected entry 7 ({hashes[7][:12]}) is in the chain, unbroken up to it"
    code, lines = expect(database, hashes[3][:20])
    assert (code, lines[1]) == (0, f"expected entry 3 ({hashes[3][:12]}) is in the chain, unbroken up to it")

    elsewhere = hashlib.sha256(b"another trail").hexdigest()
    assert expect(database, elsewhere) == (
        1,
        [
            "audit trail TAMPERED: 1 problem",
            f"  no entry of the chain has the expected hash {elsewhere[:12]}: entries were removed from its end "
            "(and the head moved back) or the chain was rewritten, or the hash is not from this trail",
        ],
    )


def test_a_cut_tail_with_the_head_moved_back_is_intact_alone_and_caught_by_expect_head(
    database: Database, database_url: str
) -> None:
    append_entries(database, 10)
    hashes = _hashes(database)
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE seq >= 9"))
        conn.execute(text("UPDATE audit_head SET seq = 8, hash = :h"), {"h": hashes[8]})

    # the chain alone cannot tell (the documented limit)
    assert verify_lines(database) == (0, [f"audit trail intact: 8 entries, head {hashes[8][:12]}"])
    for kept in (hashes[10], hashes[9][:12]):
        code, lines = expect(database, kept)
        assert code == 1, lines
        assert lines[0] == "audit trail TAMPERED: 1 problem"
        assert lines[1].startswith(f"  no entry of the chain has the expected hash {kept[:12]}: ")
    # an entry before the cut is still there, and the chain reaches it
    code, lines = expect(database, hashes[8][:12])
    assert (code, lines[-1]) == (0, f"expected entry 8 ({hashes[8][:12]}) is in the chain, unbroken up to it")


def test_expect_head_behind_a_break_and_before_one(database: Database, database_url: str) -> None:
    append_entries(database, 10)
    hashes = _hashes(database)
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("UPDATE audit_entries SET actor = 'U0MALLORY' WHERE seq = 3"))

    code, lines = expect(database, hashes[7][:12])
    assert code == 1
    assert lines == [
        "audit trail TAMPERED: 2 problems",
        "  entry 3 was changed",
        f"  the chain is broken at or before the expected entry 7 ({hashes[7][:12]}): its first problem is at entry 3",
    ]
    # the changed entry itself: its stored hash is still there, but it no longer holds
    code, lines = expect(database, hashes[3])
    assert code == 1
    assert lines[-1] == (
        f"  the chain is broken at or before the expected entry 3 ({hashes[3][:12]}): its first problem is at entry 3"
    )
    # before the break the chain is sound, yet the trail is still tampered
    code, lines = expect(database, hashes[2][:12])
    assert code == 1
    assert lines == [
        "audit trail TAMPERED: 1 problem",
        "  entry 3 was changed",
        f"expected entry 2 ({hashes[2][:12]}) is in the chain, unbroken up to it; the problems are after it",
    ]


def test_expect_head_when_entries_were_renumbered(database: Database, database_url: str) -> None:
    append_entries(database, 10)
    hashes = _hashes(database)
    with attacker(database_url, "audit_entries") as conn:
        _renumber_after_delete(conn)  # entry 4 deleted, 5-10 moved down by one
    code, lines = expect(database, hashes[10][:12])
    assert code == 1
    assert lines[-1] == (
        f"  the chain is broken at or before the expected entry 9 ({hashes[10][:12]}): its first problem is at entry 4"
    )


def test_expect_head_beyond_the_head_is_not_in_the_chain(database: Database, database_url: str) -> None:
    append_entries(database, 10)
    hashes = _hashes(database)
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("UPDATE audit_head SET seq = 8, hash = :h"), {"h": hashes[8]})  # 9 and 10 left behind it
    code, lines = expect(database, hashes[10][:12])
    assert code == 1
    assert lines[1:] == [
        "  2 entries lie beyond the head (seq 9-10, the head says 8): the head row was changed, or entries were "
        "added behind its back",
        f"  no entry of the chain has the expected hash {hashes[10][:12]}: entries were removed from its end "
        "(and the head moved back) or the chain was rewritten, or the hash is not from this trail",
    ]


@pytest.mark.parametrize(
    "value",
    ["abc", "3f2a9c1b0d4", "3f2a9c1b0d4g", "f" * 65, "", " 3f2a9c1b0d4e", "3f2a-9c1b-0d4e", "#123"],
)
def test_expect_head_refuses_what_is_not_a_hash(tmp_path: Path, value: str) -> None:
    # refused before the database is opened: even an empty one gets the usage error
    migrated = f"sqlite:///{tmp_path / 'migrated.db'}"
    migrating.upgrade(migrated)
    for url in (f"sqlite:///{tmp_path / 'empty.db'}", migrated):
        result = run_nsstuck("audit", "verify", "--expect-head", value, env={"NSSTUCK_DATABASE_URL": url})
        assert result.returncode == 2, (value, result.stdout, result.stderr)
        assert result.stdout == ""
        assert result.stderr == (
            "nsstuck: --expect-head takes a hash of the audit trail: 64 hex digits, or the first 12 or more of "
            f"them (not {value!r})\n"
        )


# ---------------------------------------------------------------------------------------------
# export


def test_export_json_and_csv(database: Database) -> None:
    append_entries(database, 3, request_id=7)
    append_entries(database, 2, request_id=8)
    with database.unit_of_work() as uow:
        head_seq, head_hash = uow.audit.head()
        stored = list(uow.audit.records())

    default = nsstuck(database, "audit", "export")
    explicit = nsstuck(database, "audit", "export", "--json")
    assert default.returncode == explicit.returncode == 0, default.stderr
    document = json.loads(default.stdout)
    again = json.loads(explicit.stdout)
    assert {**document, "exported_at": None} == {**again, "exported_at": None}
    assert document["schema"] == "nsstuck.audit/v1"
    assert document["head"] == {"seq": head_seq, "hash": head_hash}
    exported_at = datetime.strptime(document["exported_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - exported_at).total_seconds()) < 600
    assert list(document) == ["schema", "head", "exported_at", "filters", "entries"]
    assert document["entries"] == [r.to_json() for r in stored]
    first = document["entries"][0]
    assert list(first) == [
        "seq", "at", "event", "actor", "cluster", "namespace", "request_id", "objects", "details", "prev_hash", "hash",
    ]  # fmt: skip
    assert first["at"] == "2026-11-21T10:00:00.000000Z"
    assert first["details"] == {"i": 0, "note": "ünïcode ✓"}

    result = nsstuck(database, "audit", "export", "--csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [int(r["seq"]) for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["objects"] == '[{"kind":"Kiali","name":"kiali-0","namespace":"istio-system"}]'
    assert json.loads(rows[0]["details"]) == {"i": 0, "note": "ünïcode ✓"}
    assert rows[4]["hash"] == head_hash
    assert rows[0]["request_id"] == "7"
    assert nsstuck(database, "audit", "export", "-o", "csv").stdout == result.stdout  # -o csv: the same

    by_request = json.loads(nsstuck(database, "audit", "export", "--request", "8").stdout)
    assert [e["seq"] for e in by_request["entries"]] == [4, 5]
    assert by_request["head"]["seq"] == 5  # the chain's head, to pin the export to
    since = nsstuck(database, "audit", "export", "--csv", "--since", "2026-11-21T11:00:01+01:00")
    assert [int(r["seq"]) for r in csv.DictReader(io.StringIO(since.stdout))] == [2, 3, 5]  # 10:01 UTC on
    naive = nsstuck(database, "audit", "export", "--since", "2026-11-21T10:02:00", "--request", "7")
    assert [e["seq"] for e in json.loads(naive.stdout)["entries"]] == [3]


def test_export_usage_errors(tmp_path: Path) -> None:

    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrated(url)
    env = {"NSSTUCK_DATABASE_URL": url}
    both = run_nsstuck("audit", "export", "--json", "--csv", env=env)
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    for args, message in (
        (
            ["--since", "yesterday"],
            "nsstuck: --since 'yesterday' is not an ISO time (for example 2026-11-21T10:00:00Z)",
        ),
        (["--request", "0"], "nsstuck: --request must be a positive request id"),
    ):
        result = run_nsstuck("audit", "export", *args, env=env)
        assert (result.returncode, result.stderr.strip(), result.stdout) == (2, message, "")


def test_commands_refuse_a_database_that_is_not_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    for args in (("audit", "verify"), ("audit", "export", "--csv"), ("backup", "show", "1")):
        result = run_nsstuck(*args, env={"NSSTUCK_DATABASE_URL": url})
        assert result.returncode == 2, args
        assert result.stderr.strip() == (
            "nsstuck: config error: environment: NSSTUCK_DATABASE_URL: the schema is at nothing (an empty "
            f"database), not at head {migrating.head_revision()}: run `nsstuck db upgrade`"
        )
        assert result.stdout == ""


# ---------------------------------------------------------------------------------------------
# backup show


def test_backup_show(database: Database, database_url: str) -> None:
    backup_id = add_backup(database, make_request(database))
    with database.unit_of_work() as uow:
        backup = uow.backups.get(backup_id)
        assert backup is not None
        sha256, request_id = backup.sha256, backup.request_id

    result = nsstuck(database, "backup", "show", str(backup_id))
    assert result.returncode == 0, result.stderr
    comments = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert comments[:4] == [
        f"# nsstuck backup {backup_id}: Kiali istio-system/kiali (kiali.io/v1alpha1)",
        f"# cluster prod-eu, remediation request {request_id}, taken 2026-11-21T10:00:00Z",
        "# uid 6f0c1e2a-0000-4000-8000-000000000001, resourceVersion 48213 when taken",
        f"# sha256 {sha256}: the stored object still matches it",
    ]
    shown = yaml.safe_load(result.stdout)
    assert "status" not in shown
    assert set(shown["metadata"]) == {"name", "namespace", "finalizers", "labels", "annotations"}
    raw = nsstuck(database, "backup", "show", str(backup_id), "--raw")
    assert raw.returncode == 0
    assert yaml.safe_load(raw.stdout) == KIALI
    assert "# the object exactly as it was read (--raw)" in raw.stdout
    # -o json: the same object alone, as JSON (issue 24 §2)
    as_json = nsstuck(database, "backup", "show", str(backup_id), "-o", "json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == shown
    assert json.loads(nsstuck(database, "backup", "show", str(backup_id), "--raw", "-o", "json").stdout) == KIALI

    missing = nsstuck(database, "backup", "show", str(backup_id + 1))
    assert (missing.returncode, missing.stderr.strip()) == (2, f"nsstuck: there is no backup {backup_id + 1}")

    with attacker(database_url, "backups") as conn:
        conn.execute(text("UPDATE backups SET object = :o"), {"o": json.dumps({**KIALI, "spec": {}})})
    changed = nsstuck(database, "backup", "show", str(backup_id))
    assert changed.returncode == 1
    assert f"# sha256 {sha256}: DOES NOT MATCH, the stored object was changed after it was taken" in changed.stdout
    assert changed.stderr.strip() == (
        f"nsstuck: backup {backup_id} does not match its sha256: it was changed after it was taken"
    )


SECRET_VALUE = "canary-secret-value-7c4f09d2e1b84a6f"
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {
        "name": "db-password",
        "namespace": "istio-system",
        "uid": "6f0c1e2a-0000-4000-8000-0000000000aa",
        "resourceVersion": "48300",
        "creationTimestamp": "2026-11-01T08:00:00Z",
        "deletionTimestamp": "2026-11-21T08:00:00Z",
        "finalizers": ["example.com/keep"],
        "labels": {"app": "db"},
        "annotations": {
            "note": "kept",
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"stringData": {"p": SECRET_VALUE}}),
        },
    },
    "data": {"password": base64.b64encode(SECRET_VALUE.encode()).decode()},
    "stringData": {"plain": SECRET_VALUE},
}


def _no_secret_value(text_: str) -> None:
    assert SECRET_VALUE not in text_
    assert base64.b64encode(SECRET_VALUE.encode()).decode() not in text_


def test_a_secrets_backup_keeps_and_shows_only_its_metadata(database: Database) -> None:
    # whatever the caller hands it (the executor reads Secrets as metadata only), the store keeps no value
    backup_id = add_backup(database, make_request(database), SECRET)
    [row] = (
        database.engine.connect().execute(text("SELECT object FROM backups WHERE id = :id"), {"id": backup_id}).all()
    )
    stored = row[0] if isinstance(row[0], dict) else json.loads(row[0])
    _no_secret_value(json.dumps(stored))
    assert set(stored) == {"apiVersion", "kind", "type", "metadata"}
    assert stored["metadata"]["annotations"] == {"note": "kept"}

    result = nsstuck(database, "backup", "show", str(backup_id))
    assert result.returncode == 0, result.stderr
    _no_secret_value(result.stdout)
    comments = " ".join(line[2:] for line in result.stdout.splitlines() if line.startswith("#"))
    assert "only the Secret's metadata was read and kept, never its data: the YAML below re-creates its metadata" in (
        comments
    )
    assert "and finalizers, without its data and type" in comments
    shown = yaml.safe_load(result.stdout)
    assert shown["metadata"]["finalizers"] == ["example.com/keep"]
    assert shown["metadata"]["labels"] == {"app": "db"}
    assert "data" not in shown
    assert "stringData" not in shown
    raw = nsstuck(database, "backup", "show", str(backup_id), "--raw")
    _no_secret_value(raw.stdout)
    assert "# the object exactly as it was read (--raw)\n" in raw.stdout


@pytest.mark.parametrize("kind", ["Secret", "ConfigMap", "Pod"])
def test_an_old_backup_holding_values_is_shown_without_them(database: Database, database_url: str, kind: str) -> None:
    """A backup taken before nsstuck read Secrets and ConfigMaps as metadata only (and kept the
    environment values of pods) stays as it is, intact; `backup show` never prints those values."""
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    values: dict[str, Any] = {
        "Secret": {"data": {"password": encoded}, "stringData": {"plain": SECRET_VALUE}},
        "ConfigMap": {"data": {"url": SECRET_VALUE}, "binaryData": {"blob": encoded}},
        "Pod": {"spec": {"containers": [{"name": "app", "env": [{"name": "TOKEN", "value": SECRET_VALUE}]}]}},
    }[kind]
    old = {"apiVersion": "v1", "kind": kind, "metadata": SECRET["metadata"], **values}
    request_id = make_request(database)
    from bot.store.backups import object_sha256

    with attacker(database_url, "backups") as conn:  # written as the code before this one wrote it
        conn.execute(
            text(
                "INSERT INTO backups (request_id, cluster, api_version, kind, namespace, name, uid, "
                "resource_version, taken_at, object, sha256) VALUES (:r, 'prod-eu', 'v1', :k, 'istio-system', "
                "'db-password', 'u', '1', :t, :o, :s)"
            ),
            {
                "r": request_id,
                "k": kind,
                "t": datetime(2026, 11, 21, tzinfo=UTC),
                "o": json.dumps(old),
                "s": object_sha256(old),
            },
        )
        [(backup_id,)] = conn.execute(text("SELECT id FROM backups")).all()

    for args in ((), ("--raw",)):
        result = nsstuck(database, "backup", "show", str(backup_id), *args)
        assert result.returncode == 0, result.stderr  # intact: nothing rewrote it
        _no_secret_value(result.stdout)
        comments = " ".join(line[2:] for line in result.stdout.splitlines() if line.startswith("#"))
        annotation = "the kubectl.kubernetes.io/last-applied-configuration annotation"
        held = {
            "Secret": f"data, stringData and {annotation}",
            "ConfigMap": f"data, binaryData and {annotation}",
            "Pod": f"the environment values of its containers and {annotation}",
        }[kind]
        assert f"this {kind} backup holds {held}, from before nsstuck stopped keeping values: they stay" in comments
        assert "the stored object still matches it" in comments
        shown = yaml.safe_load(result.stdout)
        assert shown["metadata"]["finalizers"] == ["example.com/keep"]
        if kind == "Pod":
            assert shown["spec"]["containers"][0]["env"] == [{"name": "TOKEN"}]


@pytest.mark.kubectl
def test_a_backup_recreates_the_object_with_kubectl(tmp_path: Path, kubeconfig_path: Path) -> None:

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig_path), "HOME": str(tmp_path)}
        return subprocess.run(
            ["/usr/bin/kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=30, check=False
        )

    assert kubectl("create", "namespace", "shop").returncode == 0
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    }
    made = kubectl("create", "-f", "-", stdin=json.dumps(service))
    assert made.returncode == 0, made.stderr
    made = kubectl("create", "secret", "generic", "creds", "-n", "shop", f"--from-literal=password={SECRET_VALUE}")
    assert made.returncode == 0, made.stderr
    assert kubectl("label", "secret", "creds", "-n", "shop", "team=db").returncode == 0
    live_service = json.loads(kubectl("get", "service", "web", "-n", "shop", "-o", "json").stdout)
    live_secret = json.loads(kubectl("get", "secret", "creds", "-n", "shop", "-o", "json").stdout)
    assert live_service["metadata"]["resourceVersion"]

    url = f"sqlite:///{tmp_path / 'b.db'}"
    migrated(url)
    database = Database(url)
    try:
        request_id = make_request(database)
        backups = [add_backup(database, request_id, live) for live in (live_service, live_secret)]
    finally:
        database.dispose()
    assert kubectl("delete", "service", "web", "-n", "shop").returncode == 0
    assert kubectl("delete", "secret", "creds", "-n", "shop").returncode == 0

    for backup_id in backups:
        shown = run_nsstuck("backup", "show", str(backup_id), env={"NSSTUCK_DATABASE_URL": url})
        _no_secret_value(shown.stdout)
        created = kubectl("create", "-f", "-", stdin=shown.stdout)
        assert created.returncode == 0, created.stderr
    again = json.loads(kubectl("get", "service", "web", "-n", "shop", "-o", "json").stdout)
    assert again["spec"]["selector"] == {"app": "web"}  # a whole object comes back whole
    assert again["metadata"]["uid"] != live_service["metadata"]["uid"]
    secret = json.loads(kubectl("get", "secret", "creds", "-n", "shop", "-o", "json").stdout)
    assert secret["metadata"]["labels"] == {"team": "db"}  # a Secret comes back as its metadata, no data
    assert not secret.get("data")
    assert secret["metadata"]["uid"] != live_secret["metadata"]["uid"]


def test_help_texts_describe_the_commands() -> None:
    def help_of(*path: str) -> str:
        result = run_nsstuck(*path, "--help")
        assert result.returncode == 0
        return " ".join(result.stdout.split())  # argparse wraps to the terminal's width

    export = help_of("audit", "export")
    assert "nsstuck.audit/v1" in export
    assert "--since ISO-TIME" in export
    assert "--request ID" in export
    assert "--json (the default)" in export
    assert "exported_at" in export
    assert "retention lock" in export
    assert "--expect-head HASH" in export
    verify = help_of("audit", "verify")
    assert "Exit 0 intact (and the expected entry in the chain), 1 tampered" in verify
    assert "--expect-head HASH" in verify
    assert "prefix of at least 12 hex digits" in verify
    show = help_of("backup", "show")
    assert "kubectl create -f" in show
    assert "--raw" in show
