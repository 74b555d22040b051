"""The parallel run keeps what tests/_scheduling.py asks of it: the tests of one xdist group run in one
process, in their order. pytest-xdist's `--dist loadgroup` marks a grouped test by appending its group
to the test's id (Node._nodeid); a pytest that no longer reads that attribute (9.2) silently runs a
group's tests on any worker, side by side, which is what the `timing` group must never do."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODULE = textwrap.dedent(
    """
    import os
    import pytest

    def _record(name):
        with open(os.environ["WHERE"], "a") as out:
            out.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

    @pytest.mark.xdist_group("together")
    def test_first():
        _record("first")

    @pytest.mark.xdist_group("together")
    def test_second():
        _record("second")

    @pytest.mark.xdist_group("together")
    def test_third():
        _record("third")

    @pytest.mark.parametrize("n", range(6))
    def test_alone(n):
        _record(f"alone{n}")
    """
)


@pytest.mark.timeout(120)
def test_a_group_runs_in_one_process_in_its_order(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    where = tmp_path / "where.txt"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "--no-loadscope-reorder",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "test_grouped.py",
        ],
        cwd=tmp_path,
        env={"WHERE": str(where), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = dict(line.split() for line in where.read_text().splitlines())
    assert len(ran) == 9
    assert ran["first"] == ran["second"] == ran["third"], ran
    order = [line.split()[0] for line in where.read_text().splitlines() if not line.startswith("alone")]
    assert order == ["first", "second", "third"]
