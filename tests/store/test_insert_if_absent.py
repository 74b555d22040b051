"""Inserts that must tell whether they inserted: a vote (one per person) and a pending request (one per
remedy of a diagnosis). On PostgreSQL an `INSERT .. ON CONFLICT DO NOTHING` reports rowcount -1 through
psycopg, which once let a double click on Approve count twice; these run on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

from bot.domain.findings import Action, Remedy, Risk
from bot.remediation.requests import VoteKind, decide
from bot.store.database import Database
from bot.store.models import DiagnosisRun

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
REMEDY = Remedy(Action.REMOVE_FINALIZER, Risk.LOW, "Remove example.com/f from configmaps/m", finalizer="example.com/f")


def _request_values(database: Database, required: int = 3) -> dict[str, object]:
    with database.unit_of_work() as uow:
        run = DiagnosisRun(
            cluster="c1", namespace="ns", trigger="slack", requested_by="U0REQ", state="terminating", report={}
        )
        uow.session.add(run)
        uow.flush()
        diagnosis_id = run.id
    return {
        "diagnosis_id": diagnosis_id,
        "cluster": "c1",
        "namespace": "ns",
        "remedy_id": REMEDY.id,
        "action": REMEDY.action.value,
        "risk": REMEDY.risk.value,
        "description": REMEDY.description,
        "remedy": REMEDY.to_json(),
        "requested_by": "U0REQ",
        "expires_at": NOW + timedelta(hours=1),
        "required_approvals": required,
    }


def _file(database: Database, values: dict[str, object]) -> tuple[int, bool]:
    with database.unit_of_work() as uow:
        request, created = uow.requests.file(values)
        return request.id, created


def test_a_request_is_filed_once_and_the_second_filing_says_so(database: Database) -> None:
    values = _request_values(database)
    first_id, first_created = _file(database, values)
    second_id, second_created = _file(database, values)
    assert (first_created, second_created) == (True, False)
    assert first_id == second_id


def test_a_second_vote_by_the_same_person_is_not_recorded(database: Database) -> None:
    request_id, _ = _file(database, _request_values(database))
    results = []
    for user in ("U0ANN", "U0ANN", "U0BOB"):
        with database.unit_of_work() as uow:
            results.append(uow.requests.add_vote(request_id, user, "approve", NOW))
    assert results == [True, False, True]
    with database.unit_of_work() as uow:
        assert uow.requests.count_approvals(request_id) == 2


def test_concurrent_double_clicks_count_each_person_once(database: Database) -> None:
    """Four people click Approve twice each, all at once: two distinct approvals (the request needs 3),
    each audited once; every other click is a duplicate."""
    request_id, _ = _file(database, _request_values(database, required=3))
    users = ["U0ANN", "U0BOB"]
    start = threading.Barrier(4)
    kinds: list[VoteKind] = []
    lock = threading.Lock()

    def click(user: str) -> None:
        start.wait()
        vote = decide(
            database,
            request_id,
            user=user,
            approve=True,
            approvers=frozenset(users),
            now=NOW,
            execution_timeout=timedelta(minutes=5),
        )
        with lock:
            kinds.append(vote.kind)

    threads = [threading.Thread(target=click, args=(user,)) for user in users for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert Counter(kinds) == {VoteKind.APPROVED: 2, VoteKind.DUPLICATE: 2}
    with database.unit_of_work() as uow:
        events = Counter(entry.event for entry in uow.audit.for_request(request_id))
        assert uow.requests.count_approvals(request_id) == 2
    assert events["approved"] == 2


def test_request_signatures_are_first_seen_once(database: Database) -> None:
    """The replay gate's record (bot/slack/signing.py): of a batch, each signature not on record is new,
    one on record is a replay, and one that comes twice in the same batch is new once, then a replay;
    batches of one and of many alike (they are sent as parameters of one cached statement)."""
    with database.unit_of_work() as uow:
        assert uow.seen_requests.first_sightings([("v0=a", 1)]) == [True]
    with database.unit_of_work() as uow:
        assert uow.seen_requests.first_sightings([("v0=a", 1)]) == [False]
    with database.unit_of_work() as uow:
        batch = [("v0=b", 2), ("v0=a", 1), ("v0=c", 3), ("v0=b", 2)]
        assert uow.seen_requests.first_sightings(batch) == [True, False, True, False]
    with database.unit_of_work() as uow:
        assert uow.seen_requests.first_sightings([("v0=c", 3), ("v0=d", 4)]) == [False, True]
        assert uow.seen_requests.first_sightings([]) == []
