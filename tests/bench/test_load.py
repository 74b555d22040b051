"""bench/load.py at a small size, so that the benchmark cannot rot unnoticed: the real bot, emulated
clusters in a process of their own, signed commands on an open-loop schedule, a request filed and
approved by clicks meanwhile. What is asserted is the bookkeeping (nothing lost), never the timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.load import Options, measure


@pytest.mark.slow
def test_the_load_benchmark_loses_nothing(tmp_path: Path) -> None:
    options = Options(clusters=2, commands=6, seconds=3.0, processes=1, baseline=1, remediations=1)
    result = measure(options, tmp_path)
    missed = [what for what, ok, _ in result.bookkeeping if not ok]
    assert not missed, "\n".join([*missed, *result.lines])
    figures = result.figures
    assert figures["commands_acknowledged"] == figures["runs_in_database"] == figures["verdicts_in_slack"] == 7
    assert figures["incidents"] == 2
    assert figures["requests_executed_once"] == 1
    # the figures the benchmark prints are there, whatever they are
    assert figures["command_ack_ms"]["n"] == 6
    assert figures["approve_click_ack_ms"]["n"] == 3
    assert figures["rss_load_end_mb"] > 0
