"""A command run as a child process and measured: from the first request the emulator hears from it to its
end (the interpreter's own start left out, which a loaded machine makes vary by a second), and its peak RSS.

The command runs without coverage.py even under `make test`: its tracer doubles the CPU of every line and
writes its data as the process exits, so a deadline measured under it is the tracer's as much as the
command's (a trickled answer's `diagnose --timeout 4` ended 0.1 s after its deadline alone, 1.2-1.4 s after
it traced in the full run). What these commands run is measured by the suite's other tests of the same
answers (tests/hostile/test_hostile_server.py runs each answer untimed too).

The first request is the emulator journal's own record of it (`Journaled.at`, taken as the request
arrives), read once the command has ended: no thread polls the journal while it runs (one did, every
2 ms, beside the emulator serving the command). The runner is an interpreter without `site` (`-I -S`:
it needs only `os`, `sys` and `time`), 13 ms of CPU against 32 ms, paid by every command measured."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.kubeapi.journal import Journal
from tests.foundation.test_config import REPO

# runs the command with posix_spawn and reports its elapsed time and peak RSS (wait4's rusage is the
# child's own, not the test process's)
_RUNNER = """
import os, sys, time
out, command = sys.argv[1], sys.argv[2:]
started = time.monotonic()
pid = os.posix_spawn(command[0], command, os.environ)
_, status, usage = os.wait4(pid, 0)
elapsed = time.monotonic() - started
with open(out, "w") as f:
    f.write(f"{elapsed} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class Measured:
    run: subprocess.CompletedProcess[str]
    seconds: float  # from the command's first request to its end
    peak_mb: float


def run_measured(command: list[str], *, env: dict[str, str], journal: Journal, figures: Path) -> Measured:
    """`command` (its first element an executable path) as a child process against an emulator whose
    `journal` is cleared first; `figures` is a scratch file of the test's."""
    env = {name: value for name, value in env.items() if not name.startswith("COVERAGE_")}
    journal.clear()
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _RUNNER, str(figures), *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    ended = time.monotonic()
    asked = journal.entries()  # what the command sent (the emulator's controllers are its admin)
    first = asked[0].at if asked else ended
    _, peak_kib = figures.read_text().split()
    return Measured(run, ended - first, int(peak_kib) / 1024)
