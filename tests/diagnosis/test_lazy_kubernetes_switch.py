"""`nsstuck diagnose` with the `kubernetes` package imported piece by piece (the default,
bot/kube/_lazy.py) and whole (NSSTUCK_LAZY_KUBERNETES=0) reports the same, in JSON and in text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests._cli import run_nsstuck_process as run_nsstuck  # the import of the package is the point: a fresh process
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator

# what differs from one run to the next: the wall clock's "now" and the durations counted up to it
# ("deleting for 7d 8h" may turn into 7d 9h between the two runs)
RUN_SPECIFIC = ("observed_at", "terminating_for_seconds")
# and in a finding's progress: how long its objects have stood still, up to now
NESTED_RUN_SPECIFIC = ("still_seconds",)
_DURATION = re.compile(r"\b\d+[wdhms](?: \d+[wdhms])*\b")


def _diagnose(kubeconfig: Path, lazy: str, *output: str) -> tuple[str, int]:
    """The report of `nsstuck diagnose ddd`, and how many of the client's model modules the run imported
    (Python's -X importtime lists every module imported, on stderr)."""
    done = run_nsstuck(
        "diagnose",
        "ddd",
        "--kubeconfig",
        str(kubeconfig),
        *output,
        env={"NSSTUCK_LAZY_KUBERNETES": lazy, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    models = [line for line in done.stderr.splitlines() if "| " in line and "kubernetes.client.models." in line]
    return done.stdout, len(models)


def _comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in RUN_SPECIFIC + NESTED_RUN_SPECIFIC}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, str):
        return _DURATION.sub("<duration>", value)
    return value


@pytest.mark.slow
def test_diagnose_reports_the_same_with_kubernetes_imported_whole(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    piecewise, piecewise_models = _diagnose(kubeconfig_path, "1", "--json")
    whole, whole_models = _diagnose(kubeconfig_path, "0", "--json")
    # each run took the way it was asked to: no model module piece by piece, all of them whole
    assert piecewise_models == 0
    assert whole_models > 100
    lazy_report, plain_report = json.loads(piecewise), json.loads(whole)
    assert lazy_report["state"] == "terminating"
    assert lazy_report["findings"]
    assert set(lazy_report) >= set(RUN_SPECIFIC)
    assert _comparable(lazy_report) == _comparable(plain_report)

    lazy_text, _ = _diagnose(kubeconfig_path, "true")
    plain_text, _ = _diagnose(kubeconfig_path, "false")
    assert lazy_text.startswith("emulator/ddd: Terminating for ")
    assert _comparable(lazy_text) == _comparable(plain_text)
