"""The chart's opt-in PrometheusRule (issue 25 §2): off by default, its thresholds from the values (the
schema refuses what is not one), `max by` in every expression, accepted by `promtool check rules`, and
firing as tests/chart/alerts/nsstuck-alerts.test.yaml says under `promtool test rules` (two replicas
raise one alert). Every metric a rule reads is one the bot exports, and every metric and alert is in
docs/operations.md, "Metrics and alerts".

promtool comes with Debian's `prometheus` package (`.ci/run` installs it). Without it these tests are
skipped, unless NSSTUCK_REQUIRE_PROMTOOL=1 (as `make test` and CI set it), where they fail instead."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.services.metrics import Metrics, StoreMetrics
from bot.store.database import Database
from tests._migrated import migrated
from tests.chart.conftest import REPO, HelmError, Render, find, one

UNIT_TESTS = Path(__file__).parent / "alerts" / "nsstuck-alerts.test.yaml"
ALERTS = {
    "NsstuckNamespaceStuck",
    "NsstuckClusterUnreachable",
    "NsstuckDigestsFailing",
    "NsstuckOutboxFailing",
    "NsstuckWatchFailing",
}


@pytest.fixture(scope="session")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("NSSTUCK_REQUIRE_PROMTOOL") == "1":
            pytest.fail("NSSTUCK_REQUIRE_PROMTOOL=1 but there is no promtool (apt-get install prometheus)")
        pytest.skip("no promtool (Debian's prometheus package; `.ci/run` installs it)")
    return found


def _rules(render: Render, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    docs = render({"prometheusRule": {"enabled": True, **(values or {})}})
    rule = one(docs, "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return [r for group in groups for r in group["rules"]]


def test_the_rule_passes_promtool_and_its_unit_tests(render: Render, promtool: str, tmp_path: Path) -> None:
    docs = render({"prometheusRule": {"enabled": True}})
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": one(docs, "PrometheusRule")["spec"]["groups"]}))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", UNIT_TESTS.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
    # the unit tests cover every alert
    covered = set(re.findall(r"alertname: (\w+)", UNIT_TESTS.read_text()))
    assert covered == ALERTS


def test_the_rule_is_opt_in_and_takes_its_values(render: Render) -> None:
    assert find(render(), "PrometheusRule") == []
    rules = _rules(
        render,
        {
            "labels": {"release": "prometheus"},
            "severity": "page",
            "namespaceStuckSeconds": 7200,
            "clusterUnreachableFor": "10m",
            "jobStaleSeconds": 1800,
            "outboxStuckSeconds": 600,
        },
    )
    by_name = {r["alert"]: r for r in rules}
    assert set(by_name) == ALERTS
    assert by_name["NsstuckNamespaceStuck"]["expr"].endswith("> 7200")
    assert by_name["NsstuckClusterUnreachable"]["for"] == "10m"
    assert "> 1800" in by_name["NsstuckWatchFailing"]["expr"]
    assert "> 1800" in by_name["NsstuckDigestsFailing"]["expr"]
    assert "> 600" in by_name["NsstuckOutboxFailing"]["expr"]
    for rule in rules:
        assert rule["labels"] == {"severity": "page"}
        # each series of the replicas folded into one: never a bare series, never a sum
        assert "max by (" in rule["expr"], rule["alert"]
        assert "sum" not in rule["expr"], rule["alert"]
    docs = render({"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}})
    assert one(docs, "PrometheusRule")["metadata"]["labels"]["release"] == "prometheus"


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"prometheusRule": {"enabled": "yes"}}, "at '/prometheusRule/enabled': got string, want boolean"),
        ({"prometheusRule": {"namespaceStuckSeconds": "1h"}}, "at '/prometheusRule/namespaceStuckSeconds'"),
        ({"prometheusRule": {"namespaceStuckSeconds": 10}}, "at '/prometheusRule/namespaceStuckSeconds'"),
        ({"prometheusRule": {"clusterUnreachableFor": "five minutes"}}, "at '/prometheusRule/clusterUnreachableFor'"),
        ({"prometheusRule": {"stuckAfter": 60}}, "additional properties 'stuckAfter' not allowed"),
    ],
)
def test_bad_rule_values_are_refused_saying_where(render: Render, values: dict[str, Any], said: str) -> None:
    with pytest.raises(HelmError) as refused:
        render(values)
    assert said in str(refused.value)


def _exported(tmp_path: Path) -> set[str]:
    """Every metric family the bot's /metrics has, those computed from the database included."""
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    migrated(url)
    db = Database(url)
    try:
        metrics = Metrics()
        metrics.registry.register(
            StoreMetrics(db, clock=lambda: datetime.now(UTC), registered=lambda _: True, watched=())
        )
        text = metrics.render().decode()
    finally:
        db.dispose()
    # the client's own `_created` series of each counter and histogram are not ours to document
    return {n for n in re.findall(r"^# TYPE (\w+) \w+$", text, re.MULTILINE) if not n.endswith("_created")}


def test_every_metric_an_alert_reads_is_exported_and_every_metric_and_alert_is_documented(
    render: Render, tmp_path: Path
) -> None:
    exported = _exported(tmp_path)
    read = {name for rule in _rules(render) for name in re.findall(r"\bnsstuck_\w+", rule["expr"])}
    assert read <= exported, read - exported
    doc = (REPO / "docs" / "operations.md").read_text()
    section = doc.split("\n## Metrics and alerts\n", 1)[1].split("\n## ", 1)[0]
    missing = sorted(name for name in exported | ALERTS if f"`{name}" not in section)
    assert not missing, missing
