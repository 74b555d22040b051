"""`nsstuck serve` refuses to start, with one line and the contract's exit code, when it cannot work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import _migrated
from tests._cli import run_nsstuck

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    _migrated.migrated(url)
    return url


def _last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("nsstuck:")][-1]


def test_missing_bot_token(migrated: str) -> None:
    result = run_nsstuck("serve", env={"NSSTUCK_DATABASE_URL": migrated})
    assert result.returncode == 2
    assert _last_line(result.stderr) == (
        "nsstuck: config error: environment: SLACK_BOT_TOKEN: required by serve (the bot token, xoxb-...)"
    )


def test_make_run_without_slack_credentials_says_what_to_set_where_to_get_them_and_make_demo(
    tmp_path: Path,
) -> None:
    """`make run` (the README's first command) on a machine with no Slack app yet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "MAKE"))}
    env["NSSTUCK_DATABASE_URL"] = f"sqlite:///{tmp_path / 'run.db'}"
    result = subprocess.run(
        # the virtual environment is there already: make is not to reinstall it
        ["make", "--no-print-directory", "-o", ".venv/bin/.installed", "run"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    said = result.stderr
    for variable in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        assert variable in said
    assert "Install App" in said
    assert 'README, "From nothing to a working bot in your workspace"' in said
    assert "make demo" in said
    assert _last_line(said) == (
        "nsstuck: config error: environment: SLACK_BOT_TOKEN: required by serve (the bot token, xoxb-...)"
    )
    readme = (REPO / "README.md").read_text()
    assert "\n### From nothing to a working bot in your workspace\n" in readme
    assert "\ndemo: install\n" in (REPO / "Makefile").read_text()


def test_http_mode_needs_the_signing_secret(migrated: str) -> None:
    result = run_nsstuck("serve", env={"NSSTUCK_DATABASE_URL": migrated, "SLACK_BOT_TOKEN": "xoxb-1"})
    assert result.returncode == 2
    assert "SLACK_SIGNING_SECRET: required in HTTP mode" in result.stderr
    assert "SLACK_SIGNING_SECRET  HTTP mode: the Signing Secret" in result.stderr  # and where it is


def test_an_unmigrated_database_is_refused(tmp_path: Path) -> None:
    env = {"NSSTUCK_DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}", "SLACK_BOT_TOKEN": "xoxb-1",
           "SLACK_SIGNING_SECRET": "s"}  # fmt: skip
    result = run_nsstuck("serve", env=env)
    assert result.returncode == 2
    assert "run `nsstuck db upgrade` first" in result.stderr


def test_unreachable_slack_is_one_line_without_the_token(migrated: str) -> None:
    env = {
        "NSSTUCK_DATABASE_URL": migrated,
        "SLACK_BOT_TOKEN": "xoxb-very-secret-999",
        "SLACK_SIGNING_SECRET": "signing-secret-888",
        "NSSTUCK_SLACK_API_URL": "http://127.0.0.1:1/api/",
    }
    result = run_nsstuck("serve", env=env)
    assert result.returncode == 1
    assert _last_line(result.stderr) == "nsstuck: cannot reach the Slack API at http://127.0.0.1:1/api/: URLError"
    assert "xoxb-very-secret-999" not in result.stderr + result.stdout
    assert "signing-secret-888" not in result.stderr + result.stdout
