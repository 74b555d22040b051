"""Who gets in: forged, stale, future-dated, unsigned, tampered and replayed requests are refused and
do nothing; Slack's own retries are not mistaken for replays."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event, text

from bot.slack.signing import WINDOW_SECONDS, RequestGate, Verdict, signature_of
from bot.store.database import Database
from tests._migrated import migrated
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery, SignedRequest
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL, SIGNING_SECRET
from tests.hostile.conftest import VISIBLE, Hostile

FORM = "application/x-www-form-urlencoded"


def diagnose(hostile: Hostile, signing: Any = "valid") -> Delivery:
    """`/nsstuck prod-eu <the stuck namespace>`: a command that records a diagnosis and posts it."""
    return hostile.flow.bot.driver.slash_command(
        "/nsstuck", f"prod-eu {hostile.flow.namespace}", user=ALICE, channel=OPS_CHANNEL, signing=signing
    )


def settled(hostile: Hostile, seconds: float = 1.0) -> None:
    """Give whatever a request started in the background the time to show (a diagnosis takes ~0.2 s)."""
    time.sleep(seconds)


@pytest.mark.parametrize("signing", ["forged", "stale", "future", "unsigned", "tampered"])
def test_a_badly_signed_command_is_refused_and_does_nothing(hostile: Hostile, signing: Any) -> None:
    before = hostile.baseline()
    delivery = diagnose(hostile, signing)
    assert delivery.status == 401
    assert delivery.json() == {"error": "invalid request"}
    settled(hostile)
    assert hostile.rows() == before.rows
    assert {m: len(hostile.slack.calls(m)) for m in VISIBLE} == before.calls
    assert hostile.messages() == before.messages


def test_a_replayed_command_is_refused_and_runs_once(hostile: Hostile) -> None:
    before = hostile.baseline()
    first = diagnose(hostile)
    assert first.status == 200
    assert "On it" in first.body
    again = hostile.flow.bot.driver.replay(first)  # the same bytes and headers, well inside the window
    assert again.status == 401
    assert again.json() == {"error": "replayed request"}
    hostile.slack.wait_for(lambda: hostile.rows()["diagnoses"] > before.rows["diagnoses"] or None, timeout=20)
    settled(hostile, 1.5)
    assert hostile.rows()["diagnoses"] == before.rows["diagnoses"] + 1  # the first ran, the replay did not
    # and a third time, from elsewhere in the window, still no
    assert hostile.flow.bot.driver.replay(first).status == 401
    # the same command typed again is a new request (new trigger_id, new signature): it runs
    assert diagnose(hostile).status == 200
    hostile.slack.wait_for(lambda: hostile.rows()["diagnoses"] == before.rows["diagnoses"] + 2 or None, timeout=20)


def test_a_replayed_click_is_refused(hostile: Hostile) -> None:
    """Approve, once by a non-approver: refused and recorded. Its replay is not recorded again."""
    driver = hostile.flow.bot.driver
    first = driver.click(OPS_CHANNEL, hostile.request_ts, "nsstuck_approve", user=ALICE)
    assert first.status == 200
    hostile.slack.wait_for(lambda: hostile.flow.audit(hostile.request_id)[-1:] == ["refused"] or None, timeout=10)
    audit = hostile.flow.audit(hostile.request_id)
    assert driver.replay(first).status == 401
    settled(hostile)
    assert hostile.flow.audit(hostile.request_id) == audit


def _event(hostile: Hostile, user: str) -> SignedRequest:
    driver = hostile.flow.bot.driver
    body = driver.builder.event_callback({"type": "app_home_opened", "user": user, "channel": "D0X", "tab": "home"})
    return driver.sign(json.dumps(body), "application/json", payload=body, kind="event")


def test_slacks_retries_are_not_replays(hostile: Hostile) -> None:
    """A retried event delivery is signed anew and runs; the same bytes again are a duplicate: 200 with
    X-Slack-No-Retry when marked as a retry (so Slack stops), 401 when not; neither runs."""
    driver = hostile.flow.bot.driver
    publishes = lambda: len(hostile.slack.calls("views.publish"))  # noqa: E731
    before = publishes()
    original = _event(hostile, BOB)
    assert driver.send(original).status == 200
    hostile.slack.wait_for(lambda: publishes() == before + 1 or None, timeout=10)

    retry_headers = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    duplicate = driver.send(
        SignedRequest(original.url, original.body, {**original.headers, **retry_headers}, original.payload, "event")
    )
    assert duplicate.status == 200
    assert duplicate.headers.get("X-Slack-No-Retry") == "1"
    assert driver.replay(original).status == 401

    retried = driver.resend(original, extra_headers=retry_headers)  # what Slack sends: a new timestamp
    assert retried.status == 200
    assert "X-Slack-No-Retry" not in retried.headers
    hostile.slack.wait_for(lambda: publishes() == before + 2 or None, timeout=10)
    settled(hostile, 0.5)
    assert publishes() == before + 2


header_values = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=80),
    st.sampled_from(["", "0", "-1", "1e9", "+1", " 1", "\u00b9\u00b2\u00b3", "v0=", "v1=" + "0" * 64]),
)


@settings(max_examples=60, deadline=None)
@given(timestamp=header_values, signature=header_values, offset=st.integers(-1000, 1000))
def test_any_signature_headers_that_are_not_slacks_get_401(
    hostile: Hostile, timestamp: str | None, signature: str | None, offset: int
) -> None:
    """Random headers, and real signatures made for another time or with a near-miss format."""
    driver = hostile.flow.bot.driver
    body = "token=x&command=%2Fnsstuck&text=help&user_id=U0AAAAAAA&channel_id=C0123ABCD&response_url=x"
    now = int(time.time())
    real = signature_of(SIGNING_SECRET, str(now), body.encode())
    variants: list[tuple[str | None, str | None]] = [
        (timestamp, signature),
        # a real signature sent with another time, or a real time with a signature that is not real
        (str(now + offset), real) if offset else (str(now), (signature or "") + "0"),
        # a real signature in capitals, or with its timestamp written another way
        (str(now), real.upper()),
        (f"0{now}", real),
        (f"{now}.0", real),
    ]
    for sent_timestamp, sent_signature in variants:
        headers = {"Content-Type": FORM}
        if sent_timestamp is not None:
            headers["X-Slack-Request-Timestamp"] = sent_timestamp
        if sent_signature is not None:
            headers["X-Slack-Signature"] = sent_signature
        delivery = driver.send(SignedRequest(driver.url, body, headers, {}, "raw"))
        # refused by the bot, or already by the HTTP server for bytes no header may hold
        assert delivery.status == 401 or "Invalid header" in delivery.body, (headers, delivery.status, delivery.body)


def test_a_signed_body_that_is_not_utf8_is_refused_and_does_nothing(hostile: Hostile) -> None:
    """Slack sends UTF-8; a body that is not, however well signed (here with the secret itself), gets
    the 401 of a bad signature and does nothing."""
    before = hostile.baseline()
    driver = hostile.flow.bot.driver
    fields = driver.builder.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
    body = urlencode(fields).encode().replace(b"&text=help&", b"&text=help\xff&", 1)
    assert b"\xff" in body
    now = str(int(time.time()))
    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:" + now.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {"Content-Type": FORM, "X-Slack-Request-Timestamp": now, "X-Slack-Signature": f"v0={mac}"}
    request = urllib.request.Request(driver.url, data=body, headers=headers, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    with refused.value as answer:
        assert answer.code == 401
        assert json.loads(answer.read()) == {"error": "invalid request"}
    settled(hostile)
    assert hostile.rows() == before.rows
    assert {m: len(hostile.slack.calls(m)) for m in VISIBLE} == before.calls


# -- the gate itself, on SQLite and PostgreSQL ------------------------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def signed(body: bytes, at: int) -> tuple[bytes, str, str]:
    return body, str(at), signature_of(SIGNING_SECRET, str(at), body)


def test_the_gate_lets_a_request_in_once_and_forgets_it_after_the_window(database: Database) -> None:
    clock = Clock(1_800_000_000)
    gate = RequestGate(SIGNING_SECRET, database, clock=clock)
    request = signed(b"a=1", 1_800_000_000)
    assert gate.check(*request) is Verdict.ACCEPTED
    assert gate.check(*request) is Verdict.REPLAYED
    assert gate.check(*signed(b"a=2", 1_800_000_000)) is Verdict.ACCEPTED  # another body, another signature
    assert gate.check(b"a=1", request[1], request[2].replace("v0=", "v1=")) is Verdict.INVALID
    assert gate.check(b"a=1 ", request[1], request[2]) is Verdict.INVALID
    assert gate.check(b"a=1", request[1], None) is Verdict.INVALID
    assert gate.check(b"a=1", None, request[2]) is Verdict.INVALID

    clock.now += WINDOW_SECONDS + 1  # past the window: stale, whether seen or not
    assert gate.check(*request) is Verdict.INVALID
    assert recorded(database) == {request[2], signed(b"a=2", 1_800_000_000)[2]}
    clock.now += 200  # and by now it is forgotten (pruned with the next request let in)
    newer = signed(b"a=3", int(clock.now))
    assert gate.check(*newer) is Verdict.ACCEPTED
    assert recorded(database) == {newer[2]}


def recorded(database: Database) -> set[str]:
    with database.engine.connect() as connection:
        return {str(row[0]) for row in connection.execute(text("SELECT signature FROM seen_requests"))}


def test_of_many_at_once_one_gets_in(database: Database) -> None:
    gate = RequestGate(SIGNING_SECRET, database)
    request = signed(b"payload=%7B%7D", int(time.time()))
    with ThreadPoolExecutor(max_workers=12) as pool:
        verdicts = Counter(pool.map(lambda _: gate.check(*request), range(24)))
    assert verdicts == Counter({Verdict.REPLAYED: 23, Verdict.ACCEPTED: 1})


def test_requests_that_arrive_together_are_recorded_together(database: Database) -> None:
    """A group commit: while one transaction records a signature, the requests that arrive meanwhile
    wait and are recorded in the next one, all at once; each is let in only after its record is
    committed, and a replay within the same group is still refused."""
    gate = RequestGate(SIGNING_SECRET, database)
    commits: list[float] = []
    first_commit = threading.Event()

    def slow_commit(_connection: Any) -> None:
        commits.append(time.monotonic())
        first_commit.set()
        time.sleep(0.2)  # the first commit holds the others back long enough for all of them to queue

    event.listen(database.engine, "commit", slow_commit)
    try:
        now = int(time.time())
        requests = [signed(f"n={k}".encode(), now) for k in range(20)]
        answered: dict[int, float] = {}

        def send(k: int) -> Verdict:
            if k:
                first_commit.wait(5)
            verdict = gate.check(*requests[k % 20])
            answered[k] = time.monotonic()
            return verdict

        with ThreadPoolExecutor(max_workers=25) as pool:
            verdicts = list(pool.map(send, range(25)))  # 20 requests, 5 of them sent twice
    finally:
        event.remove(database.engine, "commit", slow_commit)
    assert Counter(verdicts) == Counter({Verdict.ACCEPTED: 20, Verdict.REPLAYED: 5})
    assert recorded(database) == {r[2] for r in requests}
    assert len(commits) == 2  # the first request's, then the 24 others' together (one at a time: 25)
    assert all(answered[k] > commits[-1] for k in range(1, 25))  # none let in before its commit


def test_without_its_database_the_gate_still_refuses_a_replay_to_this_replica(tmp_path: Path) -> None:
    """While the database is unavailable (here: never migrated), the process's own record decides."""
    database = Database(f"sqlite:///{tmp_path / 'never-migrated.db'}")  # no seen_requests table
    try:
        gate = RequestGate(SIGNING_SECRET, database)
        request = signed(b"a=1", int(time.time()))
        assert gate.check(*request) is Verdict.ACCEPTED
        assert gate.check(*request) is Verdict.REPLAYED
        assert gate.check(*signed(b"a=2", int(time.time()))) is Verdict.ACCEPTED
    finally:
        database.dispose()


def test_signature_of_is_slacks() -> None:
    """The example of Slack's guide to verifying requests."""
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
        b"channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
        b"response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    assert (
        signature_of("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body)
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )


def test_the_window_is_five_minutes_each_way_to_the_second(database: Database) -> None:
    clock = Clock(1_800_000_000)
    gate = RequestGate(SIGNING_SECRET, database, clock=clock)
    for offset in (WINDOW_SECONDS, -WINDOW_SECONDS):
        assert gate.check(*signed(f"at={offset}".encode(), 1_800_000_000 + offset)) is Verdict.ACCEPTED
    for offset in (WINDOW_SECONDS + 1, -WINDOW_SECONDS - 1):
        assert gate.check(*signed(f"at={offset}".encode(), 1_800_000_000 + offset)) is Verdict.INVALID
    clock.now += 0.5  # a second's fraction past the window is past it
    assert gate.check(*signed(b"late", 1_800_000_000 - WINDOW_SECONDS)) is Verdict.INVALID


def test_what_slack_never_sends_is_refused_even_when_signed(database: Database) -> None:
    """Headers of another form than Slack's, signed with the secret itself for what they say: a timestamp
    that `int()` reads but Slack never writes, a signature past ASCII, a body that is not UTF-8."""
    now = int(time.time())
    gate = RequestGate(SIGNING_SECRET, database)

    def mac(timestamp: str, body: bytes) -> str:
        base = b"v0:" + timestamp.encode() + b":" + body
        return "v0=" + hmac.new(SIGNING_SECRET.encode(), base, hashlib.sha256).hexdigest()

    arabic = str(now).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    for timestamp in (f" {now}", f"+{now}", f"{now} ", f"{str(now)[:4]}_{str(now)[4:]}", arabic, f"0{now:012d}"):
        assert gate.check(b"a=1", timestamp, mac(timestamp, b"a=1")) is Verdict.INVALID, timestamp
    assert gate.check(b"a=1", str(now), mac(str(now), b"a=1") + "é") is Verdict.INVALID
    assert gate.check(b"a=1", str(now), "v0=" + "é" * 64) is Verdict.INVALID
    assert gate.check(b"a=\xff", str(now), mac(str(now), b"a=\xff")) is Verdict.INVALID
    assert gate.check(b"a=1", str(now), mac(str(now), b"a=1")) is Verdict.ACCEPTED  # the same, as Slack sends it


# -- across replicas ----------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_request_replayed_to_another_replica_is_refused(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, postgres_url: str
) -> None:
    from tests.approvals._flow import FAST, Flow, write_config
    from tests.slack._bot import serve_process

    config = write_config(tmp_path, kube_emulator)
    migrated(postgres_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        serve_process(slack_emulator, config, postgres_url, tmp_path / "a", extra_env=FAST) as first,
        serve_process(slack_emulator, config, postgres_url, tmp_path / "b", extra_env=FAST) as second,
    ):
        flow = Flow(first, slack_emulator, kube_emulator, postgres_url)
        namespace = flow.scenario("seed002-configmap-finalizer")
        delivery = first.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=ALICE, channel=OPS_CHANNEL)
        assert delivery.status == 200
        replayed = second.driver.replay(delivery)
        assert replayed.status == 401
        assert replayed.json() == {"error": "replayed request"}
        slack_emulator.wait_for(lambda: flow.query("SELECT id FROM diagnoses") or None, timeout=20)
        time.sleep(1.5)
        assert len(flow.query("SELECT id FROM diagnoses")) == 1
