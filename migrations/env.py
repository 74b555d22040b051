"""Alembic environment for nsstuck.

The URL comes from the config object (set by `nsstuck db upgrade`) or, for developers running
`alembic` by hand, from NSSTUCK_DATABASE_URL.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import pool

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


def run_migrations_online() -> None:
    engine = make_engine(_url(), poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
