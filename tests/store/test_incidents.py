"""One incident per namespace UID, whoever asks and however many at once, on both databases."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from bot.store.database import Database

SINCE = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def _open(database: Database, uid: str = "uid-1") -> int:
    with database.unit_of_work() as uow:
        incident = uow.incidents.open_for(
            cluster="prod-eu", namespace="istio-system", namespace_uid=uid, terminating_since=SINCE, cause="x"
        )
        return incident.id


def test_concurrent_callers_converge_on_one_incident(database: Database) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(lambda _: _open(database), range(16)))
    assert len(set(ids)) == 1
    with database.unit_of_work() as uow:
        assert len(uow.incidents.open_incidents("prod-eu")) == 1


def test_a_recreated_namespace_is_a_new_incident(database: Database) -> None:
    assert _open(database, "uid-1") != _open(database, "uid-2")


def test_the_first_thread_attached_wins(database: Database) -> None:
    incident_id = _open(database)
    with database.unit_of_work() as uow:
        assert uow.incidents.claim_thread(incident_id, "C1", "111.1") == ("C1", "111.1")
    with database.unit_of_work() as uow:
        assert uow.incidents.claim_thread(incident_id, "C1", "222.2") == ("C1", "111.1")
