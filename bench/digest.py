"""Benchmark: a digest over 50 emulated clusters, against the naive way and against the floor.

    make bench            (or: .venv/bin/python -m bench.digest)

50 clusters of 1,000 namespaces each (bench/_fleet.py: a little content in every namespace, five of
them stuck per cluster for three hours, one deleted five minutes ago), 20 ms of latency on every
request of the diagnosing identity, served over TLS by emulators running in processes of their own
(their CPU and memory are not ours; on a 2-core machine they do compete with us for the cores). In
one run it measures:

- the digest: `compose()` of bot/services/digesting.py as a dry run (nothing posted or written):
  `scan()` of the 50 clusters, then the composition; in a child process, for its peak RSS;
- `nsstuck digest run --channel C --dry-run`, end to end (the process, its peak RSS);
- the naive way: per cluster one list of namespaces, then `diagnose_namespace` (one `collect()`)
  per stuck namespace, one after the other;
- the floor: the rounds of requests a scan cannot do without (the lists of namespaces; then
  discovery, the cluster-wide lists and the reads of the stuck namespaces; then every group version;
  then the namespaced lists of the types the stuck namespaces' conditions name, as the scan lists them),
  each round fully parallel over all clusters, with nothing else done.

It prints the figures and the ratios, checks the targets (the digest built in under 10 s, under
200 MB peak RSS, every stuck namespace found and diagnosed) and exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bench._emulators import emulated_clusters
from bench._fleet import NOW
from bench._report import finish
from bot.kube.collecting import remaining_types

REPO = Path(__file__).resolve().parents[1]
CHANNEL = "C0DIGEST01"
STUCK_AFTER = timedelta(hours=1)


# -- the emulated fleet ------------------------------------------------------------------------------


def write_config(work: Path, kubeconfigs: list[Path]) -> Path:
    config = {
        "clusters": [{"name": f"cluster-{i:02d}", "kubeconfig": str(path)} for i, path in enumerate(kubeconfigs)],
        "digests": [
            {
                "channel": CHANNEL,
                "schedule": "0 9 * * 1-5",
                "timezone": "Europe/Berlin",
                "stuck_after": f"{int(STUCK_AFTER.total_seconds() // 60)}m",
                "name": "bench",
            }
        ],
    }
    path = work / "nsstuck.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# -- what runs in the measured child processes ----------------------------------------------------


def _count_requests() -> list[int]:
    """Count the calls our transport makes (one integer increment per call)."""
    from bot.kube.transport import Transport

    counter = [0]
    original = Transport.call

    def call(self: Transport, *args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(self, *args, **kwargs)

    Transport.call = call  # type: ignore[method-assign]
    return counter


def child_digest(config_path: Path, database_url: str, *, streaming: bool, freeze: bool) -> dict[str, Any]:
    """compose() as a dry run; with `streaming`, given scan_iter as its scanner instead of scan."""
    import gc

    from bot.kube.registry import ClusterRegistry
    from bot.services.digesting import compose
    from bot.services.scanning import scan, scan_iter
    from bot.settings import load_config
    from bot.store.database import Database

    if freeze:
        gc.freeze()  # what a process can do once its imports are done: the collector skips them from then on
    requests = _count_requests()
    config = load_config(config_path)
    db = Database(database_url)
    scan_seconds: list[float] = []

    def timed_scan(*args: Any, **kwargs: Any) -> Any:
        if streaming:
            # compose() takes each cluster's scan once, in order: it never needs them all at once (the
            # scan and the composition then overlap, so the scan has no time of its own)
            return scan_iter(*args, **kwargs)
        started = time.perf_counter()
        try:
            return scan(*args, **kwargs)
        finally:
            scan_seconds.append(time.perf_counter() - started)

    started = time.perf_counter()
    digest = compose(
        db,
        config,
        ClusterRegistry.from_config(config, config_path),
        config.digests[0],
        now=NOW,
        scanner=timed_scan,
        record_runs=False,
    )
    build_seconds = time.perf_counter() - started
    db.dispose()
    entries = [e for s in digest.sections for e in (*s.new, *s.still)]
    return {
        "build_seconds": build_seconds,
        "scan_seconds": scan_seconds[0] if scan_seconds else None,
        "requests": requests[0],
        "clusters": len(digest.sections),
        "unreachable": sum(1 for s in digest.sections if not s.reachable),
        "stuck": len(entries),
        "diagnosed": sum(1 for e in entries if e.cause and not e.error),
        "causes": sorted({str(e.cause) for e in entries}),
        "problems": [f"{s.cluster}: {s.error}" for s in digest.sections if not s.reachable]
        + [f"{e.cluster}/{e.namespace}: {e.error}" for e in entries if e.error],
    }


def child_naive(config_path: Path, limit: int) -> dict[str, Any]:
    """Per cluster one list of namespaces, then one `diagnose_namespace` per stuck namespace, in turn."""
    from bot.domain.refs import deletion_time, meta
    from bot.kube.collecting import list_namespaces
    from bot.kube.connecting import connect
    from bot.kube.registry import ClusterRegistry
    from bot.kube.transport import Transport
    from bot.services.diagnosing import diagnose_namespace
    from bot.settings import load_config

    requests = _count_requests()
    config = load_config(config_path)
    registry = ClusterRegistry.from_config(config, config_path)
    targets = [registry.target(c.name) for c in config.clusters[:limit]]
    diagnosed = 0
    started = time.perf_counter()
    for target in targets:
        connection = connect(target)
        try:
            listed = list_namespaces(Transport(connection))
        finally:
            connection.close()
        for item in listed:
            since = deletion_time(item)
            if since is not None and NOW - since >= STUCK_AFTER:
                result = diagnose_namespace(target, str(meta(item)["name"]), clock=lambda: NOW)
                diagnosed += result.diagnosis.cause is not None
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "clusters": len(targets), "diagnosed": diagnosed, "requests": requests[0]}


# -- the floor ----------------------------------------------------------------------------------------


class _Endpoint:
    """Kept-alive TLS connections to one emulated cluster, with the kubeconfig's CA and token."""

    def __init__(self, kubeconfig: Path, connections: int) -> None:
        import urllib3

        doc = yaml.safe_load(kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.pool = urllib3.PoolManager(maxsize=connections, ssl_context=context)
        self.server = cluster["server"]
        self.headers = {"Authorization": f"Bearer {doc['users'][0]['user']['token']}", "Accept": "application/json"}

    def get(self, path: str) -> Any:
        response = self.pool.request("GET", self.server + path, headers=self.headers, retries=False, timeout=60)
        return json.loads(response.data)


CLUSTER_WIDE = (
    "/apis/apiregistration.k8s.io/v1/apiservices",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/statefulsets",
    "/apis/apps/v1/daemonsets",
)


def floor(kubeconfigs: list[Path], *, per_cluster: int = 16, threads: int = 256) -> float:
    """The rounds of requests a scan cannot do without, each fully parallel, with nothing else done.

    1. every cluster's list of namespaces; 2. discovery (/api, /apis), the cluster-wide lists and a
    read of each stuck namespace; 3. every preferred group version; 4. the namespaced lists of every
    stuck namespace (only the types its conditions name, where they can be trusted, as a scan does:
    `remaining_types` of bot/kube/collecting.py). A cluster's requests of a round are split into at most `per_cluster`
    sequences, each on one kept-alive connection of that cluster (as a scan's collector does).
    """
    endpoints = [_Endpoint(k, per_cluster) for k in kubeconfigs]

    def run(pool: ThreadPoolExecutor, calls: list[tuple[int, str]]) -> dict[tuple[int, str], Any]:
        by_cluster: dict[int, list[str]] = {}
        for i, path in calls:
            by_cluster.setdefault(i, []).append(path)
        chunks = [(i, paths[k::per_cluster]) for i, paths in by_cluster.items() for k in range(per_cluster)]

        def sequence(chunk: tuple[int, list[str]]) -> list[tuple[tuple[int, str], Any]]:
            i, paths = chunk
            return [((i, path), endpoints[i].get(path)) for path in paths]

        return {key: doc for done in pool.map(sequence, [c for c in chunks if c[1]]) for key, doc in done}

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        listed = run(pool, [(i, "/api/v1/namespaces") for i in range(len(endpoints))])
        stuck: dict[int, list[str]] = {}
        for (i, _), doc in listed.items():
            for item in doc["items"]:
                since = item["metadata"].get("deletionTimestamp")
                if since and NOW - datetime.fromisoformat(since.replace("Z", "+00:00")) >= STUCK_AFTER:
                    stuck.setdefault(i, []).append(item["metadata"]["name"])
        second = [(i, p) for i in stuck for p in ("/api", "/apis", *CLUSTER_WIDE)]
        second += [(i, f"/api/v1/namespaces/{ns}") for i, names in stuck.items() for ns in names]
        answers = run(pool, second)
        versions = []
        for i in stuck:
            versions += [(i, f"/api/{v}") for v in answers[(i, "/api")]["versions"]]
            versions += [(i, f"/apis/{g['preferredVersion']['groupVersion']}") for g in answers[(i, "/apis")]["groups"]]
        only = {(i, ns): remaining_types(answers[(i, f"/api/v1/namespaces/{ns}")]) for i in stuck for ns in stuck[i]}
        lists = []
        for (i, path), doc in run(pool, versions).items():
            group = doc.get("groupVersion", "").rpartition("/")[0]
            for r in doc.get("resources", ()):
                if "/" not in r["name"] and r["namespaced"] and "list" in r["verbs"]:
                    named = f"{r['name']}.{group}"
                    lists += [
                        (i, f"{path}/namespaces/{ns}/{r['name']}")
                        for ns in stuck[i]
                        if (named_types := only[(i, ns)]) is None or named in named_types
                    ]
        run(pool, lists)
    elapsed = time.perf_counter() - started
    for endpoint in endpoints:
        endpoint.pool.clear()
    return elapsed


# -- measuring -----------------------------------------------------------------------------------------


def run_measured(command: list[str], *, env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, peak RSS in KiB of the process, stdout)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, env=env, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if code != 0:
        raise SystemExit(f"{command!r} failed with exit code {code}")
    return elapsed, int(usage.ru_maxrss), text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--stuck", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--server-processes", type=int, default=2, help="emulator processes serving the clusters")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the digest measurement (median reported)")
    parser.add_argument("--naive-clusters", type=int, help="time the naive way on this many clusters and scale up")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--child", choices=("digest", "naive", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--streaming", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gc-freeze", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child == "digest":
        print(json.dumps(child_digest(args.config, args.database, streaming=args.streaming, freeze=args.gc_freeze)))
        return 0
    if args.child == "naive":
        print(json.dumps(child_naive(args.config, args.limit)))
        return 0
    if args.child == "floor":
        print(json.dumps({"seconds": floor(sorted((args.config.parent / "kubeconfigs").glob("*.kubeconfig")))}))
        return 0

    from bot.store import migrating

    work = Path(tempfile.mkdtemp(prefix="nsstuck-bench-digest-"))
    t0 = time.perf_counter()
    shape = {"BENCH_FLEET_SHAPE": f"{args.namespaces},{args.stuck}"}
    with emulated_clusters(
        args.clusters,
        processes=args.server_processes,
        latency_ms=args.latency_ms,
        work=work,
        build="bench._fleet:build_from_env",
        env=shape,
    ) as (kubeconfigs, _):
        print(
            f"built {args.clusters} clusters of {args.namespaces} namespaces ({args.stuck} stuck each) in "
            f"{args.server_processes} emulator processes in {time.perf_counter() - t0:.1f}s"
        )
        config_path = write_config(work, kubeconfigs)
        database_url = f"sqlite:///{work / 'nsstuck.db'}"
        migrating.upgrade(database_url)
        clock_file = work / "now"
        clock_file.write_text(NOW.isoformat())
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "HOME": str(work),
            "NSSTUCK_CONFIG": str(config_path),
            "NSSTUCK_DATABASE_URL": database_url,
            "NSSTUCK_CLOCK_FILE": str(clock_file),
        }
        me = [sys.executable, "-m", "bench.digest", "--config", str(config_path), "--database", database_url]

        def digest(*flags: str, runs: int) -> tuple[dict[str, Any], float, float]:
            """(the last report, median build seconds, largest peak RSS in MB) of `runs` children."""
            measured = [run_measured([*me, "--child", "digest", *flags], env=env) for _ in range(runs)]
            reports = [json.loads(out) for _, _, out in measured]
            seconds = statistics.median(r["build_seconds"] for r in reports)
            return reports[-1], seconds, max(rss for _, rss, _ in measured) / 1024

        # what `serve` and `digest run` do: scans one cluster at a time, heap frozen after the imports
        report, build_seconds, peak_mb = digest("--streaming", "--gc-freeze", runs=args.repeat)
        listed, listed_seconds, listed_mb = digest(runs=1)
        _, frozen_seconds, frozen_mb = digest("--streaming", runs=1)

        nsstuck = [str(Path(sys.executable).parent / "nsstuck"), "digest", "run", "--channel", CHANNEL, "--dry-run"]
        cli_seconds, cli_rss, cli_text = run_measured(nsstuck, env=env)

        floors = [json.loads(run_measured([*me, "--child", "floor"], env=env)[2]) for _ in range(args.repeat)]
        floor_seconds = statistics.median(f["seconds"] for f in floors)

        naive_clusters = min(args.naive_clusters or args.clusters, args.clusters)
        _, naive_rss, out = run_measured([*me, "--child", "naive", "--limit", str(naive_clusters)], env=env)
        naive = json.loads(out)
        naive_seconds = naive["seconds"] * args.clusters / naive_clusters

    expected = args.clusters * args.stuck
    speedup = naive_seconds / build_seconds
    over_floor = build_seconds / floor_seconds
    naive_requests = round(naive["requests"] * args.clusters / naive_clusters)
    figures = {
        "clusters": args.clusters,
        "namespaces_per_cluster": args.namespaces,
        "stuck_per_cluster": args.stuck,
        "latency_ms": args.latency_ms,
        "digest_build_seconds": round(build_seconds, 3),
        "digest_peak_rss_mb": round(peak_mb, 1),
        "digest_requests": report["requests"],
        "digest_with_scan_list_seconds": round(listed_seconds, 3),
        "digest_with_scan_list_scan_seconds": round(listed["scan_seconds"], 3),
        "digest_with_scan_list_peak_rss_mb": round(listed_mb, 1),
        "digest_without_gc_freeze_seconds": round(frozen_seconds, 3),
        "digest_without_gc_freeze_peak_rss_mb": round(frozen_mb, 1),
        "cli_dry_run_seconds": round(cli_seconds, 3),
        "cli_peak_rss_mb": round(cli_rss / 1024, 1),
        "naive_seconds": round(naive_seconds, 3),
        "naive_measured_clusters": naive_clusters,
        "naive_requests": naive_requests,
        "naive_peak_rss_mb": round(naive_rss / 1024, 1),
        "floor_seconds": round(floor_seconds, 3),
        "speedup_vs_naive": round(speedup, 1),
        "ratio_to_floor": round(over_floor, 2),
        "stuck_found": report["stuck"],
        "stuck_diagnosed": report["diagnosed"],
        "causes": report["causes"],
        "problems": report["problems"],
    }
    scaled = "" if naive_clusters == args.clusters else f" (measured on {naive_clusters} clusters, scaled)"
    print(f"digest: compose(scan_iter) after gc.freeze():  {build_seconds:6.2f} s  peak RSS {peak_mb:4.0f} MB")
    print(f"  {report['requests']} requests; median of {args.repeat} runs, each in a fresh process")
    print(
        f"digest: compose() with scan (a list):         {listed_seconds:6.2f} s  peak RSS {listed_mb:4.0f} MB"
        f"  (scan {listed['scan_seconds']:.2f} s)"
    )
    print(f"digest: the same without gc.freeze():          {frozen_seconds:6.2f} s  peak RSS {frozen_mb:4.0f} MB")
    print(f"nsstuck digest run --dry-run (process):       {cli_seconds:6.2f} s  peak RSS {cli_rss / 1024:4.0f} MB")
    print(f"naive: collect() per stuck namespace:         {naive_seconds:6.2f} s  {naive_requests} requests{scaled}")
    print(f"floor: the unavoidable rounds, bare requests: {floor_seconds:6.2f} s")
    print(f"speedup vs naive {speedup:.1f}x; {over_floor:.2f}x the floor")
    print(f"first line of the dry run: {cli_text.splitlines()[0] if cli_text else '(nothing)'}")
    for problem in report["problems"]:
        print(f"  problem: {problem}")
    checks = [
        (f"digest built in {build_seconds:.2f} s", build_seconds < 10, "< 10 s"),
        (f"{peak_mb:.0f} MB peak RSS while building it", peak_mb < 200, "< 200 MB"),
        (f"{report['stuck']} of {expected} stuck namespaces in the digest", report["stuck"] == expected, "all"),
        (f"{report['diagnosed']} of {expected} diagnosed with a cause", report["diagnosed"] == expected, "all"),
        (f"{report['unreachable']} clusters unreachable", report["unreachable"] == 0, "none"),
    ]
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
