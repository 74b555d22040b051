"""`nsstuck mcp`'s configuration: a malformed `mcp:` block, or a token missing from the environment, is a
clear error (exit 2) before anything is served; `mcp` is a command of --help and of the completion scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._cli import run_nsstuck

CLUSTERS = "clusters:\n  - name: alpha\n    in_cluster: true\n  - name: beta\n    in_cluster: true\n"


@pytest.mark.parametrize(
    ("block", "said"),
    [
        (
            "mcp:\n  tokens:\n    - name: holmes\n      token_env: T_ONE\n      clusters: [gamma]\n",
            "unknown cluster 'gamma'",
        ),
        ("mcp:\n  tokens:\n    - name: holmes\n      token_env: T_ONE\n      clusters: []\n", "mcp.tokens[0].clusters"),
        (
            "mcp:\n  tokens:\n    - name: holmes\n      token_env: not a name\n      clusters: [alpha]\n",
            "environment variable",
        ),
        ("mcp:\n  tokens:\n    - name: holmes\n      token: abc\n      clusters: [alpha]\n", "token"),
        (
            "mcp:\n  tokens:\n    - {name: a, token_env: T_ONE, clusters: [alpha]}\n"
            "    - {name: a, token_env: T_TWO, clusters: [beta]}\n",
            "duplicate token name",
        ),
        (
            "mcp:\n  tokens:\n    - {name: a, token_env: T_ONE, clusters: [alpha]}\n"
            "    - {name: b, token_env: T_ONE, clusters: [beta]}\n",
            "each token needs its own",
        ),
        ("mcp:\n  tokenz: []\n", "tokenz"),
    ],
)
def test_a_malformed_mcp_block_is_a_config_error(tmp_path: Path, block: str, said: str) -> None:
    config = tmp_path / "nsstuck.yaml"
    config.write_text(CLUSTERS + block)
    for args in (("config", "check", "--config", str(config)), ("mcp", "--config", str(config), "--http", "0")):
        done = run_nsstuck(*args)
        assert done.returncode == 2, done
        assert "mcp" in done.stderr + done.stdout
        assert said in done.stderr + done.stdout


def test_http_needs_every_token_in_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "nsstuck.yaml"
    config.write_text(CLUSTERS + "mcp:\n  tokens:\n    - {name: holmes, token_env: MCP_T_HOLMES, clusters: [alpha]}\n")
    done = run_nsstuck("mcp", "--config", str(config), "--http", "0")
    assert done.returncode == 2
    assert "MCP_T_HOLMES" in done.stderr
    assert "is not set" in done.stderr
    done = run_nsstuck("mcp", "--config", str(config), "--http", "0", env={"MCP_T_HOLMES": "short"})
    assert done.returncode == 2
    assert "shorter than 16" in done.stderr
    assert "short" not in done.stderr.replace("shorter", "")  # the value is never said


def test_http_without_tokens_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "nsstuck.yaml"
    config.write_text(CLUSTERS)
    done = run_nsstuck("mcp", "--config", str(config), "--http", "0")
    assert done.returncode == 2
    assert "--http needs at least one token" in done.stderr


def test_mcp_is_in_help_and_completion() -> None:
    assert "mcp" in run_nsstuck("--help").stdout
    helped = run_nsstuck("mcp", "--help")
    assert helped.returncode == 0
    assert "--http" in helped.stdout
    for shell in ("bash", "zsh"):
        script = run_nsstuck("completion", shell).stdout
        assert "mcp" in script
        assert "--http" in script


def test_what_the_door_refuses_before_it_serves(tmp_path: Path) -> None:
    """No cluster to serve, a port that is not one, and two tokens in one variable: each a one-line error,
    exit 2, before anything listens."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("clusters: []\n")
    done = run_nsstuck("mcp", "--config", str(empty))
    assert done.returncode == 2, done.stderr
    assert "nsstuck mcp serves the config's clusters: there are none" in done.stderr

    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n  - name: alpha\n    in_cluster: true\n"
        "mcp:\n  tokens:\n"
        "    - {name: ops, token_env: MCP_T_OPS, clusters: [alpha]}\n"
        "    - {name: holmes, token_env: MCP_T_HOLMES, clusters: [alpha]}\n"
    )
    port = run_nsstuck("mcp", "--config", str(config), "--http", "70000")
    assert port.returncode == 2, port.stderr
    assert "--http must be a port number, 0-65535" in port.stderr
    same = "x" * 32
    twice = run_nsstuck("mcp", "--config", str(config), "--http", "0", env={"MCP_T_OPS": same, "MCP_T_HOLMES": same})
    assert twice.returncode == 2, twice.stderr
    assert "MCP_T_HOLMES: the same token as ops's" in twice.stderr
    assert same not in twice.stderr  # the token itself is never said
