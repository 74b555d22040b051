"""A socket or file left open fails the test that leaked it, in pytest's process and in the children the
tests start, instead of burying the end of the output under ResourceWarnings."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._python import PYTHON, assert_no_resource_warning

REPO = Path(__file__).resolve().parents[2]

LEAKS = textwrap.dedent(
    """
    import gc
    import socket
    import warnings


    def test_drops_an_open_socket():
        s = socket.socket()
        del s
        gc.collect()


    def test_warns_itself():
        warnings.warn("unclosed file", ResourceWarning)


    def test_closes_what_it_opens():
        with socket.socket():
            pass
    """
)


def _pytest_with_our_settings(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_leaks.py").write_text(LEAKS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
         "-p", "no:cacheprovider", "-p", "no:randomly", "-q", str(tmp_path / "test_leaks.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_a_leak_in_a_test_fails_it(tmp_path: Path) -> None:
    done = _pytest_with_our_settings(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "FAILED test_leaks.py::test_drops_an_open_socket" in done.stdout, done.stdout
    assert "FAILED test_leaks.py::test_warns_itself" in done.stdout, done.stdout
    assert "1 passed" in done.stdout, done.stdout  # the one that closes its socket
    assert "ResourceWarning: unclosed <socket.socket" in done.stdout


@pytest.mark.parametrize(
    ("script", "leaks"),
    [
        ("import gc, socket\ns = socket.socket()\ndel s\ngc.collect()", True),
        ("import socket\nwith socket.socket():\n    pass", False),
    ],
)
def test_a_child_that_leaks_is_caught(script: str, leaks: bool) -> None:
    done = subprocess.run([*PYTHON, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0  # the warning does not stop the child: only its stderr shows it
    if leaks:
        with pytest.raises(AssertionError, match="left a resource open"):
            assert_no_resource_warning(done.stderr, "the child")
    else:
        assert_no_resource_warning(done.stderr, "the child")
