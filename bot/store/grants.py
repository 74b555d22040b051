"""Two database roles on PostgreSQL: the migration role owns the schema, the runtime role gets its share.

`nsstuck db upgrade` runs as the migration role (NSSTUCK_MIGRATION_DATABASE_URL), which creates the
tables and so owns them. Right after migrating, in the same transaction, it grants the runtime role
(the user of NSSTUCK_DATABASE_URL, or NSSTUCK_DATABASE_RUNTIME_ROLE) exactly `RUNTIME_PRIVILEGES`:
what the code does to each table, and no more. Every upgrade grants them again (REVOKE ALL, then
GRANT), so a table a later migration adds is granted as soon as it exists, a table with no entry
here stops the upgrade, and a role that was given more by hand is brought back to its share.

What the runtime role is refused is the point: no UPDATE, DELETE or TRUNCATE on the append-only
`audit_entries` and `backups` (row triggers would refuse UPDATE and DELETE, but they do not fire on
TRUNCATE), only UPDATE on `audit_head`, and no ownership of anything, so no DROP TRIGGER, ALTER TABLE
... DISABLE TRIGGER or DROP TABLE. Before migrating, `check_runtime_role` refuses a runtime role (or a
member of it: a group's logins act with its rights) that would get around that: a superuser, the
migration role or a member of it, the owner of the schema (who may drop the tables in it), or the owner
of a table already there; after granting, `check_granted` refuses one that PostgreSQL says may still do
more (through PUBLIC, default privileges, pg_write_all_data...). Either way the upgrade's transaction
is rolled back: nothing changed.

SQLite has no roles: there, one URL does everything, as with a single PostgreSQL URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, text

from bot.errors import UserError
from bot.store.models import Base

SELECT, INSERT, UPDATE, DELETE = "SELECT", "INSERT", "UPDATE", "DELETE"
# every privilege a table has (PostgreSQL 15; MAINTAIN, of 17, is granted by no one here either)
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")

# What the runtime role may do to each table: what bot/store does to it (checked against a running
# bot in tests/store/test_database_roles.py). A new table needs its line here, or `db upgrade` with
# two roles stops at it (and tests/store/test_database_roles.py fails on every backend).
RUNTIME_PRIVILEGES: Mapping[str, frozenset[str]] = {
    "alembic_version": frozenset({SELECT}),  # serve and the commands refuse a schema not at head
    "incidents": frozenset({SELECT, INSERT, UPDATE}),
    "diagnoses": frozenset({SELECT, INSERT, UPDATE}),  # pruning a snapshot sets it to NULL: an UPDATE
    "remediation_requests": frozenset({SELECT, INSERT, UPDATE}),
    "remediation_votes": frozenset({SELECT, INSERT}),
    "backups": frozenset({SELECT, INSERT}),  # append-only
    "audit_entries": frozenset({SELECT, INSERT}),  # append-only
    "audit_head": frozenset({SELECT, UPDATE}),  # its one row moves on with each entry
    "digest_runs": frozenset({SELECT, INSERT, UPDATE}),
    "seen_requests": frozenset({SELECT, INSERT, DELETE}),  # signatures past the replay window go
    "watch_rounds": frozenset({SELECT, INSERT, UPDATE, DELETE}),  # claimed, finished, pruned after a day
    "watched_clusters": frozenset({SELECT, INSERT, UPDATE}),  # whether each watched cluster answers
}

ROLES_SECTION = "docs/database-roles.md"


class DatabaseRoleError(UserError):
    """The runtime role cannot be given its share safely (or at all); nothing was changed."""


def nsstuck_tables() -> list[str]:
    """The tables nsstuck's schema has at head (alembic's own included)."""
    return sorted({*Base.metadata.tables, "alembic_version"})


def _existing(connection: Connection, tables: Iterable[str]) -> list[str]:
    """Those of `tables` that exist in the current schema."""
    found = connection.execute(
        text(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
            "AND c.relkind IN ('r', 'p') AND c.relname = ANY(:names)"
        ),
        {"names": list(tables)},
    ).scalars()
    return sorted(found)


def acting_as(connection: Connection, role: str) -> list[str]:
    """`role` and every role that acts with its rights (its members, a group's logins), superusers and
    the migration role aside: what the runtime may log in as."""
    members = connection.execute(
        text(
            "SELECT rolname FROM pg_roles WHERE pg_has_role(oid, :role, 'MEMBER') AND rolname <> :role "
            "AND NOT rolsuper AND rolname <> current_user ORDER BY rolname"
        ),
        {"role": role},
    ).scalars()
    return [role, *members]


def check_runtime_role(connection: Connection, role: str) -> None:
    """Raise DatabaseRoleError unless `role` (and each of its members) can be given its share and nothing
    more (see the module)."""
    exists = connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :role"), {"role": role}).one_or_none()
    if exists is None:
        raise DatabaseRoleError(f"the runtime role {role!r} does not exist: create it first ({ROLES_SECTION})")
    for acting in acting_as(connection, role):
        _check_one(connection, acting, _who(role, acting))


def _who(role: str, acting: str) -> str:
    return f"the runtime role {role!r}" if acting == role else f"{acting!r}, a member of the runtime role {role!r},"


def _check_one(connection: Connection, role: str, who: str) -> None:
    row = connection.execute(
        text("SELECT rolsuper, rolname = current_user AS me FROM pg_roles WHERE rolname = :role"), {"role": role}
    ).one()
    if row.rolsuper:
        raise DatabaseRoleError(f"{who} is a superuser, which no grant can limit")
    me = str(connection.execute(text("SELECT current_user")).scalar_one())
    if row.me:
        raise DatabaseRoleError(f"{who} is the migration role itself: the runtime needs a role of its own")
    if connection.execute(text("SELECT pg_has_role(:role, current_user, 'MEMBER')"), {"role": role}).scalar_one():
        raise DatabaseRoleError(
            f"{who} is a member of the migration role {me!r}, so it has the owner's rights: "
            f"REVOKE {_quoted(connection, me)} FROM {_quoted(connection, role)}"
        )
    schema = connection.execute(
        text(
            "SELECT nspname, nspowner::regrole::text AS owner, pg_has_role(:role, nspowner, 'MEMBER') AS owns "
            "FROM pg_namespace WHERE oid = current_schema()::regnamespace"
        ),
        {"role": role},
    ).one()
    if schema.owns:
        if schema.owner in ("pg_database_owner", role):
            through = "as the database's owner" if schema.owner == "pg_database_owner" else "itself"
            fix = f"REASSIGN OWNED BY {_quoted(connection, role)} TO {_quoted(connection, me)} in this database"
        else:
            through = f"as a member of {schema.owner}"
            fix = f"REVOKE {_quoted(connection, schema.owner)} FROM {_quoted(connection, role)}"
        raise DatabaseRoleError(
            f"{who} owns the schema {schema.nspname} ({through}), and a schema's owner may drop the tables "
            f"in it: as an administrator, {fix} ({ROLES_SECTION})"
        )
    for table in _existing(connection, nsstuck_tables()):
        owner = connection.execute(
            text(
                "SELECT relowner::regrole::text AS name, pg_has_role(:role, relowner, 'MEMBER') AS runtime, "
                "pg_has_role(current_user, relowner, 'USAGE') AS migration "
                "FROM pg_class WHERE oid = quote_ident(:table)::regclass"
            ),
            {"role": role, "table": table},
        ).one()
        if owner.runtime or not owner.migration:
            whose = "the runtime's" if owner.runtime else f"not the migration role {me!r}"
            raise DatabaseRoleError(
                f"the table {table} is owned by {owner.name} ({whose}): as an administrator, "
                f"REASSIGN OWNED BY {_quoted(connection, owner.name)} TO {_quoted(connection, me)} "
                f"in this database ({ROLES_SECTION})"
            )


def grant_runtime(connection: Connection, role: str) -> list[str]:
    """Give `role` exactly its share of every nsstuck table there is; the tables, in order."""
    tables = _existing(connection, nsstuck_tables())
    undeclared = [t for t in tables if t not in RUNTIME_PRIVILEGES]
    if undeclared:
        raise DatabaseRoleError(
            f"the table {undeclared[0]} has no runtime privileges declared in bot/store/grants.py (RUNTIME_PRIVILEGES)"
        )
    grantee = _quoted(connection, role)
    for table in tables:
        privileges = RUNTIME_PRIVILEGES[table]
        name = _quoted(connection, table)
        connection.execute(text(f"REVOKE ALL ON TABLE {name} FROM {grantee}"))
        connection.execute(text(f"GRANT {', '.join(sorted(privileges))} ON TABLE {name} TO {grantee}"))
        for sequence in _sequences(connection, table):
            connection.execute(text(f"REVOKE ALL ON SEQUENCE {sequence} FROM {grantee}"))
            if INSERT in privileges:  # nextval() for the id of a new row
                connection.execute(text(f"GRANT USAGE ON SEQUENCE {sequence} TO {grantee}"))
    return tables


def check_granted(connection: Connection, role: str) -> None:
    """Raise DatabaseRoleError unless PostgreSQL says `role`, and each of its members, may do exactly its
    share to each table: more comes from elsewhere (PUBLIC, default privileges, a role it is a member of
    such as pg_write_all_data, another grantor); less, from a member that does not inherit."""
    for acting in acting_as(connection, role):
        for table, held in privileges_of(connection, acting).items():
            declared = RUNTIME_PRIVILEGES[table]
            if held != declared:
                more, less = sorted(held - declared), sorted(declared - held)
                said = f"may also {', '.join(more)}" if more else f"may not {', '.join(less)}"
                raise DatabaseRoleError(
                    f"after the grants {_who(role, acting)} {said} on {table} (through PUBLIC, a role it is a "
                    f"member of, a grant by another role, or NOINHERIT): set that right ({ROLES_SECTION})"
                )


def privileges_of(connection: Connection, role: str) -> dict[str, frozenset[str]]:
    """What `role` may do to each nsstuck table there is, as PostgreSQL answers (owner's rights included)."""
    held: dict[str, frozenset[str]] = {}
    for table in _existing(connection, nsstuck_tables()):
        held[table] = frozenset(
            privilege
            for privilege in TABLE_PRIVILEGES
            if connection.execute(
                text("SELECT has_table_privilege(:role, quote_ident(:table)::regclass, :privilege)"),
                {"role": role, "table": table, "privilege": privilege},
            ).scalar_one()
        )
    return held


def _sequences(connection: Connection, table: str) -> list[str]:
    """The sequences that belong to the table's columns (serial and identity), as quoted names."""
    return list(
        connection.execute(
            text(
                "SELECT s.oid::regclass::text FROM pg_class s JOIN pg_depend d ON d.objid = s.oid "
                "AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass "
                "WHERE s.relkind = 'S' AND d.deptype IN ('a', 'i') AND d.refobjid = quote_ident(:table)::regclass"
            ),
            {"table": table},
        ).scalars()
    )


def _quoted(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))
