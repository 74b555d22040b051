"""Benchmark: `nsstuck diagnose` on a CRD-heavy cluster, against the one-liner and against the floor.

    make bench            (or: .venv/bin/python -m bench.diagnose)

In one run, on one emulated cluster (150 namespaced CRD types, 2,000 objects in the stuck
namespace, 20 ms of latency on every request of the diagnosing identity), it measures:

- nsstuck, end to end: the `nsstuck diagnose --json` process, and its peak RSS;
- the widely used one-liner, end to end: `kubectl api-resources --verbs=list --namespaced -o name |
  xargs -n 1 kubectl get --show-kind --ignore-not-found -n NS`;
- the floor: one discovery round (/api, /apis, then every group version at once) plus one fully
  parallel round of namespaced lists, with nothing else, measured in-process;
- nsstuck's collection and diagnosis alone, in-process, to compare with the floor.

It prints the figures and the ratios against the targets (>= 20x faster than the one-liner, within
2x of the floor, under 150 MB peak RSS) and exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench._report import finish
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP

NAMESPACE = "crd-heavy"
PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}
REPO = Path(__file__).resolve().parents[1]


def build_cluster(emu: Emulator, *, types: int, objects: int) -> None:
    """CRDs, then objects spread over them, deleted but held by a finalizer whose controller is gone (as
    the namespace controller would leave them), then the namespace deleted."""
    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    plurals = []
    for i in range(types):
        group = f"g{i:03d}.bench.example.com"
        plural = f"widgets{i:03d}"
        http.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {
                    "group": group,
                    "scope": "Namespaced",
                    "names": {"plural": plural, "singular": f"widget{i:03d}", "kind": f"Widget{i:03d}"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": {"type": "object", **PRESERVE}},
                        }
                    ],
                },
            },
        )
        plurals.append((group, plural, f"Widget{i:03d}"))
    for n in range(objects):
        group, plural, kind = plurals[n % types]
        http.post(
            f"/apis/{group}/v1/namespaces/{NAMESPACE}/{plural}",
            {
                "apiVersion": f"{group}/v1",
                "kind": kind,
                "metadata": {"name": f"w-{n:05d}", "finalizers": [f"{group}/cleanup"], "labels": {"n": str(n)}},
                "spec": {"size": n, "note": "x" * 200},
            },
        )
        http.delete(f"/apis/{group}/v1/namespaces/{NAMESPACE}/{plural}/w-{n:05d}")
    http.delete(f"/api/v1/namespaces/{NAMESPACE}")


def run_measured(command: list[str] | str, *, env: dict[str, str], shell: bool = False) -> tuple[float, int, str]:
    """(seconds, peak RSS in KiB of the largest process in the tree, stdout)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env, shell=shell)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if process.returncode != 0:
        raise SystemExit(f"{command!r} failed with exit code {process.returncode}")
    return elapsed, int(usage.ru_maxrss), text


def floor(emu: Emulator) -> float:
    """One discovery round and one fully parallel round of lists, nothing else."""

    def get(path: str) -> Any:
        request = urllib.request.Request(emu.url + path, headers={"Authorization": f"Bearer {emu.user_token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=512) as pool:
        core, groups = pool.map(get, ["/api", "/apis"])
        paths = [f"/api/{v}" for v in core["versions"]]
        paths += [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups["groups"]]
        lists = []
        for path, doc in zip(paths, pool.map(get, paths), strict=True):
            for resource in doc.get("resources", ()):
                if "/" not in resource["name"] and resource["namespaced"] and "list" in resource["verbs"]:
                    lists.append(f"{path}/namespaces/{NAMESPACE}/{resource['name']}")
        list(pool.map(get, lists))
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", type=int, default=150)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the fast measurements (median is reported)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    emu = Emulator(clock=FakeClock(), seed=0, controllers=False)
    emu.start()
    try:
        t0 = time.perf_counter()
        build_cluster(emu, types=args.types, objects=args.objects)
        print(f"built {args.types} CRD types and {args.objects} objects in {time.perf_counter() - t0:.1f}s")
        emu.knobs.latency(args.latency_ms)
        work = Path(tempfile.mkdtemp(prefix="nsstuck-bench-"))
        kubeconfig = emu.write_kubeconfig(work / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(work), "PYTHONPATH": str(REPO)}

        script = str(Path(sys.executable).parent / "nsstuck")
        nsstuck = [script, "diagnose", NAMESPACE, "--kubeconfig", str(kubeconfig), "--json"]
        cli_runs = [run_measured(nsstuck, env=env) for _ in range(args.repeat)]
        report = json.loads(cli_runs[-1][2])
        objects_seen = sum(len(f["objects"]) for f in report["findings"])
        cli_seconds = statistics.median(r[0] for r in cli_runs)
        peak_mb = max(r[1] for r in cli_runs) / 1024

        target = ClusterTarget(name="bench", kubeconfig=kubeconfig)
        inproc = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            diagnose_namespace(target, NAMESPACE, options=CollectOptions(deadline=60), clock=emu.clock.now)
            inproc.append(time.perf_counter() - started)
        inproc_seconds = statistics.median(inproc)
        floor_seconds = statistics.median(floor(emu) for _ in range(args.repeat))

        one_liner = (
            "kubectl api-resources --verbs=list --namespaced -o name | "
            f"xargs -n 1 kubectl get --show-kind --ignore-not-found -n {NAMESPACE}"
        )
        liner_seconds, _, liner_out = run_measured(["bash", "-o", "pipefail", "-c", one_liner], env=env)
        liner_objects = sum(1 for line in liner_out.splitlines() if "/w-" in line)
    finally:
        emu.stop()

    speedup = liner_seconds / cli_seconds
    over_floor = inproc_seconds / floor_seconds
    figures = {
        "types": args.types,
        "objects": args.objects,
        "latency_ms": args.latency_ms,
        "nsstuck_cli_seconds": round(cli_seconds, 3),
        "nsstuck_in_process_seconds": round(inproc_seconds, 3),
        "floor_seconds": round(floor_seconds, 3),
        "one_liner_seconds": round(liner_seconds, 3),
        "speedup_vs_one_liner": round(speedup, 1),
        "ratio_to_floor": round(over_floor, 2),
        "peak_rss_mb": round(peak_mb, 1),
        "objects_reported": objects_seen,
        "objects_seen_by_one_liner": liner_objects,
    }
    checks = [
        (f"{speedup:.1f}x faster than the one-liner", speedup >= 20, ">= 20x"),
        (f"{over_floor:.2f}x the floor", over_floor <= 2.0, "<= 2x"),
        (f"{peak_mb:.0f} MB peak RSS", peak_mb < 150, "< 150 MB"),
        (f"{objects_seen} of {args.objects} objects named in the report", objects_seen == args.objects, "all"),
    ]
    print(f"nsstuck diagnose (process, end to end):  {cli_seconds:7.3f} s   peak RSS {peak_mb:.0f} MB")
    print(f"nsstuck collect+diagnose (in process):   {inproc_seconds:7.3f} s")
    print(f"floor (1 discovery + 1 parallel list):    {floor_seconds:7.3f} s")
    print(f"kubectl one-liner (end to end):           {liner_seconds:7.3f} s   ({liner_objects} objects listed)")
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
