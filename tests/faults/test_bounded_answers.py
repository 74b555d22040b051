"""`nsstuck diagnose` against answers no client should read whole: one larger than NSSTUCK_MAX_ANSWER_MB,
one that trickles for ever, one labelled gzip that is not. Each is a named gap in the report, the process
ends within the call's deadline (plus half a second), and its memory stays bounded (its peak RSS, as
the kernel counted it for that child alone)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests._measured import run_measured
from tests._python import PYTHON, assert_no_resource_warning
from tests.faults._support import NAMESPACE, Cluster

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

TIMEOUT = 3.0  # the command's --timeout: the collection's deadline, and the longest a call may take
LATE = 0.5  # how much later than its deadline a run may end (the process's own start and end aside)
LIMIT_MB = 8
# what the command holds besides an answer: the interpreter, the kubernetes client, the snapshot
RSS_MARGIN_MB = 150
KIALI_PATH = f"/apis/kiali.io/v1alpha1/namespaces/{NAMESPACE}/kialis"
KIALI_GAP = f"list kialis.kiali.io in {NAMESPACE}"


# A small process of its own starts the command and writes "seconds peak_rss_kib" of it: the peak RSS the
# kernel keeps for a process counts that of the process it was forked from until its exec (here, the
# tests' own, holding the emulator), as bench/diagnose.py's runner says
def _diagnose(cluster: Cluster, env: dict[str, str] | None = None) -> tuple[dict[str, Any], float, float]:
    """The JSON report of `nsstuck diagnose` run as a child process; the seconds from its first request to
    its end (its collection, rules and report: the interpreter's start, which a loaded machine makes vary
    by a second, left out); and its peak RSS in MB."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    full_env.update(env or {})
    figures = cluster.kubeconfig.parent / "figures"
    command = [*PYTHON, "-m", "bot", "diagnose", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig)]
    command += ["--json", "--timeout", f"{TIMEOUT:g}"]
    measured = run_measured(command, env=full_env, journal=cluster.emu.journal, figures=figures)
    run = measured.run
    assert run.returncode == 0, run.stderr
    assert_no_resource_warning(run.stderr, "nsstuck diagnose")
    return json.loads(run.stdout), measured.seconds, measured.peak_mb


def _gap(report: dict[str, Any]) -> dict[str, Any]:
    assert report["complete"] is False
    gaps = {gap["what"]: gap for gap in report["gaps"]}
    assert set(gaps) == {KIALI_GAP}, report["gaps"]
    actions = {remedy["action"] for finding in report["findings"] for remedy in finding["remedies"]}
    assert "force_finalize_namespace" not in actions
    return gaps[KIALI_GAP]


def _endless(piece: bytes) -> Iterator[bytes]:
    return itertools.repeat(piece)


def test_an_answer_over_the_limit_is_a_gap_naming_it(cluster: Cluster) -> None:
    """A list whose body never ends (chunked, 64 kB pieces of well-formed items): read up to the limit,
    then given up, the connection closed."""
    item = b'{"metadata": {"name": "k", "namespace": "istio-system"}},' * 1000
    cluster.emu.knobs.rewrite(
        rf"^GET {KIALI_PATH}$", body=lambda: itertools.chain([b'{"kind": "KialiList", "items": ['], _endless(item))
    )

    report, elapsed, peak_mb = _diagnose(cluster, {"NSSTUCK_MAX_ANSWER_MB": str(LIMIT_MB)})

    gap = _gap(report)
    assert gap["reason"] == "error"
    assert gap["detail"] == (
        f"the answer to GET {KIALI_PATH} was larger than NSSTUCK_MAX_ANSWER_MB ({LIMIT_MB} MiB); read stopped"
    )
    assert elapsed < TIMEOUT + LATE, elapsed
    assert peak_mb < LIMIT_MB + RSS_MARGIN_MB


def test_an_announced_answer_over_the_limit_is_not_read(cluster: Cluster) -> None:
    """A Content-Length over the limit: refused before its body is read."""
    cluster.emu.knobs.rewrite(rf"^GET {KIALI_PATH}$", headers={"Content-Length": str(1 << 30)}, body=lambda: [b"{"])

    report, elapsed, peak_mb = _diagnose(cluster, {"NSSTUCK_MAX_ANSWER_MB": str(LIMIT_MB)})

    assert "larger than NSSTUCK_MAX_ANSWER_MB (8 MiB)" in _gap(report)["detail"]
    assert elapsed < TIMEOUT + LATE, elapsed
    assert peak_mb < LIMIT_MB + RSS_MARGIN_MB


def test_an_endless_trickle_is_a_timeout_at_the_deadline(cluster: Cluster) -> None:
    """A byte every 0.2 s of a body announced under the (default) limit: no read of the socket ever waits
    long, the answer as a whole is over at the deadline."""
    cluster.emu.knobs.trickle(rf"^GET {KIALI_PATH}$", interval=0.2)

    report, elapsed, peak_mb = _diagnose(cluster)

    gap = _gap(report)
    assert gap["reason"] == "timeout"
    # the collection's deadline, whether the loop or the call's own timeout (what was left of the
    # deadline when it started) noticed it first
    assert gap["detail"] == f"not finished within {TIMEOUT:g}s", gap
    assert TIMEOUT - LATE < elapsed < TIMEOUT + LATE, elapsed
    assert peak_mb < RSS_MARGIN_MB  # what trickled is a few bytes


def test_a_gzip_labelled_garbage_body_is_a_gap_not_a_crash(cluster: Cluster) -> None:
    """Content-Encoding: gzip on bytes that are not gzip (and never end): identity was asked for, the
    answer is refused as it is, not decoded."""
    cluster.emu.knobs.rewrite(
        rf"^GET {KIALI_PATH}$", headers={"Content-Encoding": "gzip"}, body=lambda: _endless(b"\x1f\x8bnot gzip" * 4096)
    )

    report, elapsed, peak_mb = _diagnose(cluster, {"NSSTUCK_MAX_ANSWER_MB": str(LIMIT_MB)})

    gap = _gap(report)
    assert gap["reason"] == "error"
    assert gap["detail"] == (
        f"the answer to GET {KIALI_PATH} came encoded (Content-Encoding: gzip) although identity was asked for;"
        " not decoded"
    )
    assert elapsed < TIMEOUT + LATE, elapsed
    assert peak_mb < LIMIT_MB + RSS_MARGIN_MB
