"""Block Kit rendering: verdict first, full report in the thread, within Slack's limits, escaped."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from bot.domain.findings import (
    Action,
    Cause,
    Controller,
    ControllerState,
    Diagnosis,
    Finding,
    NamespaceState,
    Remedy,
    Risk,
)
from bot.domain.refs import ObjectRef
from bot.slack import blocks

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def _diagnosis(objects: int = 1, *, name: str = "kiali") -> Diagnosis:
    refs = tuple(
        ObjectRef("kiali.io/v1alpha1", "Kiali", f"{name}-{i}", "istio-system", resource="kialis")
        for i in range(objects)
    )
    finding = Finding(
        cause=Cause.ORPHANED_FINALIZER,
        blocking=True,
        summary=f"{objects} Kiali object keeps finalizer kiali.io/finalizer; no running controller handles it",
        objects=refs,
        evidence=("no Deployment in the cluster serves group kiali.io",),
        remedies=tuple(
            Remedy(Action.REMOVE_FINALIZER, Risk.MEDIUM, f"Remove kiali.io/finalizer from {r.display}", (r,),
                   (f"kubectl patch kialis.kiali.io {r.name} -n istio-system --type=json -p '[...]'",))
            for r in refs
        ),
    )  # fmt: skip
    return Diagnosis(
        cluster="prod-eu",
        namespace="istio-system",
        observed_at=NOW,
        state=NamespaceState.TERMINATING,
        terminating_for_seconds=5400,
        complete=True,
        findings=(finding,),
    )


def test_verdict_is_one_line_with_cause_and_age() -> None:
    message = blocks.verdict(_diagnosis(), requested_by="U0AAAAAAA")
    assert message.text == "prod-eu/istio-system: stuck (orphaned_finalizer), Terminating for 1h 30m"
    first = message.blocks[0]["text"]["text"]
    assert "*stuck*, Terminating for *1h 30m*" in first
    assert "`orphaned_finalizer`" in first
    assert "<@U0AAAAAAA>" in message.blocks[1]["elements"][0]["text"]


def test_a_huge_report_is_cut_with_and_n_more_within_slacks_limits() -> None:
    diagnosis = _diagnosis(objects=400)
    messages, cut = blocks.report_parts(diagnosis)
    assert cut is True
    assert len(messages) == 1
    text = json.dumps([m.blocks for m in messages], ensure_ascii=False)
    assert "kialis.kiali.io/kiali-14`" in text
    assert "kialis.kiali.io/kiali-15`" not in text
    assert "…and 385 more (the full report is attached)" in text
    assert "…and 394 more (the full report is attached)" in text
    assert "400. [" in text  # the last remedy keeps its place number and stays visible
    for message in messages:
        assert len(message.blocks) <= 50
        assert sum(blocks._length(b) for b in message.blocks) <= 12_000
        for block in message.blocks:
            if block["type"] == "section":
                assert len(block["text"]["text"]) <= 3000


def test_a_small_report_is_not_cut() -> None:
    messages, cut = blocks.report_parts(_diagnosis(objects=3))
    assert cut is False
    assert "more" not in json.dumps([m.blocks for m in messages])


def test_cluster_text_is_escaped() -> None:
    diagnosis = _diagnosis(name="<!channel>&x")
    rendered = json.dumps([m.blocks for m in blocks.report(diagnosis)])
    assert "<!channel>" not in rendered
    assert "&lt;!channel&gt;&amp;x" in rendered


def test_a_findings_controller_state_is_shown() -> None:
    diagnosis = _diagnosis()
    plain = json.dumps([m.blocks for m in blocks.report(diagnosis)])
    assert "Controller:" not in plain
    judged = replace(diagnosis.findings[0], controller=Controller(ControllerState.UNKNOWN, ("no Lease of it",)))
    rendered = json.dumps([m.blocks for m in blocks.report(replace(diagnosis, findings=(judged,)))])
    assert "Controller: *unknown* (nothing seen shows whether it runs)" in rendered
