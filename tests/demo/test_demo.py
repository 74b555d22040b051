"""`make demo` prints the conversation it printed before issue 17 moved the code around (the real bot,
the Slack emulator and one emulated cluster per seed article): behaviour kept, timings aside.

`conversation.txt` is what `make demo` printed at commit 3b179ff, with the acknowledgement times
replaced by N (durations are compared as DURATION on both sides, and the audit hashes the remediation's
thread quotes, which hash the entries' times, as HASH). A change that means to alter
what users read updates it on purpose, in the same commit.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests._python import PYTHON, assert_no_resource_warning
from tests.fakes.kubeapi import state_files

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("conversation.txt")


def _timeless(text: str) -> str:
    """Without what the wall clock decides: acknowledgement times, how long the seeds' namespaces have
    been terminating (their deletionTimestamps are fixed, the clock moves on), and the audit entries'
    hashes (each covers the entry's time)."""
    text = re.sub(r"after [0-9]+ ms\)", "after N ms)", text)
    text = re.sub(r"(audit #[0-9]+ · )`[0-9a-f]{12}`", r"\1`HASH`", text)
    return re.sub(r"\b[0-9]+[dhms]( [0-9]+[dhms])*\b", "DURATION", text)


@pytest.mark.slow
def test_make_demo_prints_the_same_conversation() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # the seeds' clusters restored from the states this run saved (or builds them and saves them there)
    states = state_files.shared_folder()
    done = subprocess.run(
        [*PYTHON, "scripts/demo.py", *(["--scenario-states", str(states)] if states is not None else [])],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_no_resource_warning(done.stderr, "make demo")
    assert _timeless(done.stdout).splitlines() == _timeless(EXPECTED.read_text()).splitlines()
