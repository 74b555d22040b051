"""Engines, sessions and the unit of work."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
    TimeoutError,
)
from sqlalchemy.orm import Session, sessionmaker

from bot.domain.snapshot_codec import StoredJson
from bot.errors import ConfigError, StoreError, StoreUnavailableError
from bot.store.audit import AuditLog
from bot.store.backups import BackupRepository
from bot.store.digests import DigestRunRepository
from bot.store.history import HistoryRepository
from bot.store.remediation import RequestRepository
from bot.store.replays import SeenRequestRepository
from bot.store.repositories import DiagnosisRepository, IncidentRepository
from bot.store.watch import WatchRepository

# query parameters that carry a secret (libpq reads `password` and `sslpassword` from the URL too)
_SECRET_PARAMETER = re.compile(r"pass|secret|token", re.IGNORECASE)


def _parse(url: str, variable: str = "NSSTUCK_DATABASE_URL") -> URL:
    """The parsed URL, or ConfigError saying what is wrong without repeating the URL (it may hold a password).
    `variable` is the setting it came from (NSSTUCK_DATABASE_URL, NSSTUCK_MIGRATION_DATABASE_URL)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ConfigError("environment", variable, "not a valid SQLAlchemy URL") from None
    if parsed.host and "@" in parsed.host:
        # user:p@ss@host parses as the host "ss@host": the rest of the password would be shown as the host
        raise ConfigError("environment", variable, "the host part holds an '@': write an '@' in the password as %40")
    return parsed


def url_backend(url: str, variable: str = "NSSTUCK_DATABASE_URL") -> str:
    """The URL's backend ("postgresql", "sqlite" or another), or ConfigError for a URL that does not parse."""
    return _parse(url, variable).get_backend_name()


def url_username(url: str, variable: str = "NSSTUCK_DATABASE_URL") -> str | None:
    """The user the URL logs in as, if it names one."""
    return _parse(url, variable).username or None


def first_line(error: SQLAlchemyError) -> str:
    """The first line of a database error, in the driver's words where it gave some (for one-line messages)."""
    reason = str(getattr(error, "orig", None) or error)
    return reason.strip().splitlines()[0] if reason.strip() else error.__class__.__name__


def redact_url(url: str) -> str:
    """The URL with its password (and any query parameter that holds one) hidden, for messages and logs."""
    try:
        parsed = _parse(url)
    except ConfigError:
        return "<unparsable database URL>"
    hidden = {key: "***" for key in parsed.query if _SECRET_PARAMETER.search(key)}
    # the rendering %-encodes the stars of the query; shown as the password is
    return parsed.update_query_dict(hidden).render_as_string(hide_password=True).replace("=%2A%2A%2A", "=***")


def _json_text(value: Any) -> str:
    """A JSON column's value as text: a document encoded already (a report made in a worker process) as
    it is, anything else as SQLAlchemy would encode it."""
    return str(value) if isinstance(value, StoredJson) else json.dumps(value)


def make_engine(url: str, *, variable: str = "NSSTUCK_DATABASE_URL", **kwargs: Any) -> Engine:
    """An engine tuned per backend. Raises ConfigError (naming `variable`) for a URL that cannot work."""
    parsed = _parse(url, variable)
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ConfigError(
            "environment",
            variable,
            f"unsupported database {parsed.get_backend_name()!r} (use sqlite or postgresql+psycopg)",
        )
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        # plain postgresql:// would pick psycopg2, which we do not ship
        parsed = parsed.set(drivername="postgresql+psycopg")
    options: dict[str, Any]
    if parsed.get_backend_name() == "sqlite":
        options = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    else:
        options = {"pool_pre_ping": True}
        if "poolclass" not in kwargs:
            # enough pooled connections for the threads that use the database at once (Slack's requests,
            # the diagnosis and posting workers): past the pool, SQLAlchemy opens a connection and closes
            # it after use, and each is a new PostgreSQL backend process (a fork and a login)
            options.update(pool_size=20, max_overflow=20)
    options["json_serializer"] = _json_text
    options.update(kwargs)
    try:
        engine = create_engine(parsed, **options)
    except (NoSuchModuleError, ModuleNotFoundError) as e:
        raise ConfigError("environment", variable, f"no driver for this URL ({e})") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def unavailable(error: SQLAlchemyError) -> bool:
    """Whether a database error says the database could not be reached, rather than refused the work."""
    if isinstance(error, (OperationalError, InterfaceError, DisconnectionError, TimeoutError)):
        return True
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def translated(error: SQLAlchemyError) -> StoreUnavailableError | StoreError:
    """The project's error for a database error: one line, its class and the database's first line
    (no statement, no parameters: they may carry what was being stored)."""
    detail = str(getattr(error, "orig", None) or "").strip().splitlines()
    said = f"{type(error).__name__}: {detail[0][:200]}" if detail else type(error).__name__
    if unavailable(error):
        return StoreUnavailableError(f"the database is unavailable ({said})")
    return StoreError(f"the database refused the work ({said})")


def _rollback(session: Session) -> None:
    """Roll back, if the connection still allows it: a dead connection cannot, and the error that
    killed it is the one to report."""
    with suppress(SQLAlchemyError):
        session.rollback()


class UnitOfWork:
    """One transaction and the repositories that work inside it. Repositories never commit."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.incidents = IncidentRepository(session)
        self.diagnoses = DiagnosisRepository(session)
        self.audit = AuditLog(session)
        self.backups = BackupRepository(session)
        self.requests = RequestRepository(session)
        self.digests = DigestRunRepository(session)
        self.seen_requests = SeenRequestRepository(session)
        self.history = HistoryRepository(session)
        self.watch = WatchRepository(session)

    def flush(self) -> None:
        self.session.flush()


class Database:
    """The process's database: an engine and a session factory."""

    def __init__(self, url: str, **engine_options: Any) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_options)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite lets one connection write at a time, and a connection that finds the file locked sleeps
        # and tries again (after 1, 2, 5, 10, 15, 20, 25 ms...): under load, a short write waited up to
        # ten times its length behind another. Within this process, transactions take turns here
        # instead, and the next one starts the moment the last one ends. (Other processes, the CLI
        # beside a running bot, still meet SQLite's own lock and wait for it.)
        self._turns: AbstractContextManager[Any] = (
            threading.RLock() if self.engine.dialect.name == "sqlite" else nullcontext()
        )

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """Commit when the block ends normally, roll back when it raises, close either way.

        A database error, in the block or at the commit, leaves as the project's own: a
        StoreUnavailableError when the database could not be reached (worth trying again later), a
        StoreError when it refused the work; the original is its `__cause__`. Any other exception
        passes unchanged, our own mistakes included (a naive datetime, a TypeError).
        """
        with self._turns:
            session = self._sessions()
            try:
                yield UnitOfWork(session)
                session.commit()
            except (DBAPIError, DisconnectionError, TimeoutError) as e:  # the database's (or driver's) answer
                _rollback(session)
                raise translated(e) from e
            except BaseException:
                _rollback(session)
                raise
            finally:
                session.close()

    def ping(self) -> str | None:
        """None when the database answers a `SELECT 1` now, else why not, in a few words (the error's
        class only: no URL, no server message)."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError as e:
            return f"the database is unavailable ({type(e).__name__})"
        return None

    def dispose(self) -> None:
        self.engine.dispose()
