"""Every caller bounded (issue 19, item 3): what one caller can make the running bot hold or do.

- a body larger than any Slack payload is answered 413 from its Content-Length, before it is read
  (waitress used to buffer up to 1 GiB to a temporary file first);
- an idle connection is closed, and no more than NSSTUCK_HTTP_CONNECTION_LIMIT are served at once;
- a user, and a channel, over their commands a minute are told so (only them) and nothing runs;
- two asks for one namespace while its diagnosis runs share one collection, and both are answered;
- with NSSTUCK_DIAGNOSIS_QUEUE diagnoses waiting, one more is refused with "try again" at once.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, CAROL, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, running_bot

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

MB = 1 << 20


def _address(bot: Running) -> tuple[str, int]:
    parts = urlsplit(bot.url)
    return parts.hostname or "127.0.0.1", int(parts.port or 80)


def _metric(bot: Running, name: str, labels: str = "") -> float:
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        text = response.read().decode()
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else "") + r" ([0-9.e+]+)"
    found = re.search(r"^" + pattern + r"$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _limits(**values: int) -> dict[str, str]:
    names = {"user": "NSSTUCK_USER_COMMANDS_PER_MINUTE", "channel": "NSSTUCK_CHANNEL_COMMANDS_PER_MINUTE"}
    return {names[k]: str(v) for k, v in values.items()}


@pytest.mark.slow
def test_a_200_mb_unsigned_post_is_refused_at_once_and_commands_go_on(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as bot:
        sender = socket.create_connection(_address(bot), timeout=10)
        try:
            sender.sendall(
                b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                + f"Content-Length: {200 * MB}\r\n\r\n".encode()
            )
            started = time.monotonic()
            sent = 0
            stop = threading.Event()

            def keep_sending() -> None:
                nonlocal sent
                chunk = b"x" * (64 * 1024)
                while not stop.is_set() and sent < 200 * MB:
                    try:
                        sender.sendall(chunk)
                    except OSError:  # the bot answered and closed the connection
                        return
                    sent += len(chunk)

            pump = threading.Thread(target=keep_sending, daemon=True)
            pump.start()
            sender.settimeout(5)
            answer = sender.recv(4096)
            elapsed = time.monotonic() - started
            # the bot answers commands while that connection is (or was) open
            delivery = bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
            stop.set()
            pump.join(timeout=10)
        finally:
            sender.close()
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert elapsed < 3, elapsed
        assert sent < 50 * MB, f"{sent} bytes were taken before the answer"
        assert delivery.status == 200
        assert "/nsstuck" in delivery.body


@pytest.mark.slow
def test_idle_connections_are_closed_and_open_ones_capped(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_HTTP_IDLE_SECONDS": "2", "NSSTUCK_HTTP_CONNECTION_LIMIT": "3"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        address = _address(bot)
        idle = [socket.create_connection(address, timeout=10) for _ in range(3)]
        waiting = socket.create_connection(address, timeout=10)  # taken by the kernel, not served yet
        try:
            time.sleep(0.5)
            waiting.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\nConnection: close\r\n\r\n")
            waiting.settimeout(1.0)
            with pytest.raises(TimeoutError):
                waiting.recv(4096)  # three connections are open: the fourth waits
            # the three idle ones are closed by the bot within its idle timeout (and a cleanup round)
            started = time.monotonic()
            for connection in idle:
                connection.settimeout(10)
                assert connection.recv(1) == b"", "an idle connection was left open"
            closed_after = time.monotonic() - started
            waiting.settimeout(10)
            answer = waiting.recv(4096)
        finally:
            for connection in (*idle, waiting):
                connection.close()
        assert closed_after < 6, closed_after
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def _refused(bot: Running, user: str, channel: str) -> str:
    delivery = bot.driver.slash_command("/nsstuck", "help", user=user, channel=channel)
    assert delivery.status == 200
    return delivery.body


@pytest.mark.slow
def test_commands_over_a_users_or_a_channels_limit_are_refused_to_them_only(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=_limits(user=3, channel=5)) as bot:
        answers = [_refused(bot, ALICE, OPS_CHANNEL) for _ in range(4)]
        assert all("Slow down" not in a for a in answers[:3]), answers
        assert "Slow down: you have sent more `/nsstuck` commands this minute than allowed" in answers[3]
        # Alice's refused command spent none of the channel's: Bob has two left there, then the channel is full
        bob = [_refused(bot, BOB, OPS_CHANNEL) for _ in range(3)]
        assert all("Slow down" not in a for a in bob[:2]), bob
        assert "Slow down: this channel has sent more" in bob[2]
        # another channel, another user: not limited by them
        assert "Slow down" not in _refused(bot, CAROL, SECOND_CHANNEL)
        # a refused diagnosis runs nothing: nothing is posted
        refused = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        assert "Slow down" in refused.body
        time.sleep(1.5)
        assert bot.slack.calls("chat.postMessage") == []
        assert _metric(bot, "nsstuck_slash_commands_refused_total", 'reason="user_rate"') == 2
        assert _metric(bot, "nsstuck_slash_commands_refused_total", 'reason="channel_rate"') == 1
        # the bucket refills at the limit's rate: 3 a minute is one every 20 s; the answer says "shortly"
        assert "Try again shortly." in answers[3]


@pytest.mark.slow
def test_the_limits_hold_in_socket_mode_too(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True, extra_env=_limits(user=2)) as bot:
        slack_emulator.socket.wait_for_connections(1, timeout=15)
        try:
            acks = [
                bot.slack.socket_mode.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=5)
                for _ in range(3)
            ]
        finally:
            slack_emulator.socket.drop_all()
        texts = [str((a.payload or {}).get("text") or "") for a in acks]
        assert all("Slow down" not in t for t in texts[:2]), texts
        assert "Slow down: you have sent more" in texts[2]


@pytest.mark.slow
def test_two_asks_for_one_namespace_share_one_collection(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as bot:
        # every read of the namespace takes 2 s and is counted (the fault never takes: it only counts)
        kube_emulator.knobs.latency(2000, match=r"^GET /api/v1/namespaces/ddd$")
        reads = kube_emulator.knobs.inject_fault(r"^GET /api/v1/namespaces/ddd$", 500, skip=10**9)
        first = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
        time.sleep(0.5)
        second = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=BOB, channel=OPS_CHANNEL)
        assert "On it" in first.body
        assert "On it" in second.body

        verdict = bot.slack.wait_for_message(OPS_CHANNEL, "stuck", timeout=30)

        def both_answered() -> bool | None:
            thread = "\n".join(bot.slack.render(m) for m in bot.slack.thread(OPS_CHANNEL, verdict["ts"]))
            text = bot.slack.render(verdict) + "\n" + thread
            return (f"<@{ALICE}>" in text and f"<@{BOB}>" in text) or None

        bot.slack.wait_for(both_answered, timeout=30, message="not both askers answered")
        assert reads.seen == 1, f"the namespace was read {reads.seen} times for two asks"
        top_level = [m for m in bot.slack.channel_messages(OPS_CHANNEL) if "stuck" in bot.slack.render(m)]
        assert len(top_level) == 1, "the second answer belongs in the first one's thread"
        assert _metric(bot, "nsstuck_diagnoses_shared_total") == 1


@pytest.mark.slow
def test_a_full_diagnosis_queue_refuses_at_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_DIAGNOSIS_QUEUE": "1", "NSSTUCK_DIAGNOSIS_WORKERS": "4"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        kube_emulator.knobs.latency(4000, match=r"^GET /api/v1/namespaces/busy-")
        answers = []
        for i in range(8):  # four diagnosis workers, one waiting, the rest refused
            delivery = bot.driver.slash_command("/nsstuck", f"prod-eu busy-{i}", user=ALICE, channel=OPS_CHANNEL)
            assert delivery.status == 200
            assert delivery.elapsed < 3.0
            answers.append(delivery.body)
        refused = [a for a in answers if "Too many diagnoses are waiting right now; try again in a minute." in a]
        taken = [a for a in answers if "On it" in a]
        assert len(refused) >= 1, answers
        assert len(taken) >= 5, answers
        assert len(refused) + len(taken) == 8
        assert _metric(bot, "nsstuck_slash_commands_refused_total", 'reason="queue_full"') == len(refused)
        # what was taken is answered: each missing namespace gets its verdict
        bot.slack.wait_for(
            lambda: (
                len([m for m in bot.slack.channel_messages(OPS_CHANNEL) if "busy-" in bot.slack.render(m)])
                >= len(taken)
                or None
            ),
            timeout=40,
            message="not every taken diagnosis was answered",
        )


@pytest.mark.slow
@pytest.mark.parametrize(("threads", "healthz_waits"), [(3, True), (4, False)])
def test_requests_are_handled_side_by_side_up_to_the_thread_setting(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, threads: int, healthz_waits: bool
) -> None:
    """Three commands held up (the database is locked, so none can record its signature) take three of
    the bot's request threads: with NSSTUCK_HTTP_THREADS=3 a probe waits for one of them, with 4 it is
    answered at once. Once the lock goes, every command is answered."""
    env = {"NSSTUCK_HTTP_THREADS": str(threads)}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        assert f"{threads} HTTP request threads" in bot.log.read_text()
        locker = sqlite3.connect(tmp_path / "bot.db", isolation_level=None, timeout=30)
        answers: list[str] = []
        try:
            locker.execute("BEGIN IMMEDIATE")  # the bot's writes wait (its busy timeout is 30 s)

            def ask() -> None:
                delivery = bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
                answers.append(f"{delivery.status} {delivery.body}")

            askers = [threading.Thread(target=ask) for _ in range(3)]
            for asker in askers:
                asker.start()
            time.sleep(2.0)  # the three are in the bot by now, waiting for the database
            assert not answers, answers
            try:
                with urllib.request.urlopen(bot.url + "/healthz", timeout=1.5) as response:
                    probed: str | None = response.read().decode()
            except TimeoutError:
                probed = None
            assert (probed is None) is healthz_waits, probed
        finally:
            locker.rollback()
            locker.close()
        for asker in askers:
            asker.join(timeout=30)
        assert len(answers) == 3, answers
        assert all(a.startswith("200 ") and "/nsstuck" in a for a in answers), answers
        with urllib.request.urlopen(bot.url + "/healthz", timeout=5) as response:
            assert response.status == 200
