"""Schema migrations through Alembic's API (`nsstuck db upgrade`)."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from bot.errors import ConfigError, PermanentError
from bot.store.database import make_engine, redact_url

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


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("file_template", FILE_TEMPLATE)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["nsstuck_url"] = url
    return config


def _run(action: str, url: str, revision: str) -> None:
    config = alembic_config(url)
    try:
        if action == "upgrade":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)
    except OperationalError as e:
        raise PermanentError(f"cannot reach the database {redact_url(url)}: {_first_line(e)}") from None
    except SQLAlchemyError as e:
        raise PermanentError(f"migration failed on {redact_url(url)}: {_first_line(e)}") from None


def upgrade(url: str, revision: str = "head") -> None:
    _run("upgrade", url, revision)


def downgrade(url: str, revision: str) -> None:
    _run("downgrade", url, revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except OperationalError as e:
        raise PermanentError(f"cannot reach the database {redact_url(url)}: {_first_line(e)}") from None
    finally:
        engine.dispose()


def _first_line(error: SQLAlchemyError) -> str:
    text = str(getattr(error, "orig", None) or error)
    return text.strip().splitlines()[0] if text.strip() else error.__class__.__name__
