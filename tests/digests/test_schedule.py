"""The digest schedule: cron in a time zone, across daylight-saving changes, with catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.services.digesting import due, next_time
from bot.settings import DigestConfig


def _berlin(schedule: str = "0 9 * * *", catch_up: str = "1h") -> DigestConfig:
    return DigestConfig.model_validate(
        {"channel": "C0123ABCD", "schedule": schedule, "timezone": "Europe/Berlin", "catch_up": catch_up}
    )


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # winter time (CET, UTC+1): 09:00 in Berlin is 08:00 UTC
        ("2026-03-28T07:59:59", None),
        ("2026-03-28T08:00:00", "2026-03-28T08:00:00"),
        ("2026-03-28T08:59:00", "2026-03-28T08:00:00"),
        ("2026-03-28T09:00:01", None),  # more than an hour late: not made up
        # the clocks go forward in the night to 29 March: 09:00 CEST is 07:00 UTC
        ("2026-03-29T06:59:59", None),
        ("2026-03-29T07:00:00", "2026-03-29T07:00:00"),
        # and back on 25 October: 09:00 CET is 08:00 UTC again
        ("2026-10-25T07:00:00", None),
        ("2026-10-25T08:00:05", "2026-10-25T08:00:00"),
    ],
)
def test_due_follows_the_local_time_across_daylight_saving_changes(now: str, expected: str | None) -> None:
    result = due(_berlin(), _at(now))
    assert result == (_at(expected) if expected else None)


def test_only_the_latest_missed_time_is_made_up() -> None:
    hourly = _berlin("0 * * * *", catch_up="3h")
    assert due(hourly, _at("2026-11-23T10:30:00")) == _at("2026-11-23T10:00:00")


def test_the_next_time_skips_the_hour_that_does_not_exist() -> None:
    # 02:30 does not happen in Berlin on 29 March 2026; the next 02:30 after the 28th is the 30th's
    early = _berlin("30 2 * * *")
    after = next_time(early, _at("2026-03-28T01:30:00"))
    assert after is not None
    assert after.date().isoformat() in ("2026-03-29", "2026-03-30")
    assert after - _at("2026-03-28T01:30:00") >= timedelta(hours=23)


@pytest.mark.parametrize(
    ("days", "fires_on"),
    [
        ("1-5", {"Mon", "Tue", "Wed", "Thu", "Fri"}),  # crontab: 1 is Monday (APScheduler 3 alone would say Tuesday)
        ("0", {"Sun"}),
        ("7", {"Sun"}),
        ("6,0", {"Sat", "Sun"}),
        ("*/2", {"Sun", "Tue", "Thu", "Sat"}),
        ("mon-fri", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
    ],
)
def test_days_of_week_count_as_crontab_counts_them(days: str, fires_on: set[str]) -> None:
    digest = _berlin(f"0 9 * * {days}")
    week = [_at("2026-11-23T08:00:00") + timedelta(days=n) for n in range(7)]  # Monday to Sunday
    fired = {moment.strftime("%a") for moment in week if due(digest, moment) == moment}
    assert fired == fires_on
