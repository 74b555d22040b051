"""The per-channel pacer: order kept per channel, one post per interval, 429s waited out."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from bot.slack.pacing import ChannelPacer, RateLimited, Transient, Unsettled


def test_posts_keep_their_order_per_channel_and_keep_the_pace() -> None:
    sent: list[tuple[str, int, float]] = []
    pacer = ChannelPacer(interval=0.05)
    futures = []
    for i in range(6):
        for channel in ("C1", "C2"):
            futures.append(pacer.submit(channel, lambda c=channel, n=i: sent.append((c, n, time.monotonic())) or n))
    assert [f.result(timeout=5) for f in futures] == [i for i in range(6) for _ in range(2)]
    for channel in ("C1", "C2"):
        mine = [(n, t) for c, n, t in sent if c == channel]
        assert [n for n, _ in mine] == list(range(6))
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(mine)]
        assert min(gaps) >= 0.045
    pacer.close()


def test_rate_limits_are_waited_out_however_many_come() -> None:
    calls = []
    pacer = ChannelPacer(interval=0.01)

    def post() -> str:
        calls.append(time.monotonic())
        if len(calls) <= 5:
            raise RateLimited(0.02)
        return "posted"

    assert pacer.submit("C1", post).result(timeout=5) == "posted"
    assert len(calls) == 6
    pacer.close()


def test_transient_errors_are_retried_then_reported() -> None:
    pacer = ChannelPacer(interval=0.001, transient_attempts=3)
    attempts = []

    def post() -> None:
        attempts.append(1)
        raise Transient("500 from Slack")

    with pytest.raises(Transient):
        pacer.submit("C1", post).result(timeout=5)
    assert len(attempts) == 3
    ok = threading.Event()
    pacer.submit("C1", ok.set).result(timeout=5)  # the channel keeps working
    assert ok.is_set()
    pacer.close()


def test_a_post_that_may_be_under_way_is_waited_for_not_counted_as_a_failure() -> None:
    pacer = ChannelPacer(interval=0.001, transient_attempts=2)
    calls: list[float] = []

    def post() -> str:
        calls.append(time.monotonic())
        if len(calls) <= 4:
            raise Unsettled(0.02)
        return "found"

    assert pacer.submit("C1", post).result(timeout=5) == "found"
    assert len(calls) == 5  # four waits, though only two failures are allowed
    assert min(b - a for a, b in itertools.pairwise(calls)) >= 0.015
    pacer.close()
