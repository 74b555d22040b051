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
