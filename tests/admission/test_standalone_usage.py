"""`nsstuck admission serve` refuses bad flags and files with one line and exit 2, before it listens
(contract §1), and never prints a kubeconfig's secret; `nsstuck --help` lists the command."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from tests._cli import run_nsstuck
from tests.admission._endpoint import write_pair

TOKEN = "s3cr3t-token-value-never-said"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_pair(trustme.CA(), tmp_path)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        f"users: [{{name: u, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


def serve(*args: str) -> tuple[int, str, str]:
    done = run_nsstuck("admission", "serve", *args)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--budget", "0"], "nsstuck: --budget must be more than 0 and at most 28 seconds (the API server allows 30)"),
        (["--budget", "29"], "nsstuck: --budget must be more than 0 and at most 28 seconds (the API server allows 30)"),
        (["--port", "70000"], "nsstuck: --port must be a port number, 0-65535 (0: any free port)"),
        (["--context", "nope"], "nsstuck: cluster 'nope': kubeconfig "),
    ],
    ids=["budget-0", "budget-29", "port", "context"],
)
def test_bad_flags_exit_2_with_one_line(pair: tuple[Path, Path], kubeconfig: Path, flags: list[str], said: str) -> None:
    cert, key = pair
    code, out, err = serve("--kubeconfig", str(kubeconfig), "--cert", str(cert), "--key", str(key), *flags)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(said)
    assert TOKEN not in err


def test_bad_files_exit_2_with_one_line(pair: tuple[Path, Path], kubeconfig: Path, tmp_path: Path) -> None:
    cert, key = pair
    missing = tmp_path / "missing.pem"
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    cases = [
        (["--cert", str(missing), "--key", str(key)], f"nsstuck: --cert '{missing}' does not exist or is not a file"),
        (
            ["--cert", str(not_pem), "--key", str(key)],
            f"nsstuck: --cert '{not_pem}' and --key '{key}' cannot serve TLS",
        ),
        (["--cert", str(key), "--key", str(cert)], f"nsstuck: --cert '{key}' and --key '{cert}' cannot serve TLS"),
        (
            ["--cert", str(cert), "--key", str(key), "--kubeconfig", str(missing)],
            f"nsstuck: kubeconfig '{missing}' does not exist or is not a file",
        ),
    ]
    for flags, said in cases:
        code, _, err = serve("--kubeconfig", str(kubeconfig), *flags)
        assert (code, len(err.splitlines())) == (2, 1), err
        assert err.startswith(said), err
    code, _, err = serve("--kubeconfig", str(kubeconfig), "--cert", str(cert))
    assert code == 2
    assert "the following arguments are required: --key" in err
    code, _, err = serve("--kubeconfig", str(kubeconfig), "--cert", str(cert), "--key", str(key), "--mode", "block")
    assert code == 2
    assert "invalid choice: 'block'" in err


def test_help_lists_the_command() -> None:
    done = run_nsstuck("--help")
    assert "admission" in done.stdout
    done = run_nsstuck("admission", "serve", "--help")
    assert done.returncode == 0
    for flag in ("--kubeconfig", "--context", "--cert", "--key", "--port", "--budget", "--mode"):
        assert flag in done.stdout
