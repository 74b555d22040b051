"""Whether a database's schema is the one this release writes, without loading Alembic.

`serve` and every command that opens the database refuse a schema that is not at head. Asking Alembic
costs its import (about 0.3 s, the largest part of starting the bot) to read one row; this reads that
row itself. `HEAD_REVISION` is the newest migration's revision id: tests/store/test_schema_version.py
fails when a migration is added and it is not moved with it, and compares this reading with Alembic's
(`bot.store.migrating.current_revision`, which `db current` and `db upgrade` still use).
"""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError

from bot.errors import PermanentError
from bot.store.database import first_line, make_engine, redact_url

HEAD_REVISION = "0008"
VERSION_TABLE = "alembic_version"  # Alembic's default, which migrations/env.py keeps
_READ = text("SELECT version_num FROM alembic_version")


def current_revision(url: str, *, variable: str = "NSSTUCK_DATABASE_URL") -> str | None:
    """The revision the database is at (None for a database never migrated); several heads are
    returned joined by commas, which is never HEAD_REVISION."""
    engine = make_engine(url, variable=variable)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table(VERSION_TABLE):
                return None
            versions = sorted(str(v) for v in connection.execute(_READ).scalars())
    except OperationalError as e:
        raise PermanentError(f"cannot reach the database {redact_url(url)}: {first_line(e)}") from None
    finally:
        engine.dispose()
    return ",".join(versions) or None
