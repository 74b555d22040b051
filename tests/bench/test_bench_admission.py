"""bench/admission.py in its quick mode, so that the benchmark cannot rot unnoticed: emulated clusters in a
process of their own, the real `nsstuck admission serve` and `nsstuck precheck` processes, reviews over
HTTPS. What is asserted is what it prints and keeps (every figure, a verdict per target) and what does not
depend on the machine's speed (every answer allowed; the slow cluster's answers say that the check could
not finish, since its reads take longer than the budget), never the timing itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.admission import QUICK, UNFINISHED, main

VERDICT = re.compile(r"^  (PASS|MISS)  (.+) \(target (.+)\)$")


def test_the_quick_benchmark_prints_its_figures_and_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--quick", "--json", str(tmp_path / "admission.json")])
    out = capsys.readouterr().out
    verdicts = [VERDICT.match(line) for line in out.splitlines()]
    said = [m.group(2) for m in verdicts if m]
    assert code == (0 if all(m.group(1) == "PASS" for m in verdicts if m) else 1), out

    figures = json.loads((tmp_path / "admission.json").read_text())
    small, large = figures["small"], figures["large"]
    assert figures["quick"] is True
    assert figures["budget_seconds"] == QUICK.budget
    assert 0 <= figures["cpu_stolen_by_host"] <= 1
    # every phase measured, every answer given and allowed (no problem), with the noise beside it
    for phase, reviews in ((small["idle"], QUICK.idle), (small["concurrent"], 5 * QUICK.rounds),
                           (small["slow"], QUICK.slow), (large["idle"], QUICK.idle)):  # fmt: skip
        assert phase["n"] == reviews
        assert phase["problems"] == []
        assert 0 < phase["p50_seconds"] <= phase["p99_seconds"] <= phase["max_seconds"]
        assert {"steal", "other_cores"} <= set(phase)
    assert small["slow"]["unfinished"] == QUICK.slow
    assert list(small["slow"]["warnings_seen"]) == [f"{UNFINISHED} {QUICK.budget:g} s"]
    for shape in (small, large):
        assert len(shape["precheck_runs_seconds"]) == QUICK.prechecks
        assert shape["precheck_exit_codes"] == [4]  # would get stuck: the operator is scaled to zero
        assert shape["endpoint_errors"] == []
    assert large["idle_p99_to_precheck"] > 0

    # the figures printed, the steal beside each latency, and one verdict per target (the timing ones are
    # "not measured" only when the host took more than 10% of the CPU)
    assert re.search(r"small cluster: 20 CRD types, 60 objects in crd-heavy and in each of 4 more", out)
    assert len(re.findall(r"p50 \d+\.\d{3} s  p99 \d+\.\d{3} s  max \d+\.\d{3} s   \(steal \d", out)) == 4
    assert re.search(r"nsstuck precheck crd-heavy \(process, end to end, exit 4\): median \d", out)
    assert "of the machine's CPU time was taken by its host (steal)" in out
    untimed = [
        "small, too slow: 2 of 2 answers say 'nsstuck could not finish checking within 1 s'",
        "small: precheck exit 4",
        "large: precheck exit 4",
    ]
    assert all(text in said for text in untimed), out
    timed = ["small, idle: p99", "small, 5 concurrent deletes: p99", "small, too slow: 'could not finish checking'",
             "large, idle: p99", "every answer within"]  # fmt: skip
    if figures["cpu_stolen_by_host"] <= 0.10:
        assert all(any(text.startswith(t) for text in said) for t in timed), out
    else:
        assert out.count("  not measured: ") == len(timed) + 1, out
