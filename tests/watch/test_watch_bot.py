"""The watch through the running bot (`nsstuck serve`) against the Slack and Kubernetes emulators: a
watched cluster's stuck namespace is posted unasked, once, within `after` plus one round, shows in
/metrics with its cause and leaves it when it is resolved; a cluster that stops answering is said once,
and once when it is back (issue 25 §1, §2).

Time: the namespace's age is measured against NSSTUCK_CLOCK_FILE (moved by the test), rounds are
NSSTUCK_WATCH_SECONDS of the wall clock; the test waits for rounds recorded in the database rather
than sleeping."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests._migrated import migrated
from tests._rows import rows
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, APPROVERS, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, serve_process

ROUND = 0.5  # NSSTUCK_WATCH_SECONDS
DELETED_AT = "2026-11-20T08:00:00Z"  # the emulator's clock when _namespace deletes "ddd"


def watched_config(
    tmp_path: Path, kube: Emulator, *, channel: str | None = None, channels: tuple[str, ...] = (OPS_CHANNEL,)
) -> Path:
    kube.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    watch = f"{{after: 15m, channel: {channel}}}" if channel else "{after: 15m}"
    config = tmp_path / "nsstuck.yaml"
    config.write_text(
        "clusters:\n"
        f"  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n    channels: [{', '.join(channels)}]\n"
        f"    approvers: [{APPROVERS}]\n    watch: {watch}\n"
    )
    return config


def watch_env(clock: Path) -> dict[str, str]:
    # the follow-up job (5 minutes by default) stays out of the way: what is seen here is the watch's
    return {"NSSTUCK_CLOCK_FILE": str(clock), "NSSTUCK_WATCH_SECONDS": str(ROUND), "NSSTUCK_REPOST_SECONDS": "60"}


@dataclass
class Store:
    """The bot's database, read as an operator would."""

    url: str

    def rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        return rows(self.url, query, **params)

    def rounds(self) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM watch_rounds ORDER BY round_start")

    def finished_since(self, moment: datetime) -> int:
        """Rounds claimed after `moment` and finished."""
        return sum(1 for r in self.rounds() if _aware(r["claimed_at"]) > moment and r["finished_at"] is not None)


def _aware(value: Any) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    assert isinstance(moment, datetime)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def metrics(bot: Running) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by name and labels."""
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        body = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def sample(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def named(
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str
) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in found.items() if n == name}


def wait_rounds(slack: SlackEmulator, store: Store, since: datetime, count: int, timeout: float = 30) -> None:
    """Until `count` rounds claimed after `since` have finished (the bot had its chances)."""
    slack.wait_for(lambda: store.finished_since(since) >= count or None, timeout=timeout)


def top_level(slack: SlackEmulator, channel: str, words: str) -> list[str]:
    return [slack.render(m) for m in slack.channel_messages(channel) if words in slack.render(m)]


@contextmanager
def watching_bot(
    slack: SlackEmulator,
    kube: Emulator,
    tmp_path: Path,
    *,
    clock_at: str,
    channel: str | None = None,
    channels: tuple[str, ...] = (OPS_CHANNEL,),
) -> Iterator[tuple[Running, Store, Path]]:
    _namespace(kube, "ddd", delete=True)  # deleted at 08:00:00, a finalizer keeps it
    config = watched_config(tmp_path, kube, channel=channel, channels=channels)
    clock = tmp_path / "now"
    clock.write_text(clock_at + "\n")
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    migrated(url)
    with serve_process(slack, config, url, tmp_path, extra_env=watch_env(clock)) as bot:
        yield bot, Store(url), clock


def remove_finalizer(kube: Emulator) -> None:
    KubeHTTP(kube.url, kube.admin_token).patch(
        "/api/v1/namespaces/ddd/configmaps/mymap", {"metadata": {"finalizers": None}}
    )
    for _ in range(5):
        kube.clock.advance(30)  # type: ignore[attr-defined]
        kube.settle()


def wait(slack: SlackEmulator, predicate: Callable[[], Any], timeout: float = 20) -> Any:
    return slack.wait_for(lambda: predicate() or None, timeout=timeout)


def has_buttons(messages: list[dict[str, Any]]) -> bool:
    """Whether any of the messages has a block of buttons (Request fix N)."""
    return any(block.get("type") == "actions" for m in messages for block in m.get("blocks") or ())


def test_a_stuck_namespace_is_posted_once_unasked_measured_and_resolved(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    slack = slack_emulator
    with watching_bot(slack, kube_emulator, tmp_path, clock_at="2026-11-20T08:14:00Z") as (bot, store, clock):
        # Terminating for 14 minutes, watched after 15: rounds pass, nothing is said or measured
        started = datetime.now(UTC)
        wait_rounds(slack, store, started, 3)
        assert top_level(slack, OPS_CHANNEL, "ddd") == []
        assert named(metrics(bot), "nsstuck_namespace_terminating_seconds") == {}

        # 15m30s: the next round posts it, unasked
        clock.write_text("2026-11-20T08:15:30Z\n")
        moved = datetime.now(UTC)
        [verdict] = wait(slack, lambda: [m for m in slack.channel_messages(OPS_CHANNEL) if "ddd" in slack.render(m)])
        said = slack.render(verdict)
        assert "stuck" in said, said
        assert "orphaned_finalizer" in said, said
        assert "found by nsstuck's watch, unasked" in said
        assert "asked by" not in said
        # within one round: the round under way when the clock moved (it may read the clock after the move) or
        # the first one claimed after it is the one that posted it
        [incident] = store.rows("SELECT * FROM incidents")
        posted_at = _aware(incident["watch_posted_at"])
        claimed = [_aware(r["claimed_at"]) for r in store.rounds()]
        under_way = max((c for c in claimed if c <= moved), default=None)
        first_after = min((c for c in claimed if c > moved), default=None)
        posting_round = max(c for c in claimed if c <= posted_at)
        assert posting_round in (under_way, first_after), (moved, claimed, posted_at)
        # the report in its thread, as for a command; the incident lives in that thread
        thread = wait(slack, lambda: slack.thread(OPS_CHANNEL, verdict["ts"]))
        assert "configmaps/mymap" in "\n".join(slack.render(m) for m in thread)
        assert has_buttons(thread)  # the cluster has approvers, and this channel may use it
        [incident] = store.rows("SELECT slack_channel, slack_thread_ts FROM incidents")
        assert (incident["slack_channel"], incident["slack_thread_ts"]) == (OPS_CHANNEL, verdict["ts"])

        # more rounds: not posted again
        wait_rounds(slack, store, datetime.now(UTC), 4)
        assert len(top_level(slack, OPS_CHANNEL, "ddd")) == 1
        [run] = store.rows("SELECT trigger, requested_by, post_channel, posted_at FROM diagnoses")
        assert (run["trigger"], run["requested_by"], run["post_channel"]) == ("schedule", "nsstuck-watch", OPS_CHANNEL)
        assert run["posted_at"] is not None

        # /metrics: how long it has been Terminating, by cause, from the database (the clock file's now)
        found = metrics(bot)
        assert (
            sample(
                found,
                "nsstuck_namespace_terminating_seconds",
                cluster="prod-eu",
                namespace="ddd",
                cause="orphaned_finalizer",
            )
            == 930.0
        )
        assert sample(found, "nsstuck_stuck_namespaces", cluster="prod-eu", cause="orphaned_finalizer") == 1.0
        assert sample(found, "nsstuck_build_info", version="0.1.0") == 1.0
        assert sample(found, "nsstuck_database_up") == 1.0
        assert sample(found, "nsstuck_watched_cluster_reachable", cluster="prod-eu") == 1.0
        assert (sample(found, "nsstuck_kube_requests_total", cluster="prod-eu", outcome="success") or 0) > 0
        assert (
            sample(found, "nsstuck_kube_request_duration_seconds_count", cluster="prod-eu", outcome="success") or 0
        ) > 0
        assert (sample(found, "nsstuck_watch_rounds_total", cluster="prod-eu", outcome="listed") or 0) >= 3
        assert (sample(found, "nsstuck_diagnoses_total", state="terminating", cause="orphaned_finalizer") or 0) == 1
        assert sample(found, "nsstuck_outbox_backlog", kind="reports") == 0.0
        watch_success = sample(found, "nsstuck_job_last_success_timestamp_seconds", scheduled_job="watch")
        assert watch_success is not None
        assert watch_success >= started.timestamp()

        # it finishes on its own: resolved in its thread (once), and gone from /metrics
        remove_finalizer(kube_emulator)
        resolved = wait(
            slack,
            lambda: [
                n
                for n in (slack.render(m) for m in slack.thread(OPS_CHANNEL, verdict["ts"]))
                if "is gone: resolved" in n
            ],
        )
        assert "`ddd` is gone: resolved after 15m." in resolved[0], resolved
        wait_rounds(slack, store, datetime.now(UTC), 3)
        notes = [slack.render(m) for m in slack.thread(OPS_CHANNEL, verdict["ts"])]
        assert sum("is gone: resolved" in n for n in notes) == 1, notes
        found = metrics(bot)
        assert named(found, "nsstuck_namespace_terminating_seconds") == {}
        assert named(found, "nsstuck_stuck_namespaces") == {}
        [incident] = store.rows("SELECT status, resolution_posted_at FROM incidents")
        assert incident["status"] == "resolved"
        assert incident["resolution_posted_at"] is not None
        assert len(top_level(slack, OPS_CHANNEL, "ddd")) == 1


def test_an_unreachable_cluster_is_said_once_and_once_when_it_is_back(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """In the channel watch.channel names (not the cluster's first); the emulator's knob makes the list
    of namespaces fail (the transport's one retry included) for as long as it is set. Then the stuck
    namespace is posted there too, without Request buttons: that channel may not change the cluster."""
    slack = slack_emulator
    with watching_bot(slack, kube_emulator, tmp_path, clock_at="2026-11-20T08:05:00Z", channel=SECOND_CHANNEL) as (
        bot,
        store,
        clock,
    ):
        wait_rounds(slack, store, datetime.now(UTC), 2)
        assert slack.channel_messages(SECOND_CHANNEL) == []
        fault = kube_emulator.knobs.inject_fault(r"^GET /api/v1/namespaces$", 503)
        [down] = wait(slack, lambda: top_level(slack, SECOND_CHANNEL, "cannot reach cluster"))
        assert "`prod-eu`" in down, down
        assert kube_emulator.user_token not in down
        assert "the server is currently unable to handle the request" in down, down
        wait_rounds(slack, store, datetime.now(UTC), 4)
        assert len(top_level(slack, SECOND_CHANNEL, "cannot reach cluster")) == 1
        assert sample(metrics(bot), "nsstuck_watched_cluster_reachable", cluster="prod-eu") == 0.0
        found = metrics(bot)
        assert (sample(found, "nsstuck_kube_requests_total", cluster="prod-eu", outcome="server_error") or 0) >= 8
        assert (sample(found, "nsstuck_watch_rounds_total", cluster="prod-eu", outcome="unreachable") or 0) >= 4
        assert fault.hits >= 8  # every round asked (and asked again once): it was not given up

        kube_emulator.knobs.clear()
        [back] = wait(slack, lambda: top_level(slack, SECOND_CHANNEL, "reaches cluster"))
        assert "nsstuck reaches cluster `prod-eu` again, after" in back, back
        wait_rounds(slack, store, datetime.now(UTC), 4)
        assert len(top_level(slack, SECOND_CHANNEL, "reaches cluster")) == 1
        assert len(top_level(slack, SECOND_CHANNEL, "cannot reach cluster")) == 1
        assert sample(metrics(bot), "nsstuck_watched_cluster_reachable", cluster="prod-eu") == 1.0
        assert slack.channel_messages(OPS_CHANNEL) == []  # watch.channel, not the cluster's first channel

        clock.write_text("2026-11-20T08:16:00Z\n")
        [verdict] = wait(slack, lambda: [m for m in slack.channel_messages(SECOND_CHANNEL) if "ddd" in slack.render(m)])
        thread = wait(slack, lambda: slack.thread(SECOND_CHANNEL, verdict["ts"]))
        assert "configmaps/mymap" in "\n".join(slack.render(m) for m in thread)
        assert not has_buttons(thread)


def test_an_incident_asked_about_already_gets_the_watch_s_verdict_in_the_right_thread(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """The watch speaks in #platform. `ddd` was asked about in #nsstuck-ops (its thread is there): the
    watch's verdict is a new message in #platform with the report under it, not under a thread of the
    other channel. `eee` was asked about in #platform: the watch's verdict goes into its thread there."""
    slack = slack_emulator
    with watching_bot(
        slack,
        kube_emulator,
        tmp_path,
        clock_at="2026-11-20T08:05:00Z",
        channel=SECOND_CHANNEL,
        channels=(OPS_CHANNEL, SECOND_CHANNEL),
    ) as (bot, store, clock):
        _namespace(kube_emulator, "eee", delete=True)  # deleted at 08:01:00
        asked = {}
        for namespace, channel in (("ddd", OPS_CHANNEL), ("eee", SECOND_CHANNEL)):
            bot.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=ALICE, channel=channel)
            [asked[namespace]] = wait(
                slack, lambda c=channel, n=namespace: [m for m in slack.channel_messages(c) if n in slack.render(m)]
            )
            wait(slack, lambda c=channel, n=namespace: slack.thread(c, asked[n]["ts"]))
        clock.write_text("2026-11-20T08:17:00Z\n")

        [ddd] = wait(slack, lambda: [m for m in slack.channel_messages(SECOND_CHANNEL) if "ddd" in slack.render(m)])
        assert "found by nsstuck's watch, unasked" in slack.render(ddd)
        report = wait(slack, lambda: slack.thread(SECOND_CHANNEL, ddd["ts"]))
        assert "configmaps/mymap" in "\n".join(slack.render(m) for m in report)

        def watched_eee() -> list[str]:
            replies = (slack.render(m) for m in slack.thread(SECOND_CHANNEL, asked["eee"]["ts"]))
            return [r for r in replies if "found by nsstuck's watch" in r]

        wait(slack, watched_eee)
        wait_rounds(slack, store, datetime.now(UTC), 3)
        assert len(watched_eee()) == 1
        assert len(top_level(slack, SECOND_CHANNEL, "eee")) == 1  # the one asked for, not a second
        assert len(top_level(slack, SECOND_CHANNEL, "ddd")) == 1
        assert len(top_level(slack, OPS_CHANNEL, "ddd")) == 1  # the watch did not post in the other channel
