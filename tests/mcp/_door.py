"""Driving `nsstuck mcp` with the `mcp` SDK's own client: over stdio (the SDK starts the process) and over
streamable HTTP (a process of the test's, its port read from its log line)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests._cli import REPO
from tests._python import PYTHON

# the words of a refused cluster: the same whether it exists elsewhere or not
UNKNOWN_CLUSTER = "unknown cluster"


def write_config(path: Path, kubeconfig: Path, *, tokens: dict[str, tuple[str, list[str]]] | None = None) -> Path:
    """A config of two clusters on the same emulator (`alpha` and `beta`), and tokens name -> (env, clusters)."""
    lines = ["clusters:"]
    for name in ("alpha", "beta"):
        lines += [f"  - name: {name}", f"    kubeconfig: {kubeconfig}"]
    if tokens:
        lines += ["mcp:", "  tokens:"]
        for name, (env, clusters) in tokens.items():
            lines += [f"    - name: {name}", f"      token_env: {env}", f"      clusters: [{', '.join(clusters)}]"]
    path.write_text("\n".join(lines) + "\n")
    return path


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    env.update(extra or {})
    return env


async def _calls(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    tools = await client.list_tools()
    results = []
    for name, arguments in calls:
        result = await client.call_tool(name, arguments)
        results.append(result)
    return {"tools": tools.tools, "results": results}


def over_stdio(
    config: Path, calls: list[tuple[str, dict[str, Any]]], env: dict[str, str] | None = None
) -> dict[str, Any]:
    params = StdioServerParameters(
        command=PYTHON[0],
        args=[*PYTHON[1:], "-m", "bot", "mcp", "--config", str(config)],
        env=child_env(env),
        cwd=str(REPO),
    )

    async def run() -> dict[str, Any]:
        async with Client(params) as client:
            return await _calls(client, calls)

    return anyio.run(run)


def over_http(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await _calls(client, calls)

    return anyio.run(run)


def answer(result: Any) -> dict[str, Any]:
    """A tool's JSON answer: its structured content, which its one text block says as JSON too."""
    assert not result.is_error, result.content
    assert len(result.content) == 1
    assert json.loads(result.content[0].text) == result.structured_content
    data: dict[str, Any] = result.structured_content
    return data


def refusal(result: Any) -> str:
    assert result.is_error, result
    assert result.structured_content is None
    text: str = result.content[0].text
    return text


class HttpDoor:
    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    def log_text(self) -> str:
        return self.log.read_text()


@contextmanager
def http_door(config: Path, env: dict[str, str], log: Path) -> Iterator[HttpDoor]:
    with log.open("w") as err:
        process = subprocess.Popen(
            [*PYTHON, "-m", "bot", "mcp", "--config", str(config), "--http", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=child_env(env),
            cwd=REPO,
            text=True,
        )
    try:
        deadline = time.monotonic() + 45
        port = None
        while port is None:
            found = re.search(r"serving streamable HTTP on http://127\.0\.0\.1:(\d+)/mcp", log.read_text())
            if found:
                port = int(found[1])
            elif process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nsstuck mcp --http did not start: {log.read_text()}")
            else:
                time.sleep(0.05)
        yield HttpDoor(process, f"http://127.0.0.1:{port}/mcp", log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
