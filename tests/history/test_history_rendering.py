"""History for people: the terminal table and the Slack answer, within Block Kit's limits and escaped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.services.history import Count, Filters, History, IncidentEntry, RecurringNamespace, SlackThread, Summary
from bot.services.history_text import render_text
from bot.slack import history_blocks
from bot.slack.blocks import MAX_CHARS, SECTION_LIMIT

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def _entry(
    n: int,
    *,
    status: str = "open",
    cluster: str = "prod-eu",
    namespace: str = "istio-system",
    cause: str | None = "orphaned_finalizer",
    thread: SlackThread | None = None,
) -> IncidentEntry:
    since = NOW - timedelta(hours=3, minutes=12) - timedelta(days=n)
    return IncidentEntry(
        id=n,
        cluster=cluster,
        namespace=namespace,
        namespace_uid=f"uid-{n}",
        status=status,
        cause=cause,
        terminating_since=since,
        first_seen_at=since + timedelta(minutes=1),
        resolved_at=since + timedelta(hours=3, minutes=12) if status == "resolved" else None,
        diagnoses=2,
        last_diagnosed_at=since,
        thread=thread,
    )


SUMMARY = Summary(
    incidents=7,
    open=1,
    resolved=6,
    by_cause=(Count("orphaned_finalizer", 5), Count(None, 2)),
    by_cluster=(Count("prod-eu", 7),),
    median_time_to_resolution_seconds=3 * 3600 + 12 * 60,
    recurring=(RecurringNamespace("prod-eu", "istio-system", 4),),
)


def _history(*entries: IncidentEntry, summary: Summary = SUMMARY, **filters: object) -> History:
    return History(
        generated_at=NOW,
        filters=Filters(**filters),  # type: ignore[arg-type]
        incidents=entries,
        summary=summary,
    )


def _all_text(message: history_blocks.Message) -> str:
    return json.dumps(message.blocks)


def test_terminal_table_and_summary() -> None:
    text = render_text(_history(_entry(0), _entry(1, status="resolved", cause=None), cluster="prod-eu"))
    lines = text.splitlines()
    assert lines[0].split() == ["STATUS", "CLUSTER/NAMESPACE", "CAUSE", "SINCE", "/", "RESOLVED", "IN", "RUNS"]
    assert lines[1].startswith("open ")
    assert "prod-eu/istio-system" in lines[1]
    assert "3h 12m (since 2026-11-21 06:48Z)" in lines[1]
    assert lines[2].startswith("resolved ")
    assert "resolved in 3h 12m" in lines[2]
    assert " - " in lines[2]  # no cause known
    # the columns line up
    assert lines[1].index("prod-eu") == lines[0].index("CLUSTER") == lines[2].index("prod-eu")
    assert "Summary for prod-eu:" in text
    assert "7 (1 open, 6 resolved)" in text
    assert "median to resolve:   3h 12m" in text
    assert "by cause:            orphaned_finalizer 5, - 2" in text
    assert "keep coming back:    prod-eu/istio-system (4x)" in text
    assert text.endswith("\n")


def test_terminal_without_incidents() -> None:
    empty = Summary(0, 0, 0, (), (), None, ())
    text = render_text(_history(summary=empty, open_only=True))
    assert text.startswith("No open incidents for every cluster.")
    assert "nothing resolved yet" in text
    assert "keep coming back:    none" in text


def test_thread_links() -> None:
    assert (
        history_blocks.thread_url("C0123ABCD", "1763712000.000100", workspace="https://acme.slack.com/")
        == "https://acme.slack.com/archives/C0123ABCD/p1763712000000100"
    )
    assert (
        history_blocks.thread_url("C0123ABCD", "1763712000.000100")
        == "https://slack.com/app_redirect?channel=C0123ABCD&message_ts=1763712000.000100"
    )
    assert history_blocks.workspace_url("acme") == "https://acme.slack.com"
    assert history_blocks.workspace_url("evil.com/x") is None
    # something that is not a Slack id never becomes a link (nor breaks out of one)
    assert history_blocks.thread_url("C1|x>", "1.2") is None
    assert history_blocks.thread_url("C0123ABCD", "not-a-ts") is None
    # a workspace URL that is not Slack's falls back to the redirect
    assert str(history_blocks.thread_url("C0123ABCD", "1.2", workspace="https://evil.example.com")).startswith(
        "https://slack.com/app_redirect?"
    )


def test_slack_answer_open_first_with_threads_then_summary() -> None:
    thread = SlackThread("C0123ABCD", "1763712000.000100")
    message = history_blocks.history_message(
        _history(_entry(0, thread=thread), _entry(1, status="resolved"), cluster="prod-eu"),
        workspace="https://acme.slack.com",
    )
    texts = [b["text"]["text"] if "text" in b else json.dumps(b) for b in message.blocks]
    assert texts[0].startswith("Incidents on *prod-eu*: 1 open, 6 resolved, median time to resolution *3h 12m*")
    assert texts[1].startswith(
        "*Open (1)*\n:red_circle: *prod-eu* / *istio-system* `orphaned_finalizer`, stuck for *3h 12m*"
    )
    assert "<https://acme.slack.com/archives/C0123ABCD/p1763712000000100|thread>" in texts[1]
    assert texts[2].startswith("*Recently resolved*\n:white_check_mark:")
    assert "resolved after 3h 12m" in texts[2]
    assert "|thread>" not in texts[2]
    summary = next(t for t in texts if t.startswith("*Summary*"))
    assert "By cause: `orphaned_finalizer` 5, _unknown_ 2" in summary
    assert "Keep coming back: *prod-eu* / *istio-system* (4x)" in summary
    assert message.text == "Incidents on prod-eu: 1 open, 6 resolved"


def test_slack_answer_escapes_what_comes_from_the_database() -> None:
    nasty = "<!channel>&<@U123>"
    summary = Summary(1, 1, 0, (Count(nasty, 1),), (Count(nasty, 1),), None, (RecurringNamespace(nasty, nasty, 2),))
    message = history_blocks.history_message(
        _history(_entry(0, cluster=nasty, namespace=nasty, cause=nasty), summary=summary, cluster=nasty)
    )
    raw = _all_text(message)
    assert "<!channel>" not in raw
    assert "<@U123>" not in raw
    assert "&lt;!channel&gt;&amp;&lt;@U123&gt;" in raw
    assert "<!channel>" not in message.text


def test_slack_answer_without_incidents() -> None:
    empty = Summary(0, 0, 0, (), (), None, ())
    message = history_blocks.history_message(_history(summary=empty))
    texts = json.dumps(message.blocks)
    assert "No incidents recorded here yet." in texts
    assert "median" not in message.blocks[0]["text"]["text"]


def test_slack_answer_stays_within_block_kit_limits() -> None:
    thread = SlackThread("C0123ABCD", "1763712000.000100")
    long_name = "n" * 63
    entries = [_entry(i, namespace=long_name, thread=thread) for i in range(300)]
    entries += [_entry(1000 + i, status="resolved", namespace=long_name) for i in range(300)]
    many_clusters = tuple(Count(f"cluster-{i:03d}", 1) for i in range(400))
    summary = Summary(600, 300, 300, SUMMARY.by_cause, many_clusters, 60, SUMMARY.recurring)
    message = history_blocks.history_message(_history(*entries, summary=summary, limit=600))
    assert len(message.blocks) <= 50
    for block in message.blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_LIMIT
    total = sum(len(b["text"]["text"]) for b in message.blocks if b["type"] == "section")
    total += sum(len(e["text"]) for b in message.blocks if b["type"] == "context" for e in b["elements"])
    assert total <= MAX_CHARS
    raw = _all_text(message)
    # open incidents come first, and the summary is always there at the end
    assert raw.index(":red_circle:") < raw.index("*Summary*")
    assert message.blocks[-2]["text"]["text"].startswith("*Summary*")
    assert "more incidents than fit here" in raw or "more (`nsstuck history` lists them all)" in raw
