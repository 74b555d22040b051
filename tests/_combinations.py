"""Counts what the hostile-server suite tried (tests/hostile/test_hostile_server.py), and says it at the end of
the run: each of its cases names its combination (command / kind of read / answer) in its report's
`user_properties`, which pytest-xdist carries back to the controlling process, where this plugin runs."""

from __future__ import annotations

import pytest

PROPERTY = "hostile_combination"


class Combinations:
    def __init__(self) -> None:
        self.tried: set[str] = set()
        self.failed: set[str] = set()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.tried.add(str(value))
                if report.failed:
                    self.failed.add(str(value))

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.tried:
            terminalreporter.write_line(
                f"hostile-server suite: {len(self.tried)} combinations of command, kind of read and answer tried,"
                f" {len(self.tried) - len(self.failed)} held"
            )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Combinations(), "nsstuck-hostile-combinations")
