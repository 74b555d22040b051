"""`make demo` prints the conversation it printed before issue 17 moved the code around (the real bot,
the Slack emulator and one emulated cluster per seed article): behaviour kept, timings aside.

`conversation.txt` is what `make demo` printed at commit 3b179ff, with the acknowledgement times
replaced by N. A change that means to alter what users read updates it on purpose, in the same commit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("conversation.txt")


def _timeless(text: str) -> str:
    return re.sub(r"after [0-9]+ ms\)", "after N ms)", text)


@pytest.mark.slow
def test_make_demo_prints_the_same_conversation() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "scripts/demo.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ResourceWarning" not in done.stderr
    assert _timeless(done.stdout).splitlines() == EXPECTED.read_text().splitlines()
