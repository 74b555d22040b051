"""Many `nsstuck` commands in one process, one after another (tests/hostile/test_hostile_server.py).

`python -m tests.hostile._batch RESULTS` reads a case a line from its standard input, as JSON
(`{"id": ..., "args": [...], "env": {...}}`), runs the command line's entry point on it in this process
(`run_in_this_process` of tests/_cli.py: what `run_nsstuck` runs, with what a fresh process has given to
it and what it changes put back), and appends to the file RESULTS a JSON line with the case's id, exit
code, stdout, stderr and this process's peak RSS so far (VmHWM of /proc/self/status, which only grows: it
bounds every case run up to then. Not `ru_maxrss`: Linux keeps that across exec, so a process started by a
large one, a pytest worker with its emulators and coverage, starts with its parent's peak); then it
writes the case's id on its standard output, which tells the caller the case has ended (so that it can
switch the emulator's rule for the next one). It ends at the end of its input.

The interpreter and the client libraries are started once for all the cases instead of once per case
(0.5-1 CPU-s each).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests._cli import run_in_this_process


def _peak_kib() -> int:
    """This process's own peak resident memory in KiB (VmHWM: its own address space's high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/status has no VmHWM")


def main(results_path: str) -> int:
    channel = sys.stdout  # the command's own output goes to its buffers, not here
    with open(results_path, "a", encoding="utf-8") as results:
        while line := sys.stdin.readline():
            case = json.loads(line)
            done = run_in_this_process(*case["args"], env=case["env"])
            peak_kib = _peak_kib()
            record = {
                "id": case["id"],
                "code": done.returncode,
                "stdout": done.stdout,
                "stderr": done.stderr,
                "peak_mb": peak_kib / 1024,
            }
            results.write(json.dumps(record) + "\n")
            results.flush()
            channel.write(case["id"] + "\n")
            channel.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
