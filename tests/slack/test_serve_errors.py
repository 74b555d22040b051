"""`nsstuck serve` refuses to start, with one line and the contract's exit code, when it cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store import migrating
from tests.foundation.test_config import run_nsstuck


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    migrating.upgrade(url)
    return url


def _last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("nsstuck:")][-1]


def test_missing_bot_token(migrated: str) -> None:
    result = run_nsstuck("serve", env={"NSSTUCK_DATABASE_URL": migrated})
    assert result.returncode == 2
    assert _last_line(result.stderr) == (
        "nsstuck: config error: environment: SLACK_BOT_TOKEN: required by serve (the bot token, xoxb-...)"
    )


def test_http_mode_needs_the_signing_secret(migrated: str) -> None:
    result = run_nsstuck("serve", env={"NSSTUCK_DATABASE_URL": migrated, "SLACK_BOT_TOKEN": "xoxb-1"})
    assert result.returncode == 2
    assert "SLACK_SIGNING_SECRET: required in HTTP mode" in result.stderr


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
