"""On SQLite the bot's units of work take turns within the process (bot/store/database.py): one
writer at a time is all SQLite allows, and a connection that finds the file locked sleeps before it
tries again, so under load a short write (the replay record of a click, in its acknowledgement) waited
many times its length. The latency is the load benchmark's business (bench/load.py); what is checked
here is what taking turns must also give: a unit of work is one transaction even where pysqlite
would not make it one (it begins a transaction at the first write, so a read before it was outside),
nested units of work in one thread do not deadlock, and a failed one lets the next one in."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.store.database import Database

THREADS, ROUNDS = 4, 25


@pytest.fixture
def counter(tmp_path: Path) -> Iterator[Database]:
    db = Database(f"sqlite:///{tmp_path / 'turns.db'}")
    with db.engine.begin() as connection:
        connection.execute(text("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)"))
        connection.execute(text("INSERT INTO counter VALUES (1, 0)"))
    yield db
    db.dispose()


def _value(db: Database) -> int:
    with db.unit_of_work() as uow:
        return int(uow.session.execute(text("SELECT value FROM counter WHERE id = 1")).scalar_one())


def test_a_read_then_a_write_in_one_unit_of_work_loses_no_update(counter: Database) -> None:
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def add_one_at_a_time() -> None:
        start.wait()
        for _ in range(ROUNDS):
            try:
                with counter.unit_of_work() as uow:
                    seen = uow.session.execute(text("SELECT value FROM counter WHERE id = 1")).scalar_one()
                    threading.Event().wait(0.001)  # another thread would read the same value now
                    uow.session.execute(text("UPDATE counter SET value = :v WHERE id = 1"), {"v": seen + 1})
            except BaseException as e:  # reported below, whatever it is
                errors.append(e)

    threads = [threading.Thread(target=add_one_at_a_time) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert _value(counter) == THREADS * ROUNDS  # without the turns: about a quarter of it


def test_a_unit_of_work_inside_another_in_the_same_thread_does_not_wait_for_itself(counter: Database) -> None:
    done = threading.Event()

    def nested() -> None:
        with counter.unit_of_work() as outer:
            outer.session.execute(text("SELECT value FROM counter")).all()
            assert _value(counter) == 0  # a read in a unit of work of its own, inside the first
        done.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    assert done.wait(10), "a nested unit of work waited for the one around it"


def test_a_unit_of_work_that_fails_lets_the_next_one_in(counter: Database) -> None:
    with pytest.raises(RuntimeError), counter.unit_of_work() as uow:
        uow.session.execute(text("UPDATE counter SET value = 41 WHERE id = 1"))
        raise RuntimeError("the block failed")
    finished = threading.Event()

    def write() -> None:
        with counter.unit_of_work() as uow:
            uow.session.execute(text("UPDATE counter SET value = value + 1 WHERE id = 1"))
        finished.set()

    threading.Thread(target=write, daemon=True).start()
    assert finished.wait(10), "the failed unit of work kept its turn"
    assert _value(counter) == 1  # the failed one rolled back
