"""Alembic owns the schema: it builds it from empty, tears it down, and matches the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from bot.store import migrating
from bot.store.models import Base
from tests._cli import run_nsstuck

TABLES = {"incidents", "diagnoses", "alembic_version"}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_db_upgrade_from_empty_then_down_to_base_and_up_again(database_url: str) -> None:
    result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr
    assert f"is at revision {migrating.head_revision()}" in result.stdout
    assert _tables(database_url) >= TABLES

    result = run_nsstuck("db", "current", env={"NSSTUCK_DATABASE_URL": database_url})
    assert result.returncode == 0, result.stdout

    migrating.downgrade(database_url, "base")
    assert _tables(database_url) <= {"alembic_version"}
    assert migrating.current_revision(database_url) is None

    migrating.upgrade(database_url)
    assert _tables(database_url) >= TABLES
    assert migrating.current_revision(database_url) == migrating.head_revision()


def test_db_current_says_when_not_at_head(database_url: str) -> None:
    result = run_nsstuck("db", "current", env={"NSSTUCK_DATABASE_URL": database_url})
    assert result.returncode == 1
    assert "current: none (empty database)" in result.stdout


def test_migrations_match_the_models(database_url: str) -> None:
    """Autogenerate finds nothing to do: the models and the migrations describe the same schema."""
    migrating.upgrade(database_url)
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_revision_files_are_dated() -> None:
    names = [p.name for p in (migrating.migrations_dir() / "versions").glob("*.py")]
    assert names
    for name in names:
        year, month, day = name.split("_")[:3]
        assert year.isdigit(), name
        assert len(year) == 4, name
        assert len(month) == 2, name
        assert len(day) == 2, name
