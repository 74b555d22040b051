"""`nsstuck history` from the command line, on a migrated database with incidents in it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bot.store.database import Database
from tests._cli import run_nsstuck
from tests._migrated import migrated


def test_history_json_and_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    migrated(url)
    db = Database(url)
    with db.unit_of_work() as uow:
        for uid, namespace in (("u1", "istio-system"), ("u2", "payments")):
            uow.incidents.open_for(
                cluster="prod-eu", namespace=namespace, namespace_uid=uid,
                terminating_since=datetime(2026, 11, 21, 8, 0, tzinfo=UTC), cause="orphaned_finalizer",
            )  # fmt: skip
    db.dispose()
    result = run_nsstuck("history", "--cluster", "prod-eu", "--json", env={"NSSTUCK_DATABASE_URL": url})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "nsstuck.history/v1"
    assert {i["namespace"] for i in data["incidents"]} == {"istio-system", "payments"}
    text = run_nsstuck("history", env={"NSSTUCK_DATABASE_URL": url})
    assert text.returncode == 0, text.stderr
    assert "payments" in text.stdout
    bad = run_nsstuck("history", "--limit", "0", env={"NSSTUCK_DATABASE_URL": url})
    assert bad.returncode == 2
    assert "--limit must be between 1 and" in bad.stderr


def test_history_by_cause_on_both_databases(database_url: str) -> None:
    """`nsstuck history --cause C` (issue 39 §3): the list and the summary of that cause only; an unknown
    cause is a usage error that reads nothing."""
    migrated(database_url)
    db = Database(database_url)
    try:
        with db.unit_of_work() as uow:
            for uid, namespace, cause in (
                ("u1", "istio-system", "orphaned_finalizer"),
                ("u2", "monitoring", "apiservice_unavailable"),
                ("u3", "payments", "orphaned_finalizer"),
            ):
                uow.incidents.open_for(
                    cluster="prod-eu", namespace=namespace, namespace_uid=uid,
                    terminating_since=datetime(2026, 11, 21, 8, 0, tzinfo=UTC), cause=cause,
                )  # fmt: skip
    finally:
        db.dispose()
    env = {"NSSTUCK_DATABASE_URL": database_url}
    result = run_nsstuck("history", "--cause", "orphaned_finalizer", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["filters"]["cause"] == "orphaned_finalizer"
    assert sorted(i["namespace"] for i in data["incidents"]) == ["istio-system", "payments"]
    assert data["summary"]["by_cause"] == [{"cause": "orphaned_finalizer", "count": 2}]
    text = run_nsstuck("history", "--cause", "apiservice_unavailable", env=env)
    assert text.returncode == 0, text.stderr
    assert "monitoring" in text.stdout
    assert "payments" not in text.stdout
    assert "cause apiservice_unavailable" in text.stdout
    bad = run_nsstuck("history", "--cause", "orphaned-finalizer", env=env)
    assert bad.returncode == 2
    assert "--cause 'orphaned-finalizer' is not a cause; one of: apiservice_unavailable" in bad.stderr
    assert bad.stdout == ""
    # without --cause the filters say nothing of it: the JSON of before
    assert "cause" not in json.loads(run_nsstuck("history", "--json", env=env).stdout)["filters"]
