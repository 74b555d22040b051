"""The hostile-server suite through the bot (issue 36): `/nsstuck prod-eu kiali-two` in Slack while the
cluster answers one kind of read in a way it cannot (tests/hostile/test_hostile_server.py has the answers
and the reads, and runs every combination through the command line). A subset, on one bot for the module:
every answer on the namespace's list of Kialis, and an empty body and an endless trickle on each other
kind of read. For each: the bot does not fail ("nsstuck failed while diagnosing" never said, no traceback
in its log), the report it records is incomplete with the read's gap named, and no force-finalize is
offered."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.hostile.conftest import emulators
from tests.hostile.test_hostile_server import (
    ANSWERS,
    LIMIT_MB,
    READS,
    SECOND,
    Answer,
    Read,
    _orphaned_kiali,
)

DEADLINE = 4  # NSSTUCK_DIAGNOSIS_DEADLINE_SECONDS
CASES = [(read, answer) for read in READS for answer in ANSWERS if read.name == "list"] + [
    (read, answer)
    for read in READS
    if read.name != "list"
    for answer in ANSWERS
    if answer.name in ("empty-body", "endless-trickle")
]


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    """One bot for the module, on a cluster where kiali-two is Terminating, held by an orphaned Kiali."""
    workdir = tmp_path_factory.mktemp("hostile-bot")
    with emulators() as (slack, kube):
        apply_scenario(kube, "seed003-kiali-orphaned-finalizer")
        http = KubeHTTP(kube.url, kube.admin_token)
        http.post("/api/v1/namespaces", {"metadata": {"name": SECOND}})
        _orphaned_kiali(http, SECOND)
        http.delete(f"/api/v1/namespaces/{SECOND}")
        kube.settle()
        kube.clock.advance(60)  # the namespace controller's next pass: the Kiali is being deleted
        kube.settle()
        kiali = http.get(f"/apis/kiali.io/v1alpha1/namespaces/{SECOND}/kialis/kiali")
        assert kiali["metadata"].get("deletionTimestamp"), kiali
        extra = {"NSSTUCK_MAX_ANSWER_MB": str(LIMIT_MB), "NSSTUCK_DIAGNOSIS_DEADLINE_SECONDS": str(DEADLINE)}
        with remediation_bot(slack, kube, workdir, extra_env=extra) as running:
            running.namespace = SECOND
            yield running


def _diagnoses(flow: Flow) -> int:
    return len(flow.query("SELECT id FROM diagnoses WHERE namespace = :ns", ns=SECOND))


@pytest.mark.parametrize(("read", "answer"), CASES, ids=[f"{r}-{a}" for r, a in CASES])
def test_the_bot_reports_the_gap(flow: Flow, read: Read, answer: Answer, request: pytest.FixtureRequest) -> None:
    request.node.user_properties.append(("hostile_combination", f"bot/{read}/{answer}"))
    before = _diagnoses(flow)
    log_size = flow.bot.log.stat().st_size
    answer.inject(flow.kube, f"^GET {re.escape(read.path(SECOND))}$", read, SECOND)
    try:
        delivery = flow.bot.driver.slash_command("/nsstuck", f"prod-eu {SECOND}", user=ALICE, channel=OPS_CHANNEL)
        assert delivery.status == 200
        flow.slack.wait_for(lambda: _diagnoses(flow) > before or None, timeout=40, message="no diagnosis recorded")
    finally:
        flow.kube.knobs.clear()
    report = flow.latest_report()
    gaps = [f"{g['what']}: {g['detail']}" for g in report["gaps"]]
    assert report["complete"] is False, gaps
    pattern = re.compile(read.gap(SECOND))
    assert any(pattern.fullmatch(g["what"]) for g in report["gaps"]), (read.gap(SECOND), gaps)
    actions = {r["action"] for f in report["findings"] for r in f["remedies"]}
    assert "force_finalize_namespace" not in actions
    with flow.bot.log.open("rb") as log:
        log.seek(log_size)
        said = log.read().decode("utf-8", "replace")
    assert "Traceback" not in said, said[-3000:]
    texts = [flow.slack.render(m) for m in flow.slack.channel_messages(OPS_CHANNEL)]
    assert not any("failed while diagnosing" in t for t in texts)
