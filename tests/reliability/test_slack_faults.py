"""Slack failing under the running bot: Web API 429 and 500 bursts, connections reset, responses slower
than the bot's HTTP timeout, and approvals made while Slack fails.

Each test runs the real `nsstuck serve` against the Slack and Kubernetes emulators and counts, from
the emulator's journal and workspace and from the database, that nothing was lost and nothing was
posted twice: one verdict per namespace in the channel, its report once in its thread, in order;
one incident and one diagnosis run per namespace, each marked posted; every audit record.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests._rows import rows
from tests.approvals._flow import remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL
from tests.slack._bot import Running, running_bot

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

JSON = dict[str, Any]
REPORT = "1. `orphaned_finalizer`"
# posts paced 0.1 s apart, retries 0.2/0.4/0.8 s apart (1.4 s in all), the outbox every second; a post
# left unanswered is looked for during 1 s before it is sent again
FAST = {
    "NSSTUCK_SLACK_POST_INTERVAL": "0.1",
    "NSSTUCK_SLACK_SETTLE_SECONDS": "1",
    "NSSTUCK_REPOST_SECONDS": "1",
    "NSSTUCK_FOLLOW_UP_SECONDS": "3600",
}
RETRIES_SPAN = 0.2 + 0.4 + 0.8


# -- the cluster --------------------------------------------------------------------------------


def _stuck_namespaces(kube: Emulator, prefix: str, count: int) -> list[str]:
    """`count` namespaces stuck in Terminating on an orphaned finalizer."""
    http = KubeHTTP(kube.url, kube.admin_token)
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        http.post("/api/v1/namespaces", {"metadata": {"name": name}})
        http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "held", "finalizers": ["x.io/y"]}})
        http.delete(f"/api/v1/namespaces/{name}")
    kube.settle()
    kube.clock.advance(60)  # type: ignore[attr-defined]
    kube.settle()
    return names


# -- Slack --------------------------------------------------------------------------------------


def _diagnose(bot: Running, names: list[str]) -> float:
    """/nsstuck for every namespace at once; every ack within Slack's 3 s; returns the slowest ack."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        acks = list(
            pool.map(
                lambda ns: bot.driver.slash_command("/nsstuck", f"prod-eu {ns}", user=ALICE, channel=OPS_CHANNEL),
                names,
            )
        )
    assert [a.status for a in acks] == [200] * len(names), [a.body for a in acks]
    slowest = max(a.elapsed for a in acks)
    assert slowest < 3.0, slowest
    return slowest


def _verdicts(slack: SlackEmulator, name: str) -> list[JSON]:
    return [m for m in slack.channel_messages(OPS_CHANNEL) if f"/ *{name}*" in slack.render(m)]


def _delivered(slack: SlackEmulator, names: list[str]) -> bool:
    """Every namespace has its verdict in the channel and its report in the verdict's thread."""
    for name in names:
        found = _verdicts(slack, name)
        if not found:
            return False
        if not any(REPORT in slack.render(m) for v in found for m in slack.thread(OPS_CHANNEL, str(v["ts"]))):
            return False
    return True


def _wait_delivered(slack: SlackEmulator, names: list[str], timeout: float) -> None:
    slack.wait_for(lambda: _delivered(slack, names) or None, timeout=timeout, message="not everything arrived")


def _content(message: JSON) -> str:
    return SlackEmulator.render(message) + "\n" + str(message.get("text"))


def _sent_content(params: JSON) -> str:
    return (
        SlackEmulator.render({"text": params.get("text"), "blocks": params.get("blocks")})
        + "\n"
        + str(params.get("text"))
    )


def _assert_once_and_in_order(slack: SlackEmulator, names: list[str]) -> int:
    """One verdict per namespace, its report once in its thread, in the order it was first sent, and as
    many messages in Slack as successful chat.postMessage calls; returns the number of messages."""
    top = slack.channel_messages(OPS_CHANNEL)
    assert len(top) == len(names), [slack.render(m) for m in top]
    total = len(top)
    posts = slack.calls("chat.postMessage")
    for name in names:
        [verdict] = _verdicts(slack, name)
        replies = slack.thread(OPS_CHANNEL, str(verdict["ts"]))
        contents = [_content(m) for m in replies]
        assert len(set(contents)) == len(contents), f"posted twice in the thread of {name}: {contents}"
        assert sum(REPORT in c for c in contents) == 1, contents
        # in order: the thread shows the report's parts in the order the bot first tried to send them
        first_tries: list[str] = []
        for call in posts:
            if call.params.get("thread_ts") == verdict["ts"]:
                sent = _sent_content(call.params)
                if sent not in first_tries:
                    first_tries.append(sent)
        assert contents == first_tries, (contents, first_tries)
        total += len(replies)
    ok_posts = [c for c in posts if c.ok]
    assert len(ok_posts) == total, f"{len(ok_posts)} successful posts for {total} messages in Slack"
    assert not slack.server_errors
    return total


# -- the database -------------------------------------------------------------------------------


def _rows(database: str, sql: str, **params: Any) -> list[JSON]:
    return rows(database, sql, **params)


def _assert_recorded_once(database: str, names: list[str]) -> None:
    """One incident and one diagnosis run per namespace; every run posted, none waiting in the outbox."""
    incidents = Counter(r["namespace"] for r in _rows(database, "SELECT namespace FROM incidents"))
    assert incidents == Counter(names), incidents
    runs = _rows(database, "SELECT namespace, posted_at, last_post_error FROM diagnoses")
    assert Counter(r["namespace"] for r in runs) == Counter(names), runs
    assert all(r["posted_at"] is not None and r["last_post_error"] is None for r in runs), runs


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bot.db'}"


# -- 429 ----------------------------------------------------------------------------------------


def test_a_burst_of_429s_delays_but_loses_and_repeats_nothing(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    names = _stuck_namespaces(kube_emulator, "rl", 4)
    # the next four posts are refused with Retry-After: 1, whichever diagnosis they belong to
    burst = slack_emulator.inject("chat.postMessage", http_status=429, retry_after=1, times=4)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FAST) as bot:
        started = time.monotonic()
        _diagnose(bot, names)
        _wait_delivered(slack_emulator, names, timeout=40)
        took = time.monotonic() - started
        messages = _assert_once_and_in_order(slack_emulator, names)
    assert burst.hits == 4
    statuses = Counter(c.status for c in slack_emulator.calls("chat.postMessage"))
    assert statuses[429] == 4, statuses
    _assert_recorded_once(_sqlite(tmp_path), names)
    print(f"\n429 burst: {len(names)} reports, {messages} messages, 4 x 429, all delivered in {took:.1f} s")


# -- 500 and connection resets ------------------------------------------------------------------


def test_500s_and_reset_connections_are_retried_and_post_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    names = _stuck_namespaces(kube_emulator, "err", 3)
    errors = slack_emulator.inject("chat.postMessage", http_status=500, times=3)
    resets = slack_emulator.inject("chat.postMessage", reset_connection=True, times=2)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FAST) as bot:
        started = time.monotonic()
        _diagnose(bot, names)
        _wait_delivered(slack_emulator, names, timeout=40)
        took = time.monotonic() - started
        messages = _assert_once_and_in_order(slack_emulator, names)
    assert (errors.hits, resets.hits) == (3, 2)
    # a post Slack failed may have gone through: it was looked for before it was sent again
    assert slack_emulator.calls("conversations.history") or slack_emulator.calls("conversations.replies")
    _assert_recorded_once(_sqlite(tmp_path), names)
    print(f"\n500 x3 + reset x2: {len(names)} reports, {messages} messages, delivered in {took:.1f} s")


def test_an_outage_longer_than_the_retries_is_posted_from_the_outbox_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """Slack takes the verdicts but fails every thread reply for longer than the retries last: the
    runs wait in the outbox, and once Slack is back each report is posted once, and no verdict again."""
    names = _stuck_namespaces(kube_emulator, "out", 2)
    outage = slack_emulator.inject(
        "chat.postMessage", http_status=500, times=None, when=lambda params: bool(params.get("thread_ts"))
    )
    database = _sqlite(tmp_path)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FAST) as bot:
        _diagnose(bot, names)

        def all_failed() -> bool:
            runs = _rows(database, "SELECT last_post_error, post_attempts FROM diagnoses")
            return len(runs) == len(names) and all(r["post_attempts"] >= 2 for r in runs)

        slack_emulator.wait_for(lambda: all_failed() or None, timeout=30, message="the outbox did not retry")
        assert all(len(_verdicts(slack_emulator, n)) == 1 for n in names)
        outage.times = outage.hits  # Slack is back
        back = time.monotonic()
        _wait_delivered(slack_emulator, names, timeout=30)
        took = time.monotonic() - back
        time.sleep(1.1)  # one more outbox pass: it must find nothing to post
        messages = _assert_once_and_in_order(slack_emulator, names)
    # each verdict was sent once: the outbox found it in Slack rather than sending it again
    sent = [c for c in slack_emulator.calls("chat.postMessage") if "is *stuck*" in _sent_content(c.params)]
    assert len(sent) == len(names), [c.params.get("text") for c in sent]
    _assert_recorded_once(database, names)
    attempts = [r["post_attempts"] for r in _rows(database, "SELECT post_attempts FROM diagnoses")]
    print(
        f"\noutage of thread replies ({outage.hits} x 500): {len(names)} reports kept in the outbox "
        f"({min(attempts)}-{max(attempts)} attempts each), posted {took:.1f} s after Slack came back, "
        f"{messages} messages, none twice"
    )


# -- slow responses -----------------------------------------------------------------------------


def test_slack_slower_than_the_bot_timeout_posts_each_message_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """chat.postMessage answers after 1.5 s, the bot gives up waiting after 1 s: every post goes through
    on Slack's side although the bot never hears so. A blind retry would post it again. Two diagnoses
    of one namespace: the first verdict in the channel, the rest in its thread."""
    names = _stuck_namespaces(kube_emulator, "slow", 1)
    slack_emulator.set_latency("chat.postMessage", 1.5)
    env = {**FAST, "NSSTUCK_SLACK_TIMEOUT_SECONDS": "1", "NSSTUCK_SLACK_SETTLE_SECONDS": "4"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        started = time.monotonic()
        slowest = _diagnose(bot, names)
        # the posts hang in their queue; commands are still answered at once
        acks = [bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL) for _ in range(3)]
        acks += [bot.driver.slash_command("/nsstuck", f"prod-eu {names[0]}", user=BOB, channel=OPS_CHANNEL)]
        assert [a.status for a in acks] == [200] * len(acks)
        slowest = max([slowest, *(a.elapsed for a in acks)])
        assert slowest < 3.0, slowest
        names_twice = [*names, names[0]]

        # a verdict and a report per diagnosis (the second report of names[0] reads like its first)
        expected = 2 * len(names_twice)

        def copies() -> int:
            top = slack_emulator.channel_messages(OPS_CHANNEL)
            replies = sum(len(slack_emulator.thread(OPS_CHANNEL, str(m["ts"]))) for m in top)
            return max(0, len(top) + replies - expected)

        def settled() -> str | None:
            if copies():
                return "posted twice"
            runs = _rows(_sqlite(tmp_path), "SELECT posted_at FROM diagnoses")
            done = len(runs) == len(names_twice) and all(r["posted_at"] is not None for r in runs)
            return "posted" if done else None

        assert slack_emulator.wait_for(settled, timeout=60, message="not every run was posted") == "posted"
        took = time.monotonic() - started
        time.sleep(2.0)  # any post still in flight lands now
        assert copies() == 0
        top = slack_emulator.channel_messages(OPS_CHANNEL)
        assert len(top) == len(names), [slack_emulator.render(m) for m in top]
        ok_posts = [c for c in slack_emulator.calls("chat.postMessage") if c.ok]
        in_threads = sum(len(slack_emulator.thread(OPS_CHANNEL, str(m["ts"]))) for m in top)
        assert len(ok_posts) == len(top) + in_threads, (len(ok_posts), len(top), in_threads)
        for name in names:
            [verdict] = _verdicts(slack_emulator, name)
            contents = [_content(m) for m in slack_emulator.thread(OPS_CHANNEL, str(verdict["ts"]))]
            # the second diagnosis of names[0] adds its verdict and report to the same thread
            expected = 3 if name == names[0] else 1
            assert sum(REPORT in c for c in contents) == (2 if name == names[0] else 1), contents
            assert len(contents) == expected, contents
    assert not slack_emulator.server_errors
    print(
        f"\nchat.postMessage answering after 1.5 s, bot timeout 1 s: {len(names_twice)} reports, "
        f"{len(ok_posts)} messages, none twice, all posted in {took:.1f} s; slowest ack {slowest:.2f} s"
    )


# -- approvals while Slack fails ----------------------------------------------------------------


def test_an_approval_while_slack_fails_is_recorded_made_once_and_told_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {**FAST, "NSSTUCK_REMEDIATION_FOLLOW_SECONDS": "600"}
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as flow:
        namespace = flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        message = flow.request_message(request["id"])
        kube_emulator.journal.clear()

        # Slack rate-limits the first updates, then fails every post and every update, for longer than
        # the bot's retries last
        limited = slack_emulator.inject("chat.update", http_status=429, retry_after=1, times=2)
        updates = slack_emulator.inject("chat.update", http_status=500, times=None)
        posts = slack_emulator.inject("chat.postMessage", http_status=500, times=None)
        assert flow.vote(request["id"], BOB).status == 200
        row = flow.wait_status(request["id"], "applied", "failed", "stale")
        assert row["status"] == "applied", row["status_reason"]
        slack_emulator.wait_for(lambda: (updates.hits >= 2 and posts.hits >= 4) or None, timeout=15)
        assert limited.hits == 2
        time.sleep(RETRIES_SPAN + 1.0)
        events = ["requested", "approved", "backed_up", "dry_run", "execution_started", "applied"]
        assert flow.audit(request["id"]) == events
        assert f"Remediation #{request['id']}: Done" not in flow.thread_text()

        updates.times, posts.times = updates.hits, posts.hits  # Slack is back
        back = time.monotonic()
        flow.wait_thread(f"Remediation #{request['id']}: Done", timeout=30)

        def refreshed() -> JSON | None:
            now = slack_emulator.message(OPS_CHANNEL, str(message["ts"]))
            return now if now and ":white_check_mark: Applied" in slack_emulator.render(now) else None

        shown = slack_emulator.wait_for(refreshed, timeout=30, message="the request message still shows it pending")
        took = time.monotonic() - back
        time.sleep(1.1)  # one more outbox pass: it must find nothing to post
        assert "[Approve]" not in slack_emulator.render(shown)
        done = [m for m in slack_emulator.thread(OPS_CHANNEL, flow.thread_ts()) if "Done" in str(m.get("text"))]
        assert len(done) == 1, [slack_emulator.render(m) for m in done]
        assert flow.audit(request["id"]) == events
        path = f"/api/v1/namespaces/{namespace}/configmaps/"
        patches = Counter(line for line in kube_emulator.journal.lines("PATCH") if path in line)
        assert sum(n for line, n in patches.items() if not line.endswith("dryRun")) == 1, patches
    assert not slack_emulator.server_errors
    print(
        f"\napproval during a Slack outage (2 updates rate-limited, then {posts.hits} posts and {updates.hits} updates "
        "refused): audit complete "
        f"({len(events)} entries), the change made once, outcome posted once {took:.1f} s after Slack came back"
    )
