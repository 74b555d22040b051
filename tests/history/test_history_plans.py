"""The `/nsstuck history <cluster>` list, and a verdict's seen-before query (issue 39 §3), read the newest rows
off an index on PostgreSQL, never the table.

Filled the benchmark's way (bench/history.py) at a fifth of its size, then analysed, so the planner
sees realistic statistics.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from bench.history import CLUSTERS, FAMILIES, fill_postgres, generate
from bot.store.database import Database
from bot.store.history import HistoryRepository


@pytest.mark.slow
def test_the_cluster_list_uses_an_index(database: Database, database_url: str) -> None:
    if database.engine.dialect.name != "postgresql":
        pytest.skip("EXPLAIN plans are PostgreSQL's")
    owner = Database(database_url)  # COPY with the ids, setval and VACUUM: the schema's owner's work
    try:
        fill_postgres(owner, *generate(20_000, 20_000))
    finally:
        owner.dispose()
    with database.unit_of_work() as uow:
        repository = HistoryRepository(uow.session)
        for status in ("open", "resolved"):
            statement = repository._page(status, repository._scope(CLUSTERS[0], None, None), 20)
            sql = statement.compile(uow.session.get_bind(), compile_kwargs={"literal_binds": True})
            plan = "\n".join(str(row[0]) for row in uow.session.execute(text(f"EXPLAIN {sql}")))
            assert "Seq Scan" not in plan, plan
            assert "ix_incidents_" in plan, plan
        family = FAMILIES["orphaned_finalizer"][0]
        seen = repository._seen_query(
            cluster=CLUSTERS[0], cause="orphaned_finalizer", blocker=family, exclude=0, limit=3
        )
        sql = seen.compile(uow.session.get_bind(), compile_kwargs={"literal_binds": True})
        plan = "\n".join(str(row[0]) for row in uow.session.execute(text(f"EXPLAIN {sql}")))
        assert "Seq Scan" not in plan, plan
        assert "ix_incidents_cluster_cause_blocker_first_seen_at" in plan, plan
        rows = repository.seen_before(
            cluster=CLUSTERS[0], cause="orphaned_finalizer", blocker=family, exclude=0, limit=3
        )
        assert len(rows) == 3
        assert all((r.incident.cluster, r.incident.blocker) == (CLUSTERS[0], family) for r in rows)
        firsts = [r.incident.first_seen_at for r in rows]
        assert firsts == sorted(firsts, reverse=True)
        found = repository.recent(cluster=CLUSTERS[0], limit=20)
        assert len(found) == 20
        assert all(incident.cluster == CLUSTERS[0] for incident in found)
        statuses = [incident.status for incident in found]
        assert statuses == sorted(statuses)  # "open" < "resolved": open first
        resolved = [incident.first_seen_at for incident in found if incident.status == "resolved"]
        assert resolved == sorted(resolved, reverse=True)
