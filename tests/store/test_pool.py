"""The bot's threads that use the database at once (Slack's requests, the diagnosis and posting
workers: a dozen or more under load) keep their PostgreSQL connections. Past the pool, SQLAlchemy
opens a connection for a checkout and closes it afterwards, and on PostgreSQL each one is a new
backend process, forked and logged in on the server's CPU: under the load benchmark that took a
fifth of a core from the bot and stretched its acknowledgements (bench/load.py). Past 15 at once
(SQLAlchemy's default pool and overflow), a thread even waited for a free connection."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event, text

from bot.store.database import Database

THREADS, ROUNDS = 12, 10


@pytest.mark.postgres
def test_twelve_threads_at_once_reuse_their_connections(postgres_url: str) -> None:
    db = Database(postgres_url)
    opened: list[object] = []
    event.listen(db.engine, "connect", lambda connection, _record: opened.append(connection))
    together = threading.Barrier(THREADS)

    def use() -> None:
        for _ in range(ROUNDS):
            together.wait(timeout=30)  # all of them hold a connection at the same moment
            with db.unit_of_work() as uow:
                uow.session.execute(text("SELECT pg_sleep(0.01)"))
                together.wait(timeout=30)

    threads = [threading.Thread(target=use) for _ in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert THREADS <= len(opened) <= THREADS + 2  # a connection each, opened once (SQLAlchemy's default pool: 75)
    finally:
        db.dispose()
