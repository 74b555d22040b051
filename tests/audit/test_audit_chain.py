"""The audit chain and the backups in the store, on SQLite and PostgreSQL: append-only tables,
concurrent appends, verification of long chains a page at a time, streamed exports, backups."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, delete, event, insert, text, update
from sqlalchemy.exc import DBAPIError

from bot.errors import StoreError
from bot.services import auditing
from bot.store.audit import GENESIS, entry_hash
from bot.store.backups import object_sha256, recreatable
from bot.store.database import Database
from bot.store.models import AuditEntry, AuditHead, Backup, DiagnosisRun, RemediationRequest

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# helpers, shared with test_audit_cli


def append_entries(db: Database, count: int, *, request_id: int | None = None) -> None:
    """`count` entries through the real AuditLog.append, one unit of work each."""
    for i in range(count):
        with db.unit_of_work() as uow:
            uow.audit.append(
                "requested" if i % 2 == 0 else "approved",
                actor=f"U{i:04d}",
                cluster="prod-eu",
                namespace="istio-system",
                request_id=request_id,
                objects=[{"kind": "Kiali", "name": f"kiali-{i}", "namespace": "istio-system"}],
                details={"i": i, "note": "ünïcode ✓"},
                at=START + timedelta(minutes=i),
            )


def bulk_chain(db: Database, count: int) -> None:
    """A valid chain of `count` entries written in one go (what `count` appends would write)."""
    rows: list[dict[str, Any]] = []
    prev = GENESIS
    for seq in range(1, count + 1):
        row: dict[str, Any] = {
            "seq": seq,
            "at": START + timedelta(seconds=seq),
            "event": "dry_run",
            "actor": "nsstuck",
            "cluster": "prod-eu",
            "namespace": f"ns-{seq % 7}",
            "request_id": seq % 13,
            "objects": [{"kind": "ConfigMap", "name": f"cm-{seq}"}],
            "details": {"ok": True, "n": seq},
            "prev_hash": prev,
        }
        row["hash"] = prev = entry_hash(**row)
        rows.append(row)
    with db.unit_of_work() as uow:
        uow.session.execute(insert(AuditEntry), rows)
        uow.session.execute(update(AuditHead).where(AuditHead.id == 1).values(seq=count, hash=prev))


@contextmanager
def attacker(url: str, *tables: str) -> Iterator[Connection]:
    """A connection with the append-only triggers of `tables` out of the way, as someone with DDL
    rights would do it; commits at the end."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for table in tables:
                if conn.dialect.name == "postgresql":
                    conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only"))
                else:
                    conn.execute(text(f"DROP TRIGGER {table}_no_update"))
                    conn.execute(text(f"DROP TRIGGER {table}_no_delete"))
            yield conn
    finally:
        engine.dispose()


def make_request(db: Database) -> int:
    """A remediation request (and the diagnosis it comes from), for backups to belong to."""
    with db.unit_of_work() as uow:
        run = DiagnosisRun(
            cluster="prod-eu",
            namespace="istio-system",
            trigger="cli",
            requested_by="U0ALICE",
            state="terminating",
            report={"schema": "nsstuck.diagnosis/v1"},
        )
        uow.session.add(run)
        uow.flush()
        request = RemediationRequest(
            diagnosis_id=run.id,
            cluster="prod-eu",
            namespace="istio-system",
            remedy_id="r1",
            action="remove_finalizer",
            risk="medium",
            description="Remove kiali.io/finalizer from kialis.kiali.io/kiali",
            remedy={"id": "r1"},
            requested_by="U0ALICE",
            expires_at=START + timedelta(hours=1),
            required_approvals=1,
        )
        uow.session.add(request)
        uow.flush()
        return request.id


KIALI: dict[str, Any] = {
    "apiVersion": "kiali.io/v1alpha1",
    "kind": "Kiali",
    "metadata": {
        "name": "kiali",
        "namespace": "istio-system",
        "uid": "6f0c1e2a-0000-4000-8000-000000000001",
        "resourceVersion": "48213",
        "generation": 3,
        "creationTimestamp": "2026-11-01T08:00:00Z",
        "deletionTimestamp": "2026-11-21T08:00:00Z",
        "deletionGracePeriodSeconds": 0,
        "selfLink": "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis/kiali",
        "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        "finalizers": ["kiali.io/finalizer"],
        "labels": {"app": "kiali"},
        "annotations": {"note": "kept"},
    },
    "spec": {"deployment": {"replicas": 1}},
    "status": {"phase": "Running"},
}


def add_backup(db: Database, request_id: int, obj: dict[str, Any] | None = None, *, record: bool = True) -> int:
    """A backup, and (as the executor does) a backed_up entry that records its sha256."""
    with db.unit_of_work() as uow:
        backup = uow.backups.add(request_id, "prod-eu", obj or KIALI, taken_at=START)
        if record:
            uow.audit.append(
                "backed_up",
                actor="U0BOB",
                cluster="prod-eu",
                namespace="istio-system",
                request_id=request_id,
                details={"backups": [{"id": backup.id, "sha256": backup.sha256}]},
            )
        return backup.id


class StatementLog:
    """The SELECTs an engine sends for one table, to see how a chain is read."""

    def __init__(self, db: Database, table: str) -> None:
        self.statements: list[str] = []
        self._table = table
        event.listen(db.engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and f"FROM {self._table}" in statement:
            self.statements.append(statement)

    @property
    def pages(self) -> list[str]:
        return [s for s in self.statements if "LIMIT" in s.upper()]


# ---------------------------------------------------------------------------------------------
# the tables refuse changes


def test_audit_entries_and_backups_refuse_update_and_delete(database: Database, database_url: str) -> None:
    """The triggers refuse whoever may write the tables; the runtime role of two (postgresql-runtime) may
    not even try (tests/store/test_database_roles.py shows the rest of what it is refused)."""
    append_entries(database, 2)
    add_backup(database, make_request(database))
    # the bot's own role, then (with two roles) the server's superuser, as someone with every right
    attempts = [(database, "append-only" if database.url == database_url else "permission denied for table")]
    owner = Database(database_url)
    if database.url != database_url:
        attempts.append((owner, "append-only"))
    for db, refusal in attempts:
        for statement in (
            update(AuditEntry).where(AuditEntry.seq == 1).values(actor="U0MALLORY"),
            delete(AuditEntry).where(AuditEntry.seq == 2),
            update(Backup).values(object={"kind": "forged"}),
            delete(Backup),
        ):
            with pytest.raises(StoreError, match=refusal) as refused, db.unit_of_work() as uow:
                uow.session.execute(statement)
            assert isinstance(refused.value.__cause__, DBAPIError)
    owner.dispose()
    assert auditing.verify(database).intact
    with database.unit_of_work() as uow:
        assert uow.audit.head()[0] == 3
        assert [r.actor for r in uow.audit.records()][:2] == ["U0000", "U0001"]


# ---------------------------------------------------------------------------------------------
# appending


def test_concurrent_appends_make_one_unbroken_chain(database: Database) -> None:
    threads, per_thread = 8, 25
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                with database.unit_of_work() as uow:
                    uow.audit.append("dry_run", actor=f"W{worker}", details={"worker": worker, "i": i})
        except BaseException as e:
            errors.append(e)

    pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert not errors, errors
    with database.unit_of_work() as uow:
        records = list(uow.audit.records())
        assert uow.audit.head()[0] == threads * per_thread
    assert [r.seq for r in records] == list(range(1, threads * per_thread + 1))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    # each worker's own appends kept their order
    for worker in range(threads):
        mine = [r.details["i"] for r in records if r.actor == f"W{worker}"]
        assert mine == list(range(per_thread))
    report = auditing.verify(database)
    assert report.intact, report.lines()
    assert report.lines() == [f"audit trail intact: 200 entries, head {records[-1].hash[:12]}"]


def test_verifying_while_others_append_finds_nothing_wrong(database: Database) -> None:
    """Entries committed during a walk lie beyond the head it started from: not a tampering."""
    bulk_chain(database, 50)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(30):
                with database.unit_of_work() as uow:
                    uow.audit.append("dry_run", actor=f"W{worker}", details={"i": i})
        except BaseException as e:
            errors.append(e)

    pool = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in pool:
        t.start()
    reports = []
    while any(t.is_alive() for t in pool) or not reports:
        reports.append(auditing.verify(database, page_size=7))  # small pages: appends land mid-walk
    for t in pool:
        t.join(timeout=120)
    assert not errors, errors
    assert [r.lines() for r in reports if not r.intact] == []
    final = auditing.verify(database)
    assert (final.intact, final.entries) == (True, 170)


def test_an_empty_trail_is_intact(database: Database) -> None:
    report = auditing.verify(database)
    assert report.intact
    assert report.lines() == ["audit trail intact: 0 entries, head 000000000000"]


# ---------------------------------------------------------------------------------------------
# verifying a long chain, a page at a time


def test_a_long_chain_verifies_quickly_a_page_at_a_time(database: Database) -> None:
    bulk_chain(database, 2000)
    log = StatementLog(database, "audit_entries")
    began = time.perf_counter()
    report = auditing.verify(database, page_size=100)
    took = time.perf_counter() - began
    assert report.intact, report.lines()
    assert report.entries == 2000
    assert report.lines()[0].startswith("audit trail intact: 2000 entries, head ")
    assert took < 10, f"verifying 2,000 entries took {took:.1f}s"
    # a statement per page of 100 (and no unbounded read of the table)
    assert len(log.pages) >= 20
    assert all("LIMIT" in s.upper() for s in log.statements if "count(" not in s.lower())


def test_an_expected_head_is_looked_for_on_the_same_paged_walk(database: Database) -> None:
    bulk_chain(database, 2000)
    with database.unit_of_work() as uow:
        wanted = {
            seq: digest for seq, digest in ((r.seq, r.hash) for r in uow.audit.records()) if seq in (1, 1500, 2000)
        }
    log = StatementLog(database, "audit_entries")
    for seq, digest in wanted.items():
        log.statements.clear()
        report = auditing.verify(database, page_size=100, expect_head=digest[:12])
        assert report.intact, report.lines()
        assert report.expected is not None
        assert (report.expected.seq, report.expected.hash, report.expected.matches) == (seq, digest, 1)
        assert report.lines()[-1] == f"expected entry {seq} ({digest[:12]}) is in the chain, unbroken up to it"
        # the same walk, a page per statement: no lookup by hash, no unbounded read
        assert len(log.pages) >= 20
        assert all("LIMIT" in s.upper() for s in log.statements if "count(" not in s.lower())


def test_a_prefix_that_several_entries_share_counts_as_found(database: Database, database_url: str) -> None:
    append_entries(database, 20)  # 20 hashes, 16 first digits: some first digit is shared
    with database.unit_of_work() as uow:
        hashes = {r.seq: r.hash for r in uow.audit.records()}
    digit = max("0123456789abcdef", key=lambda d: sum(h.startswith(d) for h in hashes.values()))
    sharing = [seq for seq, h in hashes.items() if h.startswith(digit)]
    assert len(sharing) >= 2
    with database.unit_of_work() as uow:
        chain = uow.audit.verify(expect=digit)
    assert chain.intact
    found = chain.expected
    assert found is not None
    assert (found.seq, found.first_match, found.matches, found.reached) == (sharing[-1], sharing[0], len(sharing), True)
    assert found.several == (
        f" (its prefix matches {len(sharing)} entries, from entry {sharing[0]}; more digits tell them apart)"
    )

    # the chain must be unbroken up to the last of them
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("UPDATE audit_entries SET actor = 'U0MALLORY' WHERE seq = :s"), {"s": sharing[-1]})
    with database.unit_of_work() as uow:
        chain = uow.audit.verify(expect=digit)
    assert chain.expected is not None
    assert not chain.expected.reached
    assert chain.problems[-1] == (
        f"the chain is broken at or before the expected entry {sharing[-1]} ({digit}): its first problem is at "
        f"entry {sharing[-1]}"
    )
    assert chain.problem_count == 2


def test_breaks_across_page_boundaries_are_found(database: Database, database_url: str) -> None:
    bulk_chain(database, 450)
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("UPDATE audit_entries SET details = :d WHERE seq = 100"), {"d": '{"ok":false,"n":100}'})
        # 200 and 201 straddle the second page boundary; 300 is the last entry of a page
        conn.execute(text("UPDATE audit_entries SET seq = -1 WHERE seq = 200"))
        conn.execute(text("UPDATE audit_entries SET seq = 200 WHERE seq = 201"))
        conn.execute(text("UPDATE audit_entries SET seq = 201 WHERE seq = -1"))
        conn.execute(text("DELETE FROM audit_entries WHERE seq = 300"))
    report = auditing.verify(database, page_size=100)
    assert not report.intact
    assert report.problems == (
        "entry 100 was changed",
        "entry 200 is out of order: it was written as entry 201",
        "entry 201 is out of order: it was written as entry 200",
        "entry 300 is missing",
    )


def test_problems_are_counted_all_but_listed_up_to_a_limit(database: Database, database_url: str) -> None:
    bulk_chain(database, 30)
    with attacker(database_url, "audit_entries") as conn:
        conn.execute(text("UPDATE audit_entries SET actor = 'U0MALLORY'"))
    with database.unit_of_work() as uow:
        chain = uow.audit.verify(page_size=7, max_problems=5)
    assert chain.problem_count == 30
    assert chain.problems == tuple(f"entry {n} was changed" for n in range(1, 6))
    report = auditing.verify(database)
    assert report.lines()[0] == "audit trail TAMPERED: 30 problems"


# ---------------------------------------------------------------------------------------------
# exporting


def test_export_streams_a_page_at_a_time(database: Database) -> None:
    bulk_chain(database, 1000)
    log = StatementLog(database, "audit_entries")
    chunks = auditing.export(database, "json", page_size=100)
    assert log.statements == []  # nothing is read before the first chunk is asked for
    first = [next(chunks) for _ in range(50)]
    assert len(log.pages) == 1  # 49 entries out, one page of 100 read
    rest = list(chunks)
    assert len(log.pages) == 11  # ten full pages, and the empty one that ends the walk
    document = json.loads("".join(first + rest))
    assert [e["seq"] for e in document["entries"]] == list(range(1, 1001))


def test_export_json_can_be_rechecked_without_nsstuck(database: Database) -> None:
    append_entries(database, 5, request_id=None)
    document = json.loads("".join(auditing.export(database, "json")))
    assert document["schema"] == "nsstuck.audit/v1"
    prev = GENESIS
    for entry in document["entries"]:
        body = {k: v for k, v in entry.items() if k != "hash"}
        data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert hashlib.sha256(data.encode()).hexdigest() == entry["hash"]
        assert entry["prev_hash"] == prev
        prev = entry["hash"]
    assert document["head"] == {"seq": 5, "hash": prev}


def test_export_checks_its_arguments(database: Database) -> None:
    from bot.errors import UserError

    with pytest.raises(UserError, match="unknown export format"):
        auditing.export(database, "xml")
    with pytest.raises(UserError, match="time zone"):
        auditing.export(database, "csv", since=datetime(2026, 11, 21))
    with pytest.raises(UserError, match="positive"):
        auditing.export(database, "json", request=0)


# ---------------------------------------------------------------------------------------------
# backups


def test_recreatable_drops_what_the_server_sets_and_keeps_the_rest() -> None:
    before = json.dumps(KIALI, sort_keys=True)
    result = recreatable(KIALI)
    assert json.dumps(KIALI, sort_keys=True) == before  # the argument is untouched
    assert "status" not in result
    assert result["metadata"] == {
        "name": "kiali",
        "namespace": "istio-system",
        "finalizers": ["kiali.io/finalizer"],
        "labels": {"app": "kiali"},
        "annotations": {"note": "kept"},
    }
    assert result["spec"] == KIALI["spec"]
    assert result["apiVersion"] == "kiali.io/v1alpha1"
    assert result["kind"] == "Kiali"
    assert recreatable({"apiVersion": "v1", "kind": "Namespace"}) == {"apiVersion": "v1", "kind": "Namespace"}


def test_backups_keep_the_object_and_its_sha256(database: Database) -> None:
    request_id = make_request(database)
    first = add_backup(database, request_id)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "istio-system"}, "spec": {}}
    second = add_backup(database, request_id, pod)
    with database.unit_of_work() as uow:
        stored = uow.backups.get(first)
        assert stored is not None
        assert stored.object == KIALI
        canonical = json.dumps(KIALI, sort_keys=True, separators=(",", ":"))
        assert stored.sha256 == hashlib.sha256(canonical.encode()).hexdigest() == object_sha256(stored.object)
        assert (stored.api_version, stored.kind, stored.namespace, stored.name) == (
            "kiali.io/v1alpha1",
            "Kiali",
            "istio-system",
            "kiali",
        )
        assert (stored.uid, stored.resource_version, stored.cluster) == (KIALI["metadata"]["uid"], "48213", "prod-eu")
        assert stored.taken_at == START
        assert [b.id for b in uow.backups.for_request(request_id)] == [first, second]
        assert uow.backups.for_request(request_id + 1) == []
        assert uow.backups.get(second + 1) is None
    with pytest.raises(ValueError, match="apiVersion and kind"), database.unit_of_work() as uow:
        uow.backups.add(request_id, "prod-eu", {"metadata": {"name": "x"}})
    with pytest.raises(ValueError, match=r"metadata\.name"), database.unit_of_work() as uow:
        uow.backups.add(request_id, "prod-eu", {"apiVersion": "v1", "kind": "Pod", "metadata": {}})
    assert auditing.verify(database).intact


def test_a_backup_renders_as_yaml_that_kubectl_can_create() -> None:
    import yaml

    view = auditing.BackupView(
        id=3,
        request_id=7,
        cluster="prod-eu",
        api_version="kiali.io/v1alpha1",
        kind="Kiali",
        namespace="istio-system",
        name="kiali",
        uid=KIALI["metadata"]["uid"],
        resource_version="48213",
        taken_at=START,
        sha256=object_sha256(KIALI),
        object=KIALI,
    )
    text_ = auditing.render_backup(view)
    comments = [line for line in text_.splitlines() if line.startswith("#")]
    assert comments[0] == "# nsstuck backup 3: Kiali istio-system/kiali (kiali.io/v1alpha1)"
    assert comments[1] == "# cluster prod-eu, remediation request 7, taken 2026-11-21T10:00:00Z"
    assert f"# sha256 {view.sha256}: the stored object still matches it" in comments
    assert yaml.safe_load(text_) == recreatable(KIALI)
    assert yaml.safe_load(auditing.render_backup(view, raw=True)) == KIALI
    changed = dataclasses.replace(view, object={**KIALI, "spec": {}})
    assert not changed.intact
    assert "DOES NOT MATCH" in auditing.render_backup(changed)
