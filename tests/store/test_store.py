"""The store on SQLite and PostgreSQL: units of work, the incident key, time zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.exc import IntegrityError, StatementError

from bot.errors import StoreError
from bot.store.database import Database
from bot.store.models import DiagnosisRun, Incident


def _incident(uid: str = "uid-1", **overrides: object) -> Incident:
    values: dict[str, object] = {
        "cluster": "prod-eu",
        "namespace": "istio-system",
        "namespace_uid": uid,
        "terminating_since": datetime(2026, 11, 21, 8, 30, tzinfo=UTC),
    }
    values.update(overrides)
    return Incident(**values)


def test_unit_of_work_commits_on_success(database: Database) -> None:
    with database.unit_of_work() as uow:
        incident_id = uow.incidents.add(_incident()).id
    with database.unit_of_work() as uow:
        stored = uow.incidents.get(incident_id)
        assert stored is not None
        assert stored.status == "open"
        assert stored.namespace == "istio-system"


def test_unit_of_work_rolls_back_when_the_block_raises(database: Database) -> None:
    with pytest.raises(RuntimeError), database.unit_of_work() as uow:
        uow.incidents.add(_incident())
        raise RuntimeError("boom")
    with database.unit_of_work() as uow:
        assert uow.incidents.by_namespace_uid("prod-eu", "uid-1") is None


def test_one_incident_per_namespace_uid_is_a_database_rule(database: Database) -> None:
    with database.unit_of_work() as uow:
        uow.incidents.add(_incident())
    with pytest.raises(StoreError) as refused, database.unit_of_work() as uow:
        uow.incidents.add(_incident())
    assert isinstance(refused.value.__cause__, IntegrityError)
    # the same name with a new UID (deleted and recreated) is a new incident
    with database.unit_of_work() as uow:
        uow.incidents.add(_incident(uid="uid-2"))
        assert len(uow.incidents.open_incidents("prod-eu")) == 2


def test_status_is_checked_by_the_database(database: Database) -> None:
    with pytest.raises(StoreError) as refused, database.unit_of_work() as uow:
        uow.incidents.add(_incident(status="maybe"))
    assert isinstance(refused.value.__cause__, IntegrityError)


def test_timestamps_come_back_timezone_aware_utc(database: Database) -> None:
    berlin = timezone(timedelta(hours=1))
    since = datetime(2026, 11, 21, 9, 30, tzinfo=berlin)
    with database.unit_of_work() as uow:
        incident_id = uow.incidents.add(_incident(terminating_since=since)).id
    with database.unit_of_work() as uow:
        stored = uow.incidents.get(incident_id)
        assert stored is not None
        assert stored.terminating_since == since
        assert stored.terminating_since is not None
        assert stored.terminating_since.utcoffset() == timedelta(0)
        assert stored.first_seen_at.tzinfo is not None


def test_naive_timestamps_are_refused(database: Database) -> None:
    with pytest.raises(StatementError, match="naive datetime"), database.unit_of_work() as uow:
        uow.incidents.add(_incident(terminating_since=datetime(2026, 11, 21, 9, 30)))


def test_diagnoses_belong_to_their_incident_in_order(database: Database) -> None:
    start = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    with database.unit_of_work() as uow:
        incident = uow.incidents.add(_incident())
        for minutes, cause in [(5, "orphaned_finalizer"), (0, "apiservice_unavailable")]:
            uow.diagnoses.add(
                DiagnosisRun(
                    incident_id=incident.id,
                    cluster="prod-eu",
                    namespace="istio-system",
                    trigger="slack",
                    requested_by="U0AAAAAAA",
                    started_at=start + timedelta(minutes=minutes),
                    duration_ms=812,
                    state="terminating",
                    cause=cause,
                    report={"schema": "nsstuck.diagnosis/v1", "findings": [{"cause": cause}]},
                    snapshot=b"\x78\x9c compressed",
                )
            )
        incident_id = incident.id
    with database.unit_of_work() as uow:
        runs = uow.diagnoses.for_incident(incident_id)
        assert [r.cause for r in runs] == ["apiservice_unavailable", "orphaned_finalizer"]
        assert runs[1].report["findings"][0]["cause"] == "orphaned_finalizer"
        assert runs[0].snapshot == b"\x78\x9c compressed"


def test_an_incident_with_diagnoses_cannot_be_deleted(database: Database, database_url: str) -> None:
    """Nothing is lost: the foreign key refuses to drop an incident's history."""
    with database.unit_of_work() as uow:
        incident = uow.incidents.add(_incident())
        uow.diagnoses.add(
            DiagnosisRun(
                incident_id=incident.id,
                cluster="c",
                namespace="n",
                trigger="cli",
                requested_by="me",
                state="terminating",
                report={},
            )
        )
        incident_id = incident.id
    owner = Database(database_url)  # the bot never deletes an incident (with two roles it may not)
    with pytest.raises(StoreError) as refused, owner.unit_of_work() as uow:
        stored = uow.session.get(Incident, incident_id)  # the model itself: the repositories hand out records
        uow.session.delete(stored)
        uow.flush()
    owner.dispose()
    assert isinstance(refused.value.__cause__, IntegrityError)
