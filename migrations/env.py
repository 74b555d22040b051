"""Alembic environment for nsstuck.

The URL comes from the config object (set by `nsstuck db upgrade`) or, for developers running
`alembic` by hand, from NSSTUCK_DATABASE_URL.

With a runtime role (PostgreSQL, two roles: bot/store/grants.py), an upgrade checks the role before
migrating and grants it its share of every table after, in the migrations' own transaction: every
table a migration adds is granted by the upgrade that adds it, and a failed check changes nothing.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import pool

from bot.store import grants
from bot.store.database import make_engine
from bot.store.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("nsstuck_url") or config.get_main_option("sqlalchemy.url")
    return url or os.environ.get("NSSTUCK_DATABASE_URL", "sqlite:///nsstuck.db")


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _runtime_role() -> str | None:
    """The role to grant the runtime's share to: set by `nsstuck db upgrade`; for `alembic` by hand,
    $NSSTUCK_DATABASE_RUNTIME_ROLE."""
    if "nsstuck_runtime_role" in config.attributes:
        return config.attributes["nsstuck_runtime_role"]  # type: ignore[no-any-return]
    return os.environ.get("NSSTUCK_DATABASE_RUNTIME_ROLE") or None


def run_migrations_online() -> None:
    variable = config.attributes.get("nsstuck_url_variable", "NSSTUCK_DATABASE_URL")
    engine = make_engine(_url(), poolclass=pool.NullPool, variable=variable)
    role = _runtime_role()
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            if role and connection.dialect.name != "postgresql":
                raise grants.DatabaseRoleError("SQLite has no roles: there is no runtime role to grant anything to")
            with context.begin_transaction():
                if role:
                    grants.check_runtime_role(connection, role)
                context.run_migrations()
                if role:
                    grants.grant_runtime(connection, role)
                    grants.check_granted(connection, role)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
