"""Schema migrations through Alembic's API (`nsstuck db upgrade`).

`db upgrade`, `db downgrade` and `db current` use NSSTUCK_MIGRATION_DATABASE_URL when it is set (the
role that owns the schema), otherwise NSSTUCK_DATABASE_URL; an upgrade with a runtime role grants it
its share (bot/store/grants.py). `migration_target` works out which URL and which role.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from bot.errors import ConfigError, PermanentError
from bot.store.database import first_line, make_engine, redact_url, url_backend, url_username

RUNTIME_URL = "NSSTUCK_DATABASE_URL"
MIGRATION_URL = "NSSTUCK_MIGRATION_DATABASE_URL"
RUNTIME_ROLE = "NSSTUCK_DATABASE_RUNTIME_ROLE"

FILE_TEMPLATE = "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s"


# where a wheel puts its copy of migrations/, below the installation prefix (pyproject.toml, data-files)
INSTALLED_MIGRATIONS = "share/nsstuck/migrations"


def migrations_dir() -> Path:
    """Where the Alembic environment lives: $NSSTUCK_MIGRATIONS_DIR; in a checkout (or an editable
    install), `migrations/` beside `bot/`; in an installed wheel (the container image), the copy the
    wheel installed under its prefix."""
    override = os.environ.get("NSSTUCK_MIGRATIONS_DIR")
    checkout = Path(__file__).resolve().parents[2]
    if override:
        path = Path(override)
    elif (checkout / "alembic.ini").is_file() and (checkout / "migrations" / "env.py").is_file():
        path = checkout / "migrations"
    else:
        path = _installed_migrations() or checkout / "migrations"
    if not (path / "env.py").is_file():
        raise ConfigError("environment", "NSSTUCK_MIGRATIONS_DIR", f"no Alembic environment (env.py) in {path}")
    return path


def _installed_migrations() -> Path | None:
    """The migrations a wheel of nsstuck installed, wherever its prefix is (venv, --user, --prefix)."""
    try:
        distribution = metadata.distribution("nsstuck")
    except metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        if file.as_posix().endswith(f"{INSTALLED_MIGRATIONS}/env.py"):
            return Path(str(distribution.locate_file(file))).resolve().parent
    return None


@dataclass(frozen=True)
class MigrationTarget:
    """Where the `db` commands work: the URL, the setting it came from, and the role an upgrade grants
    the runtime's share to (None: one role does everything, as on SQLite)."""

    url: str
    variable: str
    runtime_role: str | None


def migration_database(runtime_url: str, migration_url: str | None) -> MigrationTarget:
    """Where `db downgrade` and `db current` work (no role: they grant nothing): the migration URL when
    given (PostgreSQL only), else the runtime URL."""
    if migration_url is None:
        return MigrationTarget(runtime_url, RUNTIME_URL, None)
    if url_backend(migration_url, MIGRATION_URL) != "postgresql":
        raise ConfigError(
            "environment",
            MIGRATION_URL,
            "only for PostgreSQL (SQLite has no roles): leave it unset, and db upgrade migrates NSSTUCK_DATABASE_URL",
        )
    return MigrationTarget(migration_url, MIGRATION_URL, None)


def migration_target(runtime_url: str, migration_url: str | None, runtime_role: str | None) -> MigrationTarget:
    """Where `db upgrade` works (see `migration_database`), and the role it grants the runtime's share to:
    the runtime role when given, else (with a migration URL) the runtime URL's user, unless that is the
    migration URL's user too (one role over two connections, e.g. migrations bypassing a pooler).
    ConfigError, naming the setting, for a combination that cannot work."""
    target = migration_database(runtime_url, migration_url)
    if migration_url is None:
        if runtime_role and url_backend(runtime_url) != "postgresql":
            raise ConfigError("environment", RUNTIME_ROLE, "SQLite has no roles: leave it unset")
        return MigrationTarget(target.url, target.variable, runtime_role)
    if runtime_role:
        return MigrationTarget(migration_url, MIGRATION_URL, runtime_role)
    if url_backend(runtime_url) != "postgresql":
        raise ConfigError(
            "environment",
            RUNTIME_URL,
            "NSSTUCK_MIGRATION_DATABASE_URL is PostgreSQL but this is not: give the runtime's URL (its user is "
            "granted the runtime's share of the tables), or name that role in NSSTUCK_DATABASE_RUNTIME_ROLE",
        )
    user = url_username(runtime_url)
    if user is None:
        raise ConfigError(
            "environment",
            RUNTIME_URL,
            "names no user, so the role to grant the runtime's share to is unknown: "
            "add the user, or name the role in NSSTUCK_DATABASE_RUNTIME_ROLE",
        )
    same = user == url_username(migration_url, MIGRATION_URL)
    return MigrationTarget(migration_url, MIGRATION_URL, None if same else user)


def alembic_config(url: str, *, variable: str = RUNTIME_URL, runtime_role: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("file_template", FILE_TEMPLATE)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["nsstuck_url"] = url
    config.attributes["nsstuck_url_variable"] = variable
    config.attributes["nsstuck_runtime_role"] = runtime_role
    return config


def _run(action: str, url: str, revision: str, variable: str, runtime_role: str | None) -> None:
    config = alembic_config(url, variable=variable, runtime_role=runtime_role)
    try:
        if action == "upgrade":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)
    except OperationalError as e:
        raise PermanentError(f"cannot reach the database {redact_url(url)}: {first_line(e)}") from None
    except SQLAlchemyError as e:
        raise PermanentError(f"migration failed on {redact_url(url)}: {first_line(e)}") from None


def upgrade(url: str, revision: str = "head", *, variable: str = RUNTIME_URL, runtime_role: str | None = None) -> None:
    """Migrate up to `revision`; with `runtime_role` (PostgreSQL), check it first and grant it its share after,
    in the same transaction (a refusal is a DatabaseRoleError, and nothing changed)."""
    _run("upgrade", url, revision, variable, runtime_role)


def downgrade(url: str, revision: str, *, variable: str = RUNTIME_URL) -> None:
    """Migrate down to `revision`. The runtime role keeps what it has on the tables that stay; the older
    version's own `db upgrade` (the chart runs it before its pods) grants its share."""
    _run("downgrade", url, revision, variable, None)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(url: str, *, variable: str = RUNTIME_URL) -> str | None:
    engine = make_engine(url, variable=variable)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except OperationalError as e:
        raise PermanentError(f"cannot reach the database {redact_url(url)}: {first_line(e)}") from None
    finally:
        engine.dispose()
