"""Emulated clusters served by `tests.fakes.kubeapi` processes of their own, for the benchmarks that
need many clusters at once (a process of their own: the bot's interpreter lock is not theirs)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def emulated_clusters(
    count: int,
    *,
    processes: int,
    latency_ms: float,
    work: Path,
    build: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[list[Path], list[int]]]:
    """`count` clusters, each built by `build` ("module:function", called with the emulator and the
    cluster's index), served by `processes` emulator processes between them, with `latency_ms` added to
    every request: the clusters' kubeconfigs (in index order) and the processes' ids. The processes are
    stopped when the block ends. They run with ResourceWarning made an error; a socket or file one of
    them left open (shown on its stderr) fails the block once they are stopped."""
    (work / "kubeconfigs").mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}
    servers: list[subprocess.Popen[str]] = []
    share = -(-count // processes)
    try:
        for first in range(0, count, share):
            command = [
                sys.executable, "-W", "error::ResourceWarning", "-m", "tests.fakes.kubeapi",
                "--clusters", str(min(share, count - first)), "--first-index", str(first),
                "--kubeconfig-dir", str(work / "kubeconfigs"), "--build", build, "--fake-clock",
                "--no-background-controllers", "--latency-ms", str(latency_ms),
            ]  # fmt: skip
            with (work / f"emulator-{first}.err").open("w") as errors:
                server = subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=errors, text=True, env=environment, cwd=REPO
                )
            servers.append(server)
        kubeconfigs: dict[int, Path] = {}
        for server in servers:
            assert server.stdout is not None
            for line in server.stdout:
                if line.startswith("CLUSTER "):
                    _, index, _, path = line.split()
                    kubeconfigs[int(index)] = Path(path)
                elif line.strip() == "READY":
                    break
            else:
                raise RuntimeError(f"an emulator process exited early (code {server.wait()})")
        yield [kubeconfigs[i] for i in range(count)], [server.pid for server in servers]
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
            if server.stdout is not None:
                server.stdout.close()
    for first in range(0, count, share):
        said = (work / f"emulator-{first}.err").read_text()
        if "ResourceWarning" in said:
            raise RuntimeError(f"emulator process {first} left a resource open:\n{said[-4000:]}")
