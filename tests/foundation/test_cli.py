"""The console script: help everywhere, exit codes of the contract, no tracebacks for user mistakes."""

from __future__ import annotations

import argparse
import io
import shutil
import sys
from pathlib import Path

import pytest

from bot.cli import build_parser, main
from tests._cli import run_nsstuck_process as run_nsstuck  # the command line as a process: exit codes, stderr


def _all_command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.extend(_all_command_paths(sub, (*prefix, name)))
    return paths


COMMAND_PATHS = _all_command_paths(build_parser())


def test_contract_commands_exist() -> None:
    for path in [
        ("serve",),
        ("diagnose",),
        ("db", "upgrade"),
        ("history",),
        ("digest", "run"),
        ("audit", "export"),
        ("audit", "verify"),
        ("clusters", "check"),
    ]:
        assert path in COMMAND_PATHS


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "nsstuck")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as caught:
        sys_stdout, sys.stdout = sys.stdout, out
        try:
            main([*path, "--help"])
        finally:
            sys.stdout = sys_stdout
    assert caught.value.code == 0
    text = out.getvalue()
    assert text.startswith(f"usage: nsstuck{' ' if path else ''}{' '.join(path)}")
    assert len(text.splitlines()) > 3


def test_console_script_is_installed() -> None:
    script = shutil.which("nsstuck", path=str(Path(sys.executable).parent))
    assert script is not None
    result = run_nsstuck("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("nsstuck ")


def test_unknown_command_is_a_usage_error() -> None:
    result = run_nsstuck("diagnoze", "x")
    assert result.returncode == 2
    assert "invalid choice: 'diagnoze'" in result.stderr
    assert "Traceback" not in result.stderr


def test_diagnose_unknown_cluster_suggests_a_name(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  - name: prod-eu\n    in_cluster: true\n")
    result = run_nsstuck("diagnose", "istio-system", "--cluster", "prod-ue", env={"NSSTUCK_CONFIG": str(config)})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "nsstuck: unknown cluster 'prod-ue' (registered: prod-eu); did you mean 'prod-eu'?"
    )


def test_diagnose_rejects_both_selection_styles(tmp_path: Path) -> None:
    result = run_nsstuck("diagnose", "x", "--cluster", "a", "--kubeconfig", str(tmp_path))
    assert result.returncode == 2
    assert "either --cluster NAME or --kubeconfig PATH" in result.stderr


def test_diagnose_missing_kubeconfig(tmp_path: Path) -> None:
    result = run_nsstuck("diagnose", "x", "--kubeconfig", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_db_upgrade_on_unreachable_database_is_one_clear_line() -> None:
    url = "postgresql+psycopg://nsstuck:hunter2@127.0.0.1:1/nsstuck"
    result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": url})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nsstuck: cannot reach the database postgresql+psycopg://nsstuck:***@127.0.0.1:1/")
    assert "hunter2" not in result.stderr


def test_unsupported_database_url() -> None:
    result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": "mysql://x@y/z"})
    assert result.returncode == 2
    assert "unsupported database 'mysql'" in result.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql+psycopg://nsstuck:hunt@er2@127.0.0.1:1/nsstuck", "write an '@' in the password as %40"),
        ("postgresql+psycopg://nsstuck:hunter2@127.0.0.1:notaport/nsstuck", "not a valid SQLAlchemy URL"),
    ],
    ids=["unencoded-at", "port-not-a-number"],
)
def test_a_database_url_that_cannot_work_is_named_without_its_password(url: str, message: str) -> None:
    result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": url})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert "hunt" not in result.stderr
    assert "er2" not in result.stderr


def test_a_password_given_as_a_query_parameter_is_hidden() -> None:
    url = "postgresql+psycopg://nsstuck@127.0.0.1:1/nsstuck?password=hunter2&sslmode=disable"
    result = run_nsstuck("db", "upgrade", env={"NSSTUCK_DATABASE_URL": url})
    assert result.returncode == 1
    assert "password=***" in result.stderr
    assert "sslmode=disable" in result.stderr
    assert "hunter2" not in result.stderr
