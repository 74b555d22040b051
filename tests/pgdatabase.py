"""A throw-away PostgreSQL database on the test server, for the tests and the benchmarks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from sqlalchemy import make_url


@contextmanager
def temporary_database(admin_url: str, *, prefix: str = "t_") -> Iterator[str]:
    """Create an empty database next to `admin_url`, yield its URL, drop it (forcibly) afterwards."""
    admin = make_url(admin_url)
    name = f"{prefix}{uuid.uuid4().hex[:16]}"
    dsn = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class Roles:
    """A database with the two roles of README "Database roles": `migration` (the owner's URL, for
    `db upgrade`), `runtime` (the bot's), and `admin` (the test server's superuser, for looking and
    tampering); `owner` and `runtime_role` are the role names."""

    admin: str
    migration: str
    runtime: str
    owner: str
    runtime_role: str


@contextmanager
def database_with_roles(admin_url: str, *, prefix: str = "t_") -> Iterator[Roles]:
    """An empty database owned by a fresh migration role, beside a fresh runtime role that owns nothing:
    what an operator sets up by hand (README "Database roles"). Both log in without a password (the
    test server trusts them). The roles are dropped with the database."""
    admin = make_url(admin_url)
    dsn = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    suffix = uuid.uuid4().hex[:10]
    owner, runtime = f"nsstuck_owner_{suffix}", f"nsstuck_runtime_{suffix}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {owner} LOGIN")
        conn.execute(f"CREATE ROLE {runtime} LOGIN")
    try:
        with temporary_database(admin_url, prefix=prefix) as url:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{make_url(url).database}" OWNER TO {owner}')
            as_role = make_url(url)
            yield Roles(
                admin=url,
                migration=as_role.set(username=owner, password=None).render_as_string(hide_password=False),
                runtime=as_role.set(username=runtime, password=None).render_as_string(hide_password=False),
                owner=owner,
                runtime_role=runtime,
            )
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {runtime}")
            conn.execute(f"DROP ROLE IF EXISTS {owner}")
