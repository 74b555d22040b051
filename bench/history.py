"""Benchmark: the history queries on 100,000 incidents and 500,000 diagnosis runs, SQLite and PostgreSQL.

    make bench            (or: PYTHONPATH=. .venv/bin/python -m bench.history)

Each database is built by the migrations, then filled in bulk (COPY on PostgreSQL, executemany on
SQLite): 100,000 incidents over 10 clusters and a year, about 2% of them open, namespaces that come
back, and 500,000 runs with a small report and no snapshot. Statistics are refreshed (ANALYZE), then
each query is timed `--runs` times (p50 and p99, milliseconds):

- `history <cluster>`: the whole `/nsstuck history <cluster>` use case, list and summary (the target:
  p99 under 50 ms on PostgreSQL);
- `list <cluster>`: the list only (open first, newest first, 20 rows, and their run counts);
- `history <cluster> <namespace>`, `history` (every cluster), and the summary of every cluster;
- `seen before (verdict)`: what recording a verdict adds (issue 39 §3), the three earlier incidents of the
  cluster's most frequent cause and blocking object family with their fixes, and the count of that cause and
  family in 30 days (the target: p99 under 20 ms on both databases), printed beside
  `baseline: one incident by id` in the same run, a unit of work that reads one row by its primary key (what
  any query costs here at least).

PostgreSQL comes from NSSTUCK_TEST_POSTGRES_URL, or a throw-away server started with
scripts/pg-test-server (and stopped at the end). The plan of the `list <cluster>` queries on
PostgreSQL is printed, to show which index serves them. Exit 1 if the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text

from bench._report import finish, percentile
from bot.services.history import history
from bot.store import migrating
from bot.store.database import Database
from bot.store.history import HistoryRepository
from tests.pgdatabase import temporary_database

REPO = Path(__file__).resolve().parents[1]
CAUSES = (
    ("orphaned_finalizer", 40),
    ("apiservice_unavailable", 20),
    ("namespace_finalizer", 10),
    ("webhook_blocks_delete", 8),
    ("pod_on_lost_node", 8),
    ("pvc_in_use", 6),
    ("discovery_failure", 3),
    ("deletion_error", 2),
    ("unknown", 2),
    (None, 1),
)
CLUSTERS = [f"prod-{region}" for region in ("eu", "us", "ap", "sa", "af")] + [
    f"stage-{region}" for region in ("eu", "us", "ap", "sa", "af")
]
TARGET_MS = 50.0
SEEN_TARGET_MS = 20.0
# the blocking object families of each cause (`bot.diagnosis.family`), the first the most frequent; the causes
# without a family (pvc_in_use, deletion_error, unknown) have none
FAMILIES = {
    "orphaned_finalizer": ("finalizer:kiali.io/finalizer", "finalizer:example.com/cleanup", "finalizer:cert-manager"),
    "apiservice_unavailable": ("apiservice:v1beta1.metrics.k8s.io", "apiservice:v1beta1.custom.metrics.k8s.io"),
    "namespace_finalizer": ("finalizer:controller.cattle.io/namespace-auth",),
    "webhook_blocks_delete": ("webhook:ValidatingWebhookConfiguration/kyverno-resource",),
    "pod_on_lost_node": ("nodepool:cloud.google.com/gke-nodepool=spot", "node:node-7"),
    "discovery_failure": ("groupversion:external.metrics.k8s.io/v1beta1",),
}
EPOCH = datetime(2025, 11, 21, tzinfo=UTC)
SQLITE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def generate(incidents: int, runs: int, seed: int = 6) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Rows as tuples in column order, with explicit ids so that runs can point at their incident."""
    rng = random.Random(seed)
    causes = [c for c, _ in CAUSES]
    weights = [w for _, w in CAUSES]
    incident_rows = []
    places: list[tuple[str, str, datetime]] = []
    for i in range(1, incidents + 1):
        cluster = CLUSTERS[i % len(CLUSTERS)]
        # a few namespaces keep coming back, most appear once
        namespace = f"team-{rng.randrange(300)}" if rng.random() < 0.3 else f"ns-{i}"
        first_seen = EPOCH + timedelta(seconds=rng.randrange(365 * 86400))
        since = first_seen - timedelta(seconds=rng.randrange(600)) if rng.random() < 0.9 else None
        is_open = rng.random() < 0.02
        resolved = None if is_open else (since or first_seen) + timedelta(seconds=int(rng.lognormvariate(9, 1.2)))
        cause = rng.choices(causes, weights)[0]
        thread = (f"C{rng.randrange(10**8):08d}", f"{int(first_seen.timestamp())}.{i % 1000000:06d}")
        families = FAMILIES.get(cause or "", ())
        blocker = (families[0] if rng.random() < 0.6 else rng.choice(families)) if families else None
        incident_rows.append(
            (i, cluster, namespace, uuid.UUID(int=rng.getrandbits(128)).hex, "open" if is_open else "resolved",
             cause, since, first_seen, resolved, thread[0], thread[1], first_seen, resolved or first_seen, blocker)
        )  # fmt: skip
        places.append((cluster, namespace, first_seen))
    run_rows = []
    report = json.dumps({"schema": "nsstuck.diagnosis/v1", "state": "terminating", "findings": []})
    for j in range(1, runs + 1):
        incident = rng.randrange(1, incidents + 1)
        cluster, namespace, first_seen = places[incident - 1]
        started = first_seen + timedelta(seconds=rng.randrange(86400))
        cause = incident_rows[incident - 1][5]
        run_rows.append(
            (j, incident, cluster, namespace, rng.choice(("slack", "schedule", "cli")), f"U{rng.randrange(500):05d}",
             started, rng.randrange(200, 4000), "terminating", cause, True, report, None, started)
        )  # fmt: skip
    return incident_rows, run_rows


INCIDENT_COLUMNS = (
    "id, cluster, namespace, namespace_uid, status, cause, terminating_since, first_seen_at, resolved_at, "
    "slack_channel, slack_thread_ts, created_at, updated_at, blocker"
)
RUN_COLUMNS = (
    "id, incident_id, cluster, namespace, trigger, requested_by, started_at, duration_ms, state, cause, "
    "complete, report, snapshot, created_at"
)


def fill_postgres(db: Database, incidents: list[tuple[Any, ...]], runs: list[tuple[Any, ...]]) -> None:
    raw = db.engine.raw_connection()
    try:
        connection = raw.driver_connection
        assert isinstance(connection, psycopg.Connection)
        with connection.cursor() as cursor:
            with cursor.copy(f"COPY incidents ({INCIDENT_COLUMNS}) FROM STDIN") as copy:
                for row in incidents:
                    copy.write_row(row)
            with cursor.copy(f"COPY diagnoses ({RUN_COLUMNS}) FROM STDIN") as copy:
                for row in runs:
                    copy.write_row(row)
            cursor.execute("SELECT setval(pg_get_serial_sequence('incidents', 'id'), (SELECT max(id) FROM incidents))")
            cursor.execute("SELECT setval(pg_get_serial_sequence('diagnoses', 'id'), (SELECT max(id) FROM diagnoses))")
        connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM ANALYZE incidents")
        connection.execute("VACUUM ANALYZE diagnoses")
        connection.autocommit = False
    finally:
        raw.close()


def fill_sqlite(db: Database, incidents: list[tuple[Any, ...]], runs: list[tuple[Any, ...]]) -> None:
    def naive(row: tuple[Any, ...]) -> tuple[Any, ...]:
        # what the UTCDateTime column stores on SQLite: naive UTC text
        return tuple(v.astimezone(UTC).strftime(SQLITE_FORMAT) if isinstance(v, datetime) else v for v in row)

    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        marks = ", ".join("?" * len(incidents[0]))
        cursor.executemany(f"INSERT INTO incidents ({INCIDENT_COLUMNS}) VALUES ({marks})", map(naive, incidents))
        marks = ", ".join("?" * len(runs[0]))
        cursor.executemany(f"INSERT INTO diagnoses ({RUN_COLUMNS}) VALUES ({marks})", map(naive, runs))
        raw.commit()
        cursor.execute("ANALYZE")
        raw.commit()
        cursor.close()
    finally:
        raw.close()


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    fn()  # warm the caches and the statement cache once
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    p99 = percentile(samples, 99)
    return {"p50_ms": round(statistics.median(samples), 2), "p99_ms": round(p99, 2), "runs": runs}


def explain(db: Database, cluster: str) -> list[str]:
    """PostgreSQL's plans of the two list queries (open, then resolved) for one cluster, and of the
    verdict's seen-before query."""
    plans = []
    with db.unit_of_work() as uow:
        repository = HistoryRepository(uow.session)
        seen = repository._seen_query(
            cluster=cluster, cause="orphaned_finalizer", blocker=FAMILIES["orphaned_finalizer"][0], exclude=0, limit=3
        )
        for status, statement in (
            ("open", repository._page("open", repository._scope(cluster, None, None), 20)),
            ("resolved", repository._page("resolved", repository._scope(cluster, None, None), 20)),
            ("seen before", seen),
        ):
            sql = statement.compile(uow.session.get_bind(), compile_kwargs={"literal_binds": True})
            rows = uow.session.execute(text(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}"))
            plans.append(f"-- {status}\n" + "\n".join(str(row[0]) for row in rows))
    return plans


def measure(db: Database, runs: int) -> dict[str, Any]:
    cluster = CLUSTERS[0]
    with db.unit_of_work() as uow:  # a namespace that came back often on that cluster
        rows = HistoryRepository(uow.session).summary(cluster=cluster).recurring
    namespace = rows[0].namespace if rows else "team-1"

    def list_only() -> None:
        with db.unit_of_work() as uow:
            repository = HistoryRepository(uow.session)
            found = repository.recent(cluster=cluster, limit=20)
            repository.run_stats([incident.id for incident in found])

    def summary_all() -> None:
        with db.unit_of_work() as uow:
            HistoryRepository(uow.session).summary()

    cause, family = "orphaned_finalizer", FAMILIES["orphaned_finalizer"][0]  # the most frequent pair
    since = EPOCH + timedelta(days=365 - 30)

    def seen_before() -> None:
        with db.unit_of_work() as uow:
            repository = HistoryRepository(uow.session)
            repository.seen_before(cluster=cluster, cause=cause, blocker=family, exclude=0, limit=3)
            repository.recurrences(cluster=cluster, cause=cause, blocker=family, since=since)

    def baseline() -> None:
        with db.unit_of_work() as uow:
            uow.incidents.get(1)

    return {
        "baseline: one incident by id": timed(baseline, runs),
        "seen before (verdict)": timed(seen_before, runs),
        f"history {cluster}": timed(lambda: history(db, cluster=cluster), runs),
        f"list {cluster}": timed(list_only, runs),
        f"history {cluster} {namespace}": timed(lambda: history(db, cluster=cluster, namespace=namespace), runs),
        "history (every cluster)": timed(lambda: history(db), runs),
        "summary (every cluster)": timed(summary_all, runs),
    }


@contextmanager
def postgres_server() -> Iterator[str]:
    """NSSTUCK_TEST_POSTGRES_URL, or a throw-away server for the length of the benchmark."""
    url = os.environ.get("NSSTUCK_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    script = REPO / "scripts" / "pg-test-server"
    out = subprocess.run(["bash", str(script), "start"], check=True, capture_output=True, text=True).stdout
    env: dict[str, str] = {}
    for line in out.splitlines():
        for word in shlex.split(line.removeprefix("export ")):
            key, _, value = word.partition("=")
            env[key] = value
    try:
        yield env["NSSTUCK_TEST_POSTGRES_URL"]
    finally:
        subprocess.run(["bash", str(script), "stop", env["PG_TEST_DIR"]], check=False, env={**os.environ, **env})


def run_backend(name: str, url: str, data: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]], runs: int) -> Any:
    migrating.upgrade(url)
    db = Database(url)
    try:
        start = time.perf_counter()
        (fill_postgres if name == "postgresql" else fill_sqlite)(db, *data)
        fill_seconds = round(time.perf_counter() - start, 1)
        print(f"{name}: filled {len(data[0]):,} incidents and {len(data[1]):,} runs in {fill_seconds} s")
        figures: dict[str, Any] = {"fill_seconds": fill_seconds, "queries": measure(db, runs)}
        if name == "postgresql":
            figures["plans"] = explain(db, CLUSTERS[0])
        for query, result in figures["queries"].items():
            print(f"  {query:<40} p50 {result['p50_ms']:>8.2f} ms   p99 {result['p99_ms']:>8.2f} ms")
        return figures
    finally:
        db.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=100_000)
    parser.add_argument("--runs-per-incident", type=int, default=5, help="diagnosis runs, on average")
    parser.add_argument("--runs", type=int, default=50, help="timed runs of each query")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    data = generate(args.incidents, args.incidents * args.runs_per_incident)
    print(f"generated {len(data[0]):,} incidents and {len(data[1]):,} runs in {time.perf_counter() - start:.1f} s")
    figures: dict[str, Any] = {"incidents": len(data[0]), "diagnoses": len(data[1]), "clusters": len(CLUSTERS)}
    with tempfile.TemporaryDirectory(prefix="nsstuck-bench-") as tmp:
        figures["sqlite"] = run_backend("sqlite", f"sqlite:///{Path(tmp) / 'history.db'}", data, args.runs)
    with postgres_server() as server, temporary_database(server, prefix="bench_history_") as url:
        figures["postgresql"] = run_backend("postgresql", url, data, args.runs)
    print("\nPostgreSQL plans of the list queries for one cluster:")
    for plan in figures["postgresql"]["plans"]:
        print("  " + plan.replace("\n", "\n  "))
    target = figures["postgresql"]["queries"][f"history {CLUSTERS[0]}"]
    checks = [
        (
            f"/nsstuck history <cluster> on PostgreSQL, p99 {target['p99_ms']} ms (p50 {target['p50_ms']} ms)",
            target["p99_ms"] < TARGET_MS,
            f"< {TARGET_MS:.0f} ms",
        )
    ]
    for backend in ("sqlite", "postgresql"):
        seen, base = (figures[backend]["queries"][q] for q in ("seen before (verdict)", "baseline: one incident by id"))
        checks.append(
            (
                f"the verdict's seen before on {backend}, p99 {seen['p99_ms']} ms (baseline p99 {base['p99_ms']} ms)",
                seen["p99_ms"] < SEEN_TARGET_MS,
                f"< {SEEN_TARGET_MS:.0f} ms",
            )
        )
    print()
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
