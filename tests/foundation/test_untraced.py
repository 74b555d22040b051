"""The tests run without a tracer (tests/_untraced.py) run no code of bot/: leaving them untraced costs the
coverage report nothing."""

from __future__ import annotations

import re
from pathlib import Path

from tests._untraced import UNTRACED, runs_no_bot_code

TESTS = Path(__file__).resolve().parents[1]
# an import of bot/, or a helper that runs the CLI or the bot
RUNS_BOT = re.compile(r"^\s*(from|import) bot\b|\b(run_nsstuck|serve_process|remediation_bot|bot_process)\b", re.M)


def test_the_untraced_tests_run_no_bot_code() -> None:
    modules = [path for folder in UNTRACED for path in sorted(folder.rglob("*.py"))]
    assert len(modules) > 20, modules
    assert all(runs_no_bot_code(path) for path in modules)
    running = [str(path.relative_to(TESTS)) for path in modules if RUNS_BOT.search(path.read_text())]
    assert running == [], f"these run bot/ code, and would go unmeasured: {running}"
    assert not runs_no_bot_code(TESTS / "diagnosis" / "test_scenarios.py")
