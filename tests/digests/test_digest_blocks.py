"""A digest in Block Kit: within Slack's limits however large, links to incident threads, escaped."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.services.digesting import Digest, Entry, Section, Waiting
from bot.slack.blocks import MAX_BLOCKS
from bot.slack.digest_blocks import digest_messages
from tests.fakes.slackapi.blockkit import Limits, validate_blocks


def _digest(clusters: int, per_cluster: int) -> Digest:
    sections = []
    for c in range(clusters):
        entries = tuple(
            Entry(
                f"cluster-{c}",
                f"ns-{c}-{n}<!channel>",
                f"uid-{c}-{n}",
                incident_id=n + 1,
                stuck_for=7200 + n,
                cause="orphaned_finalizer",
                summary="1 Kiali object keeps finalizer kiali.io/finalizer; " + "x" * 120,
                channel="C0123ABCD",
                thread_ts=f"1700000000.{n:06d}",
            )
            for n in range(per_cluster)
        )
        sections.append(
            Section(
                f"cluster-{c}",
                new=entries[:2],
                still=entries[2:],
                waiting=(Waiting(7, "ns", "Remove a finalizer", 0, 1, "pending"),),
            )
        )
    sections.append(Section("down", reachable=False, error="cannot connect: Connection refused"))
    sections.append(Section("quiet"))
    return Digest(
        key="k",
        channel="C0123ABCD",
        timezone="Europe/Berlin",
        stuck_after=1800,
        scheduled_for=datetime(2026, 11, 23, 8, tzinfo=UTC),
        previous=None,
        sections=tuple(sections),
    )


def test_a_large_digest_is_split_within_slack_limits() -> None:
    messages = digest_messages(_digest(50, 5), workspace="https://emu.slack.com/")
    assert len(messages) > 1
    everything = ""
    for message in messages:
        assert len(message.blocks) <= MAX_BLOCKS + 1
        assert validate_blocks(list(message.blocks), max_blocks=50, limits=Limits()) == []
        everything += str(message.blocks)
    for c in range(50):
        assert f"cluster-{c}" in everything  # nothing dropped
    assert "<!channel>" not in everything  # escaped
    assert "&lt;!channel&gt;" in everything
    assert "https://emu.slack.com/archives/C0123ABCD/p1700000000000000" in everything
    assert "unreachable" in everything
    assert "Nothing stuck on quiet" in everything
