"""What differs between PostgreSQL and SQLite, in one place: the upsert's INSERT, the median, and
seconds between two timestamps. The migrations keep their own copies (they must not change when
this does)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, extract, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session


def name(session: Session) -> str:
    return session.get_bind().dialect.name


def insert(session: Session) -> Any:
    """The dialect's INSERT, the one with `on_conflict_do_nothing` and `returning`."""
    return pg_insert if name(session) == "postgresql" else sqlite_insert


def seconds_between(session: Session, later: Any, earlier: Any) -> ColumnElement[Any]:
    """`later - earlier` in seconds, for two timestamp columns."""
    if name(session) == "postgresql":
        return extract("epoch", later - earlier)
    # SQLite keeps naive UTC text; julianday() reads it as days
    return (func.julianday(later) - func.julianday(earlier)) * 86400.0


def median(session: Session, value: ColumnElement[Any], *where: ColumnElement[bool]) -> float | None:
    """The median of `value` over the rows `where` selects (None when there are none)."""
    if name(session) == "postgresql":
        found = session.scalar(select(func.percentile_cont(0.5).within_group(value)).where(*where))
        return None if found is None else float(found)
    # no ordered-set aggregates on SQLite: the middle one or two rows of the sorted values
    total = int(session.scalar(select(func.count()).select_from(select(value).where(*where).subquery())) or 0)
    if total == 0:
        return None
    middle = select(value).where(*where).order_by(value).offset((total - 1) // 2).limit(2 - total % 2)
    values = [float(v) for v in session.scalars(middle) if v is not None]
    return sum(values) / len(values) if values else None
