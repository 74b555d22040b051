"""Benchmark: `nsstuck diagnose` on CRD-heavy clusters, against the floor and the kubectl one-liner.

    make bench            (or: PYTHONPATH=. .venv/bin/python -m bench.diagnose)

Two emulated clusters, each with one stuck namespace full of custom resources held by a finalizer
whose controller is gone (as the namespace controller leaves them), 20 ms of latency on every request
of the diagnosing identity, served over TLS:

- the small one: 150 namespaced CRD types and 2,100 objects;
- the large one: 1,000 namespaced CRD types and 6,000 objects.

On each, in the same run, processes all of them, interleaved (one of each, then again):

- nsstuck, end to end: the `nsstuck diagnose --json` process (interpreter start, imports, kubeconfig,
  collection, rules, the report printed), and its peak RSS;
- the floor: bench/_floor.py, a process that starts an interpreter, makes one discovery round and
  then every namespaced list at once, decoding every body, and nothing else; with 32, 64 and 128
  threads (the fastest is the floor);
- on the small one, the widely used one-liner, end to end: `kubectl api-resources --verbs=list
  --namespaced -o name | xargs -n 1 kubectl get --show-kind --ignore-not-found -n NS`.

This checkout's modules are compiled to bytecode first, as an installed nsstuck has them. It prints
the medians, the ratios against the targets (nsstuck within 2x the floor on both; peak RSS under 150 MB
and 200 MB; at least 20x faster than the one-liner on the small one) and the share of the machine's
CPU its host took meanwhile (steal): past 10%, the timing targets are "not measured".
Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import base64
import compileall
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench._proc import cpu_ticks, machine_cpu, stolen_share
from bench._report import finish
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP

NAMESPACE = "crd-heavy"
PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}
REPO = Path(__file__).resolve().parents[1]
FLOOR_THREADS = (32, 64, 128)
STEAL_LIMIT = 0.10


@dataclass(frozen=True)
class Shape:
    name: str
    types: int
    objects: int
    rss_limit_mb: float
    one_liner: bool


SHAPES = (Shape("small", 150, 2100, 150.0, True), Shape("large", 1000, 6000, 200.0, False))


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


# Runs a command and writes "seconds peak_rss_kib exit_code" to the file named first. A process of its
# own, small, starts the command: the peak RSS the kernel keeps for a process counts the memory of the
# process it was forked from (until its exec), and this benchmark's process holds the emulated clusters
_RUNNER = """
import os, sys, time
out, command = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.posix_spawnp(command[0], command, os.environ)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - started
with open(out, "w") as f:
    f.write(f"{elapsed} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def run_measured(command: list[str], *, env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, peak RSS in KiB, stdout) of `command`, started by a small runner process (see _RUNNER)."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as figures:
        subprocess.run(
            [sys.executable, "-c", _RUNNER, figures.name, *command],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
            check=True,
        )
        seconds, peak, code = figures.read().split()
        out.seek(0)
        text = out.read().decode()
    if int(code) != 0:
        raise SystemExit(f"{command!r} failed with exit code {code}")
    return float(seconds), int(peak), text


def measure(shape: Shape, repeat: int, latency_ms: float, work: Path, program: list[str]) -> dict[str, Any]:
    emu = Emulator(clock=FakeClock(), seed=0, controllers=False)
    emu.start()
    try:
        started = time.perf_counter()
        build_cluster(emu, types=shape.types, objects=shape.objects)
        built = time.perf_counter() - started
        emu.knobs.latency(latency_ms)
        kubeconfig = emu.write_kubeconfig(work / f"{shape.name}.kubeconfig")
        document = yaml.safe_load(kubeconfig.read_text())
        server = document["clusters"][0]["cluster"]["server"]
        ca_file = work / f"{shape.name}-ca.pem"
        ca_file.write_bytes(base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]))
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(work), "PYTHONPATH": str(REPO)}
        env.pop("NSSTUCK_CONFIG", None)

        nsstuck = [*program, "diagnose", NAMESPACE, "--kubeconfig", str(kubeconfig), "--json"]
        # -P: bench/ itself is not put first on sys.path (bench/socket.py would hide the standard library's)
        floor = [sys.executable, "-P", str(REPO / "bench" / "_floor.py"), server, emu.user_token, str(ca_file)]
        floor.append(NAMESPACE)
        runs: list[tuple[float, int, str]] = []
        floors: dict[int, list[float]] = {threads: [] for threads in FLOOR_THREADS}
        floor_objects = 0
        for _ in range(repeat):  # interleaved: the machine's drift touches each alike
            runs.append(run_measured(nsstuck, env=env))
            for threads in FLOOR_THREADS:
                seconds, _, said = run_measured([*floor, str(threads)], env=env)
                floors[threads].append(seconds)
                floor_objects = int(said.split()[0])
        report = json.loads(runs[-1][2])
        figures: dict[str, Any] = {
            "types": shape.types,
            "objects": shape.objects,
            "built_in_seconds": round(built, 1),
            "nsstuck_seconds": round(statistics.median(r[0] for r in runs), 3),
            "nsstuck_runs_seconds": [round(r[0], 3) for r in runs],
            "peak_rss_mb": round(max(r[1] for r in runs) / 1024, 1),
            "floor_seconds_by_threads": {t: round(statistics.median(s), 3) for t, s in floors.items()},
            "objects_reported": sum(len(f["objects"]) for f in report["findings"]),
            "objects_listed_by_floor": floor_objects,
        }
        figures["floor_seconds"] = min(figures["floor_seconds_by_threads"].values())
        figures["ratio_to_floor"] = round(figures["nsstuck_seconds"] / figures["floor_seconds"], 2)
        if shape.one_liner:
            one_liner = (
                "kubectl api-resources --verbs=list --namespaced -o name | "
                f"xargs -n 1 kubectl get --show-kind --ignore-not-found -n {NAMESPACE}"
            )
            seconds, _, said = run_measured(["bash", "-o", "pipefail", "-c", one_liner], env=env)
            figures["one_liner_seconds"] = round(seconds, 3)
            figures["objects_seen_by_one_liner"] = sum(1 for line in said.splitlines() if "/w-" in line)
            figures["speedup_vs_one_liner"] = round(seconds / figures["nsstuck_seconds"], 1)
        return figures
    finally:
        emu.stop()


def _our_cpu() -> float:
    """CPU time of this process (the emulators) and of the processes it ran and waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each process (the median is reported)")
    parser.add_argument("--only", choices=[s.name for s in SHAPES], help="measure one cluster only")
    parser.add_argument(
        "--nsstuck",
        default=str(Path(sys.executable).parent / "nsstuck"),
        help="the nsstuck program to measure (a command line; default: this checkout's console script), "
        "e.g. a script running another checkout's bot.cli, to compare two revisions in one run",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    # this checkout's modules compiled, as `pip install` and the image leave an installed nsstuck: with
    # PYTHONDONTWRITEBYTECODE set (the image and some shells set it), every measured run would compile
    # them again instead (about 60 ms on each cluster)
    compileall.compile_dir(REPO / "bot", quiet=1)

    work = Path(tempfile.mkdtemp(prefix="nsstuck-bench-"))
    ticks, machine_before, started, ours_before = cpu_ticks(), machine_cpu(), time.monotonic(), _our_cpu()
    program = shlex.split(args.nsstuck)
    results = {
        s.name: measure(s, args.repeat, args.latency_ms, work, program) for s in SHAPES if args.only in (None, s.name)
    }
    stolen = stolen_share(ticks, cpu_ticks())
    # what other processes of the machine took meanwhile (other work on it makes the timings noisy)
    busy, every = (after - before for after, before in zip(machine_cpu(), machine_before, strict=True))
    ours = (_our_cpu() - ours_before) / (time.monotonic() - started)
    others = max(0.0, busy / every * (os.cpu_count() or 1) - ours) if every else 0.0
    measured = stolen <= STEAL_LIMIT
    figures: dict[str, Any] = {
        "latency_ms": args.latency_ms,
        "cpu_stolen_by_host": round(stolen, 3),
        "other_processes_cores": round(others, 2),
        **results,
    }
    checks = []
    for shape in SHAPES:
        if shape.name not in results:
            continue
        got = results[shape.name]
        print(f"{shape.name} cluster: {shape.types} CRD types, {shape.objects} objects, {args.latency_ms:g} ms "
              f"per request (built in {got['built_in_seconds']} s)")  # fmt: skip
        print(f"  nsstuck diagnose (process, end to end): {got['nsstuck_seconds']:7.3f} s   "
              f"peak RSS {got['peak_rss_mb']:.0f} MB   runs {got['nsstuck_runs_seconds']}")  # fmt: skip
        floors = ", ".join(f"{t} threads {s:.3f} s" for t, s in got["floor_seconds_by_threads"].items())
        print(f"  floor (process: 1 discovery round, every list at once): {got['floor_seconds']:.3f} s ({floors})")
        print(f"  nsstuck / floor: {got['ratio_to_floor']:.2f}x")
        if "one_liner_seconds" in got:
            print(f"  kubectl one-liner (end to end): {got['one_liner_seconds']:7.3f} s "
                  f"({got['objects_seen_by_one_liner']} objects listed)")  # fmt: skip
        timing = [(f"{shape.name}: {got['ratio_to_floor']:.2f}x the floor", got["ratio_to_floor"] <= 2.0, "<= 2x")]
        if "speedup_vs_one_liner" in got:
            speedup = got["speedup_vs_one_liner"]
            timing.append((f"{shape.name}: {speedup:.1f}x faster than the one-liner", speedup >= 20, ">= 20x"))
        if measured:
            checks += timing
        else:
            for text, _, goal in timing:
                print(f"  not measured: {text} (target {goal}): the host took {stolen:.0%} of the CPU")
        checks += [
            (f"{shape.name}: {got['peak_rss_mb']:.0f} MB peak RSS", got["peak_rss_mb"] < shape.rss_limit_mb,
             f"< {shape.rss_limit_mb:.0f} MB"),
            (f"{shape.name}: {got['objects_reported']} of {shape.objects} objects named in the report",
             got["objects_reported"] == shape.objects, "all"),
        ]  # fmt: skip
    print(
        f"noise: {stolen:.1%} of the machine's CPU time was taken by its host (steal) during the run; other "
        f"processes used {others:.2f} of its {os.cpu_count()} cores on average"
    )
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
