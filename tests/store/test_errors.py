"""The store's seam (issue 17): database errors leave a unit of work as the project's own errors,
raised from the original; our own mistakes pass unchanged; the statuses are the CHECK constraints'."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.domain.statuses import IncidentStatus, RequestStatus
from bot.errors import PermanentError, StoreError, StoreUnavailableError, TemporaryError
from bot.store.database import Database
from bot.store.models import Incident
from tests._migrated import migrated

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _incident(uid: str = "uid-1", status: str = "open") -> Incident:
    return Incident(cluster="prod-eu", namespace="istio-system", namespace_uid=uid, status=status)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refusal_is_a_permanent_store_error_raised_from_the_original(database: Database) -> None:
    with database.unit_of_work() as uow:
        uow.incidents.add(_incident())
    with pytest.raises(StoreError) as refused, database.unit_of_work() as uow:
        uow.incidents.add(_incident())
    assert isinstance(refused.value, PermanentError)
    assert isinstance(refused.value.__cause__, IntegrityError)
    assert str(refused.value).startswith("the database refused the work (IntegrityError")
    # the transaction was rolled back: the unit of work after it sees one incident, and can write
    with database.unit_of_work() as uow:
        assert len(uow.incidents.open_incidents()) == 1
        uow.incidents.add(_incident(uid="uid-2"))


def test_our_own_mistakes_pass_unchanged(database: Database) -> None:
    with pytest.raises(TypeError, match="not ours to translate"), database.unit_of_work() as uow:
        uow.incidents.add(_incident())
        raise TypeError("not ours to translate")
    with database.unit_of_work() as uow:
        assert uow.incidents.open_incidents() == []  # rolled back all the same


def test_a_database_that_cannot_be_reached_is_a_temporary_store_error() -> None:
    db = Database(
        f"postgresql+psycopg://nsstuck@127.0.0.1:{_closed_port()}/nsstuck", connect_args={"connect_timeout": 2}
    )
    try:
        with pytest.raises(StoreUnavailableError) as down, db.unit_of_work() as uow:
            uow.incidents.open_incidents()
    finally:
        db.dispose()
    assert isinstance(down.value, TemporaryError)
    assert isinstance(down.value.__cause__, OperationalError)


def test_a_sqlite_file_that_cannot_be_opened_is_a_temporary_store_error(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'no-such-folder' / 'nsstuck.db'}")
    try:
        with pytest.raises(StoreUnavailableError) as down, db.unit_of_work() as uow:
            uow.incidents.open_incidents()
    finally:
        db.dispose()
    assert isinstance(down.value.__cause__, OperationalError)


@pytest.mark.postgres
def test_a_server_that_goes_away_mid_transaction_is_a_temporary_store_error(postgres_url: str) -> None:

    migrated(postgres_url)
    db = Database(postgres_url)
    try:
        with pytest.raises(StoreUnavailableError), db.unit_of_work() as uow:
            uow.incidents.add(_incident())
            # the server ends this very connection, as a restart or a fail-over does
            uow.session.execute(_terminate_own_backend())
            uow.incidents.open_incidents()
        with db.unit_of_work() as uow:  # a new connection from the pool works, and nothing was kept
            assert uow.incidents.open_incidents() == []
    finally:
        db.dispose()


def _terminate_own_backend() -> object:
    from sqlalchemy import text

    return text("SELECT pg_terminate_backend(pg_backend_pid())")


def _check_values(name: str) -> tuple[str, ...]:
    """The values of the newest migration's CHECK constraint `name` ("status IN ('a', 'b')")."""
    found: tuple[str, ...] = ()
    for path in sorted(MIGRATIONS.glob("*.py")):
        for match in re.finditer(
            r'"status IN \(([^)]*)\)",\s*name=op\.f\("' + re.escape(name) + r'"\)', path.read_text()
        ):
            found = tuple(re.findall(r"'([^']*)'", match.group(1)))
    return found


@pytest.mark.parametrize(
    ("enum", "constraint"),
    [(IncidentStatus, "ck_incidents_status"), (RequestStatus, "ck_remediation_requests_status")],
)
def test_the_statuses_are_the_check_constraints_of_the_migrations(enum: type, constraint: str) -> None:
    assert _check_values(constraint), f"no CHECK constraint {constraint} found in the migrations"
    assert tuple(status.value for status in enum) == _check_values(constraint)
