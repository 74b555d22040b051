"""The layer contracts hold on the tree, and a broken one fails the check (so CI would go red)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_contracts_are_kept() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("bot/kube/__init__.py", "import bot.diagnosis\n", "Layers"),
        ("bot/slack/__init__.py", "import bot.cli\n", "Layers"),
        ("bot/scheduler/__init__.py", "import bot.slack\n", "Layers"),
        ("bot/diagnosis/__init__.py", "import bot.kube\n", "Diagnosis imports nothing but the domain"),
        ("bot/domain/__init__.py", "import bot.store\n", "Layers"),
        ("bot/diagnosis/__init__.py", "import bot.settings\n", "Diagnosis imports nothing but the domain"),
        ("bot/services/__init__.py", "import kubernetes\n", "Only bot.kube imports the kubernetes client"),
        ("bot/slack/__init__.py", "import sqlalchemy\n", "Only bot.store imports SQLAlchemy and Alembic"),
        ("bot/cli.py", "import slack_sdk\n", "Only bot.slack imports slack_bolt and slack_sdk"),
        ("bot/services/__init__.py", "import bot.store.models\n", "The store's models stay inside bot.store"),
        ("bot/settings.py", "import bot.kube\n", "Layers"),
    ],
)
def test_a_broken_contract_fails_the_check(tree_copy: Path, module: str, line: str, contract: str) -> None:
    path = tree_copy / module
    path.write_text(path.read_text() + line)
    result = _lint(tree_copy)
    assert result.returncode != 0
    assert "1 broken" in result.stdout
    broken = [row for row in result.stdout.splitlines() if row.endswith("BROKEN")]
    assert any(row.startswith(contract) for row in broken), result.stdout
