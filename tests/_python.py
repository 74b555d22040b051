"""The Python child processes the tests start (the bot, the emulators, scripts).

They run with ResourceWarning made an error, so a socket or file left open is printed on their stderr
("Exception ignored in: ... ResourceWarning: unclosed ..."), and the test that started them fails when
it sees one (`assert_no_resource_warning`). Inside pytest's own process, pyproject's filterwarnings
does the same.
"""

from __future__ import annotations

import sys

PYTHON: tuple[str, ...] = (sys.executable, "-W", "error::ResourceWarning")


def assert_no_resource_warning(output: str, what: str) -> None:
    """Fail when a child's output shows a resource it left open."""
    at = output.find("ResourceWarning")
    if at < 0:
        return
    start = output.rfind("Exception ignored", 0, at)
    start = max(0, at - 1500) if start < 0 else start
    raise AssertionError(f"{what} left a resource open:\n{output[start : at + 1500]}")
