"""Migrated databases for the tests, migrated once per test process and copied for each test.

Running every migration costs most of a second; a test that needs a migrated database and is not about
the migrations gets a copy of one that this process migrated once (`migrated(url)`), which is the same
schema to the byte: on SQLite a page-by-page copy of the template file (sqlite3's backup API), on
PostgreSQL the empty throw-away database of tests/pgdatabase.py (`t_...`) dropped and created
again from a template database (`CREATE DATABASE ... TEMPLATE`); any other database is migrated.
The migrations themselves are still run by the template, by tests/store/test_migrations.py, by the
runtime-role tests (conftest's `postgresql-runtime`), and by every bot and CLI that runs
`nsstuck db upgrade`.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
import uuid
from contextlib import closing
from pathlib import Path

import psycopg
from sqlalchemy import make_url

from bot.store import migrating

_lock = threading.Lock()
_sqlite_templates: dict[str, Path] = {}  # "sqlite" -> the migrated template file of this process
_postgres_templates: dict[str, str] = {}  # admin DSN -> template database name
_made: list[Path] = []


def _admin_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)


def _sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def _template_for_sqlite() -> Path:
    with _lock:
        path = _sqlite_templates.get("sqlite")
        if path is None:
            folder = Path(tempfile.mkdtemp(prefix="nsstuck-template-"))
            _made.append(folder)
            path = folder / "migrated.db"
            migrating.upgrade(f"sqlite:///{path}")
            _sqlite_templates["sqlite"] = path
        return path


def _template_for_postgres(url: str) -> str:
    dsn = _admin_dsn(url)
    with _lock:
        name = _postgres_templates.get(dsn)
        if name is None:
            name = f"template_{uuid.uuid4().hex[:16]}"
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            migrating.upgrade(make_url(url).set(database=name).render_as_string(hide_password=False))
            _postgres_templates[dsn] = name
        return name


def _empty(url: str) -> bool:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchone()
    return row is not None and row[0] == 0


def migrated(url: str) -> None:
    """Bring the empty database at `url` to the head revision, as `migrating.upgrade(url)` does."""
    path = _sqlite_path(url)
    if path is not None:
        if path.exists() and path.stat().st_size > 0:
            migrating.upgrade(url)  # not empty: not ours to replace
            return
        template = _template_for_sqlite()
        with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as target:
            source.backup(target)
        return
    name = make_url(url).database or ""
    if make_url(url).get_backend_name() != "postgresql" or not name.startswith("t_") or not _empty(url):
        migrating.upgrade(url)  # not a throw-away database of tests/pgdatabase.py, or not empty
        return
    template = _template_for_postgres(url)
    with psycopg.connect(_admin_dsn(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def clean_up() -> None:
    """Drop the templates this process made (at the end of the session)."""
    with _lock:
        for dsn, name in _postgres_templates.items():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except psycopg.Error:
                pass  # the server may be gone already; it is a throw-away one
        _postgres_templates.clear()
        for folder in _made:
            shutil.rmtree(folder, ignore_errors=True)
        _made.clear()
        _sqlite_templates.clear()
