"""The emulators' own tests run without a tracer (a pytest plugin, loaded by tests/conftest.py).

`make test` measures the coverage of `bot/`; the tests of the Kubernetes and Slack emulators run no code
of `bot/` (tests/foundation/test_untraced.py holds them to that), yet coverage.py's tracer made every
line they run about twice as slow (tests/fakes/tracing.py). So their setup, call and teardown run with the
tracer of their thread removed and put back afterwards; the figures of the coverage report are the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.tracing import untraced_here

TESTS = Path(__file__).resolve().parent
# the folders of tests that run no code of bot/
UNTRACED = (TESTS / "emulator", TESTS / "slack_emulator")


def runs_no_bot_code(path: Path) -> bool:
    return any(path.is_relative_to(folder) for folder in UNTRACED)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not runs_no_bot_code(Path(str(item.path))):
        return (yield)
    with untraced_here():
        return (yield)
