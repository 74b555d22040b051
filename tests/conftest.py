"""Shared pytest set-up.

Database tests take the `database_url` fixture and run twice: on SQLite (a file per test) and on
PostgreSQL (a database per test on the server that `scripts/pg-test-server` starts; its URL comes in
NSSTUCK_TEST_POSTGRES_URL). Without that variable the PostgreSQL half is skipped, unless
NSSTUCK_REQUIRE_POSTGRES=1 (as in CI and `make test`), where it fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import migrating
from bot.store.database import Database
from tests.pgdatabase import temporary_database

pytest_plugins = ["tests.fakes.kubeapi.pytest_plugin", "tests.fakes.slackapi.pytest_plugin"]

REPO = Path(__file__).resolve().parents[1]


def _postgres_admin_url() -> str | None:
    url = os.environ.get("NSSTUCK_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("NSSTUCK_REQUIRE_POSTGRES") == "1":
            pytest.fail("NSSTUCK_REQUIRE_POSTGRES=1 but NSSTUCK_TEST_POSTGRES_URL is not set")
        pytest.skip("no PostgreSQL server (run the suite through `make test`)")
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database, on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nsstuck.db'}"
        return
    admin = _postgres_admin_url()
    assert admin is not None
    with temporary_database(admin) as url:
        yield url


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """A migrated database, built the way production builds it: by running the migrations."""
    migrating.upgrade(database_url)
    db = Database(database_url)
    try:
        yield db
    finally:
        db.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """An empty PostgreSQL database (for tests that only make sense on PostgreSQL, such as replicas)."""
    admin = _postgres_admin_url()
    assert admin is not None
    with temporary_database(admin) as url:
        yield url
