"""One bot per module for the tests that would each start it with the same configuration.

A test that takes `flow` runs on the module's shared bot (`remediation_bot`'s defaults) with a Slack
workspace and a cluster of its own (`SharedBot.lane`, tests/approvals/_flow.py); a test about another
configuration, a start, a crash or Socket Mode starts its own with `remediation_bot`. The module-scoped
fixture also keeps the module's tests in one process, in their order (tests/_scheduling.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.approvals._flow import Flow, SharedBot, shared_remediation_bot
from tests.fakes.slackapi.pytest_plugin import ENV_TO_CLEAR


@pytest.fixture(scope="module")
def shared_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedBot]:
    with pytest.MonkeyPatch.context() as env:
        for name in ENV_TO_CLEAR:  # as the `slack_env` fixture does for a test's own bot
            env.delenv(name, raising=False)
        with shared_remediation_bot(tmp_path_factory.mktemp("shared-bot")) as shared:
            yield shared


@pytest.fixture
def flow(shared_bot: SharedBot) -> Iterator[Flow]:
    """The module's bot, with a fresh Slack workspace and cluster for this test."""
    with shared_bot.lane() as flow:
        yield flow
