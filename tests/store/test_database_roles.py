"""Two database roles (README "Database roles"): `nsstuck db upgrade` runs as the migration role, which
owns the schema, and grants the runtime role exactly its share; the runtime role cannot change or
empty the audit trail and the backups, nor drop, disable or replace their triggers.

On PostgreSQL (the test server's roles, made per test by tests/pgdatabase.py), through the command
line as an operator runs it. The bot's own work as the runtime role is shown by every store test's
`postgresql-runtime` variant (tests/conftest.py) and, end to end, by the running bot below.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, make_url

from bot.store import grants, migrating
from bot.store.database import Database
from tests._cli import run_nsstuck
from tests.approvals._flow import remediation_bot
from tests.audit.test_audit_chain import add_backup, append_entries, make_request
from tests.conftest import _postgres_admin_url
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import BOB
from tests.pgdatabase import Roles, database_with_roles

# what the issue asks of the audit tables, written out here rather than read from bot/store/grants.py
AUDIT_SHARE = {
    "audit_entries": {"SELECT", "INSERT"},
    "backups": {"SELECT", "INSERT"},
    "audit_head": {"SELECT", "UPDATE"},
}
# and what the watch does (issue 25): claims rounds, finishes them and forgets them after a day; keeps
# whether each watched cluster answers (never deleted)
WATCH_SHARE = {
    "watch_rounds": {"SELECT", "INSERT", "UPDATE", "DELETE"},
    "watched_clusters": {"SELECT", "INSERT", "UPDATE"},
}


@pytest.fixture
def roles() -> Iterator[Roles]:
    admin = _postgres_admin_url()
    assert admin is not None
    with database_with_roles(admin) as made:
        yield made


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _admin(roles: Roles, *statements: str) -> None:
    with psycopg.connect(_dsn(roles.admin), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # our own literal SQL


def _upgrade(roles: Roles, **env: str) -> subprocess.CompletedProcess[str]:
    """`nsstuck db upgrade` with both URLs, as the chart's migration Job runs it."""
    return run_nsstuck(
        "db",
        "upgrade",
        env={"NSSTUCK_MIGRATION_DATABASE_URL": roles.migration, "NSSTUCK_DATABASE_URL": roles.runtime, **env},
    )


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _held(roles: Roles, role: str | None = None) -> dict[str, frozenset[str]]:
    engine = create_engine(roles.admin)
    try:
        with engine.connect() as connection:
            return grants.privileges_of(connection, role or roles.runtime_role)
    finally:
        engine.dispose()


def _refused_in_one_line(result: subprocess.CompletedProcess[str], *says: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("nsstuck: "), lines
    for words in says:
        assert words in lines[0], lines[0]


# ---------------------------------------------------------------------------------------------
# every table has its share declared


def test_every_table_the_migrations_make_has_a_runtime_share(database_url: str) -> None:
    """A new table without a line in RUNTIME_PRIVILEGES fails here on either backend, before a
    two-role `db upgrade` would stop at it."""
    migrating.upgrade(database_url)
    assert _tables(database_url) == set(grants.RUNTIME_PRIVILEGES) == set(grants.nsstuck_tables())
    for table, share in grants.RUNTIME_PRIVILEGES.items():
        assert share <= {"SELECT", "INSERT", "UPDATE", "DELETE"}, table  # never TRUNCATE, REFERENCES, TRIGGER


# ---------------------------------------------------------------------------------------------
# the grants


@pytest.mark.postgres
def test_db_upgrade_grants_the_runtime_role_its_share_and_no_more(roles: Roles) -> None:
    result = _upgrade(roles)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"database {make_url(roles.migration).render_as_string()} is at revision {migrating.head_revision()}",
        f"runtime role {roles.runtime_role}: granted what nsstuck serve needs, and no more",
    ]
    held = _held(roles)
    assert held == grants.RUNTIME_PRIVILEGES
    for table, share in {**AUDIT_SHARE, **WATCH_SHARE}.items():
        assert held[table] == share, table
    with psycopg.connect(_dsn(roles.admin)) as conn:
        owners: dict[str, str] = dict(
            conn.execute(
                "SELECT relname, relowner::regrole::text FROM pg_class "
                "WHERE relkind IN ('r', 'S') AND relnamespace = 'public'::regnamespace"
            ).fetchall()
        )
        assert set(owners.values()) == {roles.owner}, owners
        sequences = [name for (name,) in conn.execute("SELECT relname FROM pg_class WHERE relkind = 'S'").fetchall()]
        assert "backups_id_seq" in sequences
        for sequence in sequences:  # nextval() for new rows, and nothing else (no setval)
            may = conn.execute(
                "SELECT has_sequence_privilege(%(r)s, %(s)s, 'USAGE'), "
                "has_sequence_privilege(%(r)s, %(s)s, 'UPDATE'), has_sequence_privilege(%(r)s, %(s)s, 'SELECT')",
                {"r": roles.runtime_role, "s": sequence},
            ).fetchone()
            assert may == (True, False, False), sequence

    # more given by hand is taken back by the next upgrade; `db current` looks as the migration role
    _admin(roles, f"GRANT DELETE, TRUNCATE ON audit_entries TO {roles.runtime_role}")
    assert "DELETE" in _held(roles)["audit_entries"]
    assert _upgrade(roles).returncode == 0
    assert _held(roles) == grants.RUNTIME_PRIVILEGES
    current = run_nsstuck(
        "db", "current", env={"NSSTUCK_MIGRATION_DATABASE_URL": roles.migration, "NSSTUCK_DATABASE_URL": "sqlite://"}
    )
    assert (current.returncode, current.stdout.splitlines()[0]) == (0, f"current: {migrating.head_revision()}")


@pytest.mark.postgres
def test_the_runtime_role_is_refused_what_would_hide_tampering(roles: Roles) -> None:
    """DELETE, UPDATE, TRUNCATE on the audit entries and the backups; DROP, DISABLE or replace their
    triggers; DROP the tables; DELETE or TRUNCATE the head: each refused to the runtime role, the trail
    intact afterwards, and the bot's own writes still allowed. The public schema here lets everyone
    create tables, as PostgreSQL 14 and earlier do by default: the runtime role still owns nothing."""
    _admin(roles, "GRANT CREATE ON SCHEMA public TO PUBLIC")
    assert _upgrade(roles).returncode == 0
    db = Database(roles.runtime)
    try:
        request_id = make_request(db)
        append_entries(db, 3, request_id=request_id)
        add_backup(db, request_id)
        runtime = roles.runtime_role
        forbidden = [
            "DELETE FROM audit_entries",
            "UPDATE audit_entries SET actor = 'U0MALLORY' WHERE seq = 1",
            "TRUNCATE audit_entries",
            "DELETE FROM backups",
            "UPDATE backups SET object = '{}'",
            "TRUNCATE backups",
            "TRUNCATE audit_entries, backups, audit_head CASCADE",
            "DROP TRIGGER audit_entries_append_only ON audit_entries",
            "DROP TRIGGER backups_append_only ON backups",
            "ALTER TABLE audit_entries DISABLE TRIGGER audit_entries_append_only",
            "ALTER TABLE backups DISABLE TRIGGER USER",
            "DROP FUNCTION nsstuck_append_only() CASCADE",
            "CREATE OR REPLACE FUNCTION nsstuck_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RETURN NEW; END $$",
            "SET session_replication_role = replica",  # a session in which no ordinary trigger fires
            f"ALTER TABLE audit_entries OWNER TO {runtime}",
            "DROP TABLE audit_entries",
            "DROP TABLE backups CASCADE",
            "DELETE FROM audit_head",
            "TRUNCATE audit_head",
        ]
        outcomes = {}
        with psycopg.connect(_dsn(roles.runtime), autocommit=True) as conn:
            for statement in forbidden:
                try:
                    conn.execute(statement)
                    outcomes[statement] = "RAN"
                except psycopg.Error as e:  # a trigger's refusal is not enough: TRUNCATE never meets one
                    outcomes[statement] = type(e).__name__
        not_refused = [
            f"{outcome}: {statement}" for statement, outcome in outcomes.items() if outcome != "InsufficientPrivilege"
        ]
        assert not not_refused, "not refused for want of privilege:\n" + "\n".join(not_refused)

        # nothing changed, and the bot's own writes go on: an entry, a backup, the chain intact
        append_entries(db, 1, request_id=request_id)
        add_backup(db, request_id)
        verify = run_nsstuck("audit", "verify", env={"NSSTUCK_DATABASE_URL": roles.runtime})
        assert verify.returncode == 0, (verify.stdout, verify.stderr)
        assert verify.stdout.startswith("audit trail intact: 6 entries, head "), verify.stdout  # 4, and 2 backups
        with psycopg.connect(_dsn(roles.admin)) as conn:
            assert conn.execute("SELECT count(*) FROM backups").fetchone() == (2,)
            triggers = conn.execute(
                "SELECT tgname, tgenabled FROM pg_trigger WHERE tgname LIKE '%append_only' ORDER BY tgname"
            ).fetchall()
            assert triggers == [("audit_entries_append_only", "O"), ("backups_append_only", "O")]
            [body] = conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'nsstuck_append_only'").fetchone() or ()
            assert "append-only" in body
    finally:
        db.dispose()


@pytest.mark.postgres
def test_a_group_role_shares_the_runtime_s_share_among_its_logins(roles: Roles) -> None:
    """NSSTUCK_DATABASE_RUNTIME_ROLE names a NOLOGIN group (two logins, for rotating passwords): the group
    is granted, each login acts with exactly its share, and a login that is also a member of the
    migration role is refused by name."""
    group = f"{roles.runtime_role}_group"
    _admin(roles, f"CREATE ROLE {group} NOLOGIN", f"GRANT {group} TO {roles.runtime_role}")
    try:
        done = _upgrade(roles, NSSTUCK_DATABASE_RUNTIME_ROLE=group)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == f"runtime role {group}: granted what nsstuck serve needs, and no more"
        assert _held(roles, group) == grants.RUNTIME_PRIVILEGES
        assert _held(roles) == grants.RUNTIME_PRIVILEGES  # the login, through the group
        db = Database(roles.runtime)
        try:
            append_entries(db, 1, request_id=make_request(db))
        finally:
            db.dispose()

        _admin(roles, f"GRANT {roles.owner} TO {roles.runtime_role}")
        _refused_in_one_line(
            _upgrade(roles, NSSTUCK_DATABASE_RUNTIME_ROLE=group),
            f"'{roles.runtime_role}', a member of the runtime role '{group}', is a member of the migration role",
        )
    finally:
        _admin(roles, f"DROP OWNED BY {group}", f"DROP ROLE {group}")  # its privileges here, then the role


# ---------------------------------------------------------------------------------------------
# roles that would get around it


@pytest.mark.postgres
def test_a_single_role_installation_moves_to_two_roles(roles: Roles) -> None:
    """Before: one role (the runtime's) owns the database and every table. `db upgrade` with a migration
    URL refuses that in one line and changes nothing; after docs/database-roles.md's REASSIGN OWNED it grants the
    runtime role its share, and the data is all there."""
    _admin(roles, f'ALTER DATABASE "{make_url(roles.admin).database}" OWNER TO {roles.runtime_role}')
    single = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": roles.runtime})  # as it was done
    assert single.returncode == 0, single.stderr
    assert single.stdout.count("\n") == 1  # no role, nothing granted
    db = Database(roles.runtime)
    try:
        append_entries(db, 2, request_id=make_request(db))
    finally:
        db.dispose()
    before = _held(roles)
    assert before["audit_entries"] >= {"DELETE", "TRUNCATE", "UPDATE"}  # the owner's rights

    refused = _upgrade(roles)
    _refused_in_one_line(
        refused,
        f"the runtime role '{roles.runtime_role}' owns the schema public (as the database's owner)",
        f"REASSIGN OWNED BY {roles.runtime_role} TO {roles.owner} in this database",
    )
    assert _held(roles) == before

    _admin(roles, f"REASSIGN OWNED BY {roles.runtime_role} TO {roles.owner}")
    moved = _upgrade(roles)
    assert moved.returncode == 0, moved.stderr
    assert _held(roles) == grants.RUNTIME_PRIVILEGES
    verify = run_nsstuck("audit", "verify", env={"NSSTUCK_DATABASE_URL": roles.runtime})
    assert verify.stdout.startswith("audit trail intact: 2 entries"), verify.stdout


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("member of the migration role", "is a member of the migration role"),
        ("superuser", "is a superuser, which no grant can limit"),
        ("no such role", "does not exist: create it first"),
        ("the migration role itself", "is the migration role itself"),
        ("pg_write_all_data", "may also DELETE, INSERT, UPDATE on alembic_version"),
        ("default privileges for PUBLIC", "may also DELETE on alembic_version"),
        ("owns a table", "the table audit_entries is owned by"),
    ],
)
def test_a_runtime_role_that_could_get_around_it_is_refused_and_nothing_changes(
    roles: Roles, case: str, says: str
) -> None:
    env: dict[str, str] = {}
    if case == "member of the migration role":
        _admin(roles, f"GRANT {roles.owner} TO {roles.runtime_role}")
    elif case == "superuser":
        env["NSSTUCK_DATABASE_RUNTIME_ROLE"] = str(make_url(roles.admin).username)
    elif case == "no such role":
        env["NSSTUCK_DATABASE_RUNTIME_ROLE"] = "nsstuck_nobody"
    elif case == "the migration role itself":
        env["NSSTUCK_DATABASE_RUNTIME_ROLE"] = roles.owner
    elif case == "pg_write_all_data":
        _admin(roles, f"GRANT pg_write_all_data TO {roles.runtime_role}")
    elif case == "default privileges for PUBLIC":  # every table the migration role makes, deletable by all
        _admin(roles, f"ALTER DEFAULT PRIVILEGES FOR ROLE {roles.owner} GRANT DELETE ON TABLES TO PUBLIC")
    elif case == "owns a table":
        _admin(
            roles,
            f"GRANT CREATE ON SCHEMA public TO {roles.runtime_role}",
            f"SET ROLE {roles.runtime_role}",
            "CREATE TABLE audit_entries (seq bigint)",
        )
    before = _tables(roles.admin)
    _refused_in_one_line(_upgrade(roles, **env), says)
    # one transaction: whether refused before migrating or after granting, no table was made
    assert _tables(roles.admin) == before
    assert "alembic_version" not in before


# ---------------------------------------------------------------------------------------------
# settings


def test_settings_that_cannot_work_are_refused_in_one_line(tmp_path: Path) -> None:
    runtime = f"sqlite:///{tmp_path / 'bot.db'}"
    cases = [
        (
            {"NSSTUCK_MIGRATION_DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}"},
            "NSSTUCK_MIGRATION_DATABASE_URL: only for PostgreSQL",
        ),
        ({"NSSTUCK_DATABASE_RUNTIME_ROLE": "nsstuck_runtime"}, "NSSTUCK_DATABASE_RUNTIME_ROLE: SQLite has no roles"),
        (
            {"NSSTUCK_DATABASE_RUNTIME_ROLE": "x; DROP TABLE backups"},
            "NSSTUCK_DATABASE_RUNTIME_ROLE: String should match",
        ),
        (
            {"NSSTUCK_MIGRATION_DATABASE_URL": "postgresql+psycopg://owner@127.0.0.1:1/nsstuck"},
            "NSSTUCK_DATABASE_URL: NSSTUCK_MIGRATION_DATABASE_URL is PostgreSQL but this is not",
        ),
        (
            {"NSSTUCK_MIGRATION_DATABASE_URL": "postgresql+psycopg://owner:pw@127.0.0.1:nope/nsstuck"},
            "NSSTUCK_MIGRATION_DATABASE_URL: not a valid SQLAlchemy URL",
        ),
        (
            {"NSSTUCK_MIGRATION_DATABASE_URL": "owner@127.0.0.1/nsstuck"},
            "NSSTUCK_MIGRATION_DATABASE_URL: expected a SQLAlchemy URL",
        ),
        (
            {
                "NSSTUCK_MIGRATION_DATABASE_URL": "postgresql+psycopg://owner@127.0.0.1:1/nsstuck",
                "NSSTUCK_DATABASE_URL": "postgresql+psycopg://127.0.0.1:1/nsstuck",
            },
            "NSSTUCK_DATABASE_URL: names no user",
        ),
    ]
    for env, says in cases:
        result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": runtime, **env})
        _refused_in_one_line(result, "config error: environment: " + says)
    assert list(tmp_path.iterdir()) == [], "no database was made"

    # one URL, as before: migrated, no role, nothing more said
    single = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": runtime})
    assert single.returncode == 0, single.stderr
    assert single.stdout == f"database {runtime} is at revision {migrating.head_revision()}\n"

    # an unreachable migration database: said with its URL, the password hidden
    unreachable = run_nsstuck(
        "db",
        "upgrade",
        env={
            "NSSTUCK_MIGRATION_DATABASE_URL": "postgresql+psycopg://owner:s3cret-pw@127.0.0.1:1/nsstuck",
            "NSSTUCK_DATABASE_URL": "postgresql+psycopg://app:other-pw@127.0.0.1:1/nsstuck",
        },
    )
    assert unreachable.returncode == 1
    assert re.match(
        r"nsstuck: cannot reach the database postgresql\+psycopg://owner:\*\*\*@127\.0\.0\.1:1/nsstuck: ",
        unreachable.stderr,
    )
    assert "s3cret-pw" not in unreachable.stderr + unreachable.stdout
    assert "other-pw" not in unreachable.stderr + unreachable.stdout


# ---------------------------------------------------------------------------------------------
# the bot, as the runtime role


@pytest.mark.postgres
def test_the_bot_works_as_the_runtime_role(
    roles: Roles, slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """Migrated as the migration role, the bot runs as the runtime role: a signed command (its signature
    recorded), a diagnosis, a request, an approval, a backup, the change, the audit trail; `history`
    and `audit verify` as the runtime role too. Nothing it does is refused (the signature store, which
    falls back to memory when the database refuses, included)."""
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, roles=roles) as flow:
        flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        assert flow.vote(request["id"], BOB).status == 200
        row = flow.wait_status(request["id"], "applied", "failed", "stale")
        assert row["status"] == "applied", row["status_reason"]
        assert flow.audit(request["id"]) == [
            "requested",
            "approved",
            "backed_up",
            "dry_run",
            "execution_started",
            "applied",
        ]
        log = flow.bot.log.read_text()
    for table in (
        "incidents",
        "diagnoses",
        "remediation_requests",
        "remediation_votes",
        "backups",
        "audit_entries",
        "seen_requests",
    ):
        [(count,)] = [tuple(r.values()) for r in flow.query(f"SELECT count(*) AS n FROM {table}")]
        assert count > 0, table
    assert not re.search(r"permission denied|InsufficientPrivilege|cannot record", log), log[-3000:]
    env = {"NSSTUCK_DATABASE_URL": roles.runtime}
    history = run_nsstuck("history", "--json", env=env)
    assert history.returncode == 0, history.stderr
    verify = run_nsstuck("audit", "verify", env=env)
    assert verify.stdout.startswith("audit trail intact: 6 entries"), (verify.stdout, verify.stderr)
