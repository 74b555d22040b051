"""The `history` tool on SQLite and PostgreSQL: the MCP server connected to the SDK's client in process (the
SDK's own in-process connection), answering what `nsstuck history --json` answers, of the caller's clusters only."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bot.kube.registry import ClusterRegistry
from bot.mcp.server import build_server
from bot.services.agents import AgentTools, Caller
from bot.services.limiting import CommandLimits
from bot.settings import load_config
from bot.store.database import Database
from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests.mcp._door import answer, refusal

CONFIG = "clusters:\n  - name: alpha\n    in_cluster: true\n  - name: beta\n    in_cluster: true\n"


def _calls(url: str, config: Path, caller: Caller, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    app = load_config(config)
    tools = AgentTools(
        app,
        ClusterRegistry.from_config(app, config),
        limits=CommandLimits(user_per_minute=20, channel_per_minute=60),
        database=lambda: Database(url),
        max_answer=1 << 20,
        no_progress_after=1800.0,
    )

    async def run() -> list[Any]:
        async with Client(build_server(tools, stdio_caller=caller)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)


def test_history_answers_as_the_cli_within_the_callers_clusters(database_url: str, tmp_path: Path) -> None:
    migrated(database_url)
    db = Database(database_url)
    with db.unit_of_work() as uow:
        for uid, cluster, namespace in (("u1", "alpha", "team-a"), ("u2", "beta", "team-b"), ("u3", "alpha", "web")):
            uow.incidents.open_for(
                cluster=cluster, namespace=namespace, namespace_uid=uid,
                terminating_since=datetime(2026, 11, 21, 8, 0, tzinfo=UTC), cause="orphaned_finalizer",
            )  # fmt: skip
    db.dispose()
    config = tmp_path / "nsstuck.yaml"
    config.write_text(CONFIG)
    everything, alpha, beta, bad = _calls(
        database_url,
        config,
        Caller("holmes", frozenset({"alpha"})),
        [
            ("history", {}),
            ("history", {"cluster": "alpha", "open": True}),
            ("history", {"cluster": "beta"}),
            ("history", {"limit": 0}),
        ],
    )
    seen = answer(everything)
    assert {i["namespace"] for i in seen["incidents"]} == {"team-a", "web"}  # never beta's team-b
    assert seen["summary"]["incidents"] == 2
    cli = run_nsstuck("history", "--cluster", "alpha", "--open", "--json", env={"NSSTUCK_DATABASE_URL": database_url})
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    got = answer(alpha)
    for document in (expected, got):
        document.pop("generated_at")
        for incident in document["incidents"]:
            incident.pop("open_for_seconds", None)
    assert got == expected
    assert "unknown cluster 'beta'" in refusal(beta)
    assert "limit must be" in refusal(bad)


def test_calls_over_the_slash_commands_limits_are_refused_in_words(tmp_path: Path) -> None:
    """The door holds each token to NSSTUCK_USER_COMMANDS_PER_MINUTE (here 2) and the whole door to the
    channel limit, as the slash commands are held; a refused call does no work (list_clusters needs no
    cluster or database, so what is counted is the limit alone)."""
    config = tmp_path / "nsstuck.yaml"
    config.write_text(CONFIG)
    app = load_config(config)
    registry = ClusterRegistry.from_config(app, config)
    tools = AgentTools(
        app,
        registry,
        limits=CommandLimits(user_per_minute=2, channel_per_minute=3),
        database=lambda: Database(f"sqlite:///{tmp_path / 'never.db'}"),
        max_answer=1 << 20,
        no_progress_after=1800.0,
    )

    async def run() -> list[Any]:
        results = []
        for name in ("holmes", "holmes", "holmes", "kagent", "kagent"):
            async with Client(build_server(tools, stdio_caller=Caller(name, frozenset({"alpha"})))) as client:
                results.append(await client.call_tool("list_clusters", {}))
        return results

    try:
        first, second, third, other, over_door = anyio.run(run)
    finally:
        registry.close()
    assert answer(first) == answer(second) == {"clusters": [{"name": "alpha", "watched": False}]}
    assert "rate limit: this token asked too often in the last minute" in refusal(third)
    assert answer(other)["clusters"] == [{"name": "alpha", "watched": False}]  # another token's own count
    assert "rate limit: this server asked too often in the last minute" in refusal(over_door)
    assert not (tmp_path / "never.db").exists()
