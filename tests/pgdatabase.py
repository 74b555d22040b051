"""A throw-away PostgreSQL database on the test server, for the tests and the benchmarks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

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
