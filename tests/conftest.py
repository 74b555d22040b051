"""Shared pytest set-up.

Database tests take the `database_url` fixture and run twice: on SQLite (a file per test) and on
PostgreSQL (a database per test on the server that `scripts/pg-test-server` starts; its URL comes in
NSSTUCK_TEST_POSTGRES_URL). Without that variable the PostgreSQL half is skipped, unless
NSSTUCK_REQUIRE_POSTGRES=1 (as in CI and `make test`), where it fails instead.

Tests that take the `database` fixture (a migrated database, through the store) run a third time,
`postgresql-runtime`: migrated by a migration role that owns the database, and worked through as the
runtime role it granted its share to (README "Database roles"), so that every store test also shows
the runtime role may do what the store does. `database_url` is then the server's superuser's URL of
the same database, for looking (and tampering) from outside.
"""

from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import migrating
from bot.store.database import Database
from tests._migrated import clean_up, migrated
from tests.pgdatabase import Roles, database_with_roles, temporary_database

# pytest keeps the test modules it rewrites (for its assertions) in __pycache__ only where bytecode may be
# written; with PYTHONDONTWRITEBYTECODE set (this machine sets it) every process of a run would rewrite
# all 250 modules again (a third of the time of a collection). Here it may: the files are pytest's own.
sys.dont_write_bytecode = False

pytest_plugins = [
    "tests.fakes.kubeapi.pytest_plugin",
    "tests.fakes.slackapi.pytest_plugin",
    "tests._scheduling",
    "tests._untraced",
    "tests._combinations",
]

REPO = Path(__file__).resolve().parents[1]

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres, id="postgresql"),
]
RUNTIME_ROLE = pytest.param("postgresql-runtime", marks=pytest.mark.postgres, id="postgresql-runtime")
ROLES = pytest.StashKey[Roles]()


def _postgres_admin_url() -> str | None:
    url = os.environ.get("NSSTUCK_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("NSSTUCK_REQUIRE_POSTGRES") == "1":
            pytest.fail("NSSTUCK_REQUIRE_POSTGRES=1 but NSSTUCK_TEST_POSTGRES_URL is not set")
        pytest.skip("no PostgreSQL server (run the suite through `make test`)")
    return url


def pytest_configure(config: pytest.Config) -> None:
    """Compile the bytecode of bot/ and tests/ once, in the controlling process: the CLI, the bot and the
    emulators the tests start would otherwise compile every module again, each time, wherever
    PYTHONDONTWRITEBYTECODE is set (it only stops writing; the compiled files are still read)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller compiled them
    for folder in ("bot", "tests"):
        compileall.compile_dir(REPO / folder, quiet=1, workers=1)


def pytest_sessionfinish(session: pytest.Session) -> None:
    clean_up()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`database_url`'s backends: the two, and for tests that take `database` the runtime role's too."""
    if "database_url" in metafunc.fixturenames:
        backends = [*BACKENDS, RUNTIME_ROLE] if "database" in metafunc.fixturenames else BACKENDS
        metafunc.parametrize("database_url", backends, indirect=True)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database, on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nsstuck.db'}"
        return
    admin = _postgres_admin_url()
    assert admin is not None
    if request.param == "postgresql-runtime":
        with database_with_roles(admin) as roles:
            request.node.stash[ROLES] = roles
            yield roles.admin
        return
    with temporary_database(admin) as url:
        yield url


@pytest.fixture
def database(request: pytest.FixtureRequest, database_url: str) -> Iterator[Database]:
    """A migrated database: a copy of one this process migrated once (tests/_migrated.py), or (on
    `postgresql-runtime`, as the migration role, and used as the runtime role)."""
    roles = request.node.stash.get(ROLES, None)
    if roles is None:
        migrated(database_url)  # the migrations, run once per process into a template (tests/_migrated.py)
        db = Database(database_url)
    else:
        migrating.upgrade(roles.migration, variable=migrating.MIGRATION_URL, runtime_role=roles.runtime_role)
        db = Database(roles.runtime)
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
