"""One bot per module and configuration for the tests that would each start it the same way: the
fixtures `shared_bots`, `lane` and `flow`, made available by the conftest.py of each folder that uses
them (tests/approvals, tests/reliability).

A test that takes `flow` runs on the module's shared bot of `remediation_bot`'s defaults; one that takes
`lane` asks for the module's bot of a given `required_approvals` and database backend
(`lane(required=2, postgres=True)`). Either way it has a Slack workspace and a cluster of its own
(`SharedBot.lane`, tests/approvals/_flow.py), and its assertions are what they were on a bot of its own.
A test about another configuration, a start, a crash or Socket Mode starts its own bot with
`remediation_bot`. A module-scoped fixture also keeps the module's tests that use it in one process, in
their order (tests/_scheduling.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.approvals._flow import Flow, SharedBot, shared_remediation_bot
from tests.fakes.slackapi.pytest_plugin import ENV_TO_CLEAR
from tests.pgdatabase import temporary_database


class SharedBots:
    """The module's bots, started when a test first asks for their configuration, stopped at its end
    (then their PostgreSQL databases dropped)."""

    def __init__(self, stack: ExitStack, workdir: Path) -> None:
        self.stack = stack
        self.workdir = workdir
        self.bots: dict[tuple[int, bool], SharedBot] = {}

    def get(self, *, required: int = 1, postgres: bool = False) -> SharedBot:
        key = (required, postgres)
        if key not in self.bots:
            database = None
            if postgres:
                admin = os.environ.get("NSSTUCK_TEST_POSTGRES_URL")
                assert admin, "a PostgreSQL test runs only with NSSTUCK_TEST_POSTGRES_URL (tests/conftest.py)"
                database = self.stack.enter_context(temporary_database(admin))
            workdir = self.workdir / f"required{required}-{'postgresql' if postgres else 'sqlite'}"
            workdir.mkdir(exist_ok=True)  # a start that failed is tried again by the next test
            self.bots[key] = self.stack.enter_context(
                shared_remediation_bot(workdir, required=required, database=database)
            )
        return self.bots[key]


@pytest.fixture(scope="module")
def shared_bots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedBots]:
    with pytest.MonkeyPatch.context() as env, ExitStack() as stack:
        for name in ENV_TO_CLEAR:  # as the `slack_env` fixture does for a test's own bot
            env.delenv(name, raising=False)
        yield SharedBots(stack, tmp_path_factory.mktemp("shared-bots"))


@pytest.fixture
def lane(shared_bots: SharedBots) -> Iterator[Callable[..., Flow]]:
    """`lane(required=..., postgres=...)`: the module's bot of that configuration, with a fresh Slack
    workspace and cluster for this test."""
    with ExitStack() as stack:
        yield lambda **config: stack.enter_context(shared_bots.get(**config).lane())


@pytest.fixture
def flow(lane: Callable[..., Flow]) -> Flow:
    """The module's bot of `remediation_bot`'s defaults, with a fresh Slack workspace and cluster."""
    return lane()
