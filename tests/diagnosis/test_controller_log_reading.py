"""Issue 37 §2, the controller's own words, piece by piece: the redaction of a quoted line, the bounded
read that keeps a log's newest bytes (`read_tail`), and the client's path through it
(`Transport.get_tail`, then `read_controller_logs`) against the Kubernetes emulator serving `pods/log`."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.domain.controller_logs import LINE_LIMIT, MAX_BYTES, QUOTED, LogTarget, Subject, Tally, cut, redact
from bot.domain.refs import ClusterName
from bot.kube.connecting import ClusterTarget, Connection, connect
from bot.kube.podlogs import read_controller_logs
from bot.kube.requesting import CHUNK, read_tail
from bot.kube.transport import Transport
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP

# --- redaction ---------------------------------------------------------------------------------------

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImNhbmFyeSJ9.eyJzdWIiOiJjYW5hcnktZ2FwczM3In0.c2lnbmF0dXJlLWdhcHMzNy1jYW5hcnk"
CANARY = "Gaps37Canary-9f3c2e"

LEAKY = [
    # bearer tokens, in an Authorization header or anywhere
    (f"GET https://api.example.com/v1/users: 401 (Authorization: Bearer {CANARY}xyz)", CANARY),
    (f"sending header authorization=Bearer {CANARY}", CANARY),
    (f"basic auth rejected: Basic {CANARY}QWxhZGRpbjpvcGVu", CANARY),
    # key=value and key: value secrets, quoted or not
    (f"connecting with password={CANARY} to db", CANARY),
    (f'{{"level":"error","client_secret":"{CANARY}","msg":"oauth refused"}}', CANARY),
    (f"token: {CANARY} expired", CANARY),
    (f"AWS_SECRET_ACCESS_KEY={CANARY}/wJalrXUtnFEMI", CANARY),
    (f"apiKey='{CANARY}' was refused", CANARY),
    # URLs with user info
    (f"Get https://admin:{CANARY}@keycloak.example.com/realms/x: 403 Forbidden", CANARY),
    (f"dial postgres://app:{CANARY}@db:5432/app failed", CANARY),
    (f"fetch https://{CANARY}@github.com/org/repo.git: not found", CANARY),
    # JWT-like strings, and well-known token shapes, wherever they stand
    (f"the service account {JWT} is no longer valid", "c2lnbmF0dXJlLWdhcHMzNy1jYW5hcnk"),
    ("slack said invalid_auth for xoxb-123456789012-gaps37canary", "gaps37canary"),
    ("github refused ghp_Gaps37CanaryGaps37CanaryGaps37", "Gaps37CanaryGaps37"),
    ("AWS rejected AKIAGAPS37CANARY0001: InvalidClientTokenId", "AKIAGAPS37CANARY0001"),
]


@pytest.mark.parametrize(("line", "secret"), LEAKY)
def test_nothing_of_a_credential_survives_redaction(line: str, secret: str) -> None:
    redacted = redact(line)
    assert secret not in redacted
    assert "[REDACTED]" in redacted
    # nor any 8 characters of it (a redaction that keeps a prefix or a suffix leaks part of it)
    assert not any(secret[i : i + 8] in redacted for i in range(len(secret) - 7))


NORMAL = [
    'E1127 10:00:01.000000 1 controller.go:114] "Reconciler error" err="kialis.kiali.io \\"kiali\\" not found"',
    "failed to delete bucket my-bucket: AccessDenied: 403 Forbidden",
    "reconciling Kiali kiali-failing/kiali (uid 6f1c2d4e-0000-4000-8000-000000000001)",
    "the token of the webhook is fine; retrying in 30s",  # the word alone, nothing after it to hide
    "GET https://auth.example.com/api/v1/users?page=2: 500 Internal Server Error",
    "unable to create new content in namespace kiali-refused because it is being terminated",
]


@pytest.mark.parametrize("line", NORMAL)
def test_ordinary_log_lines_are_left_as_they_are(line: str) -> None:
    assert redact(line) == line


def test_a_quoted_line_is_redacted_then_cut_and_at_most_five_are_kept() -> None:
    subject = Subject(key="kialis.kiali.io/kiali", namespace="ns1", name="kiali")
    tally = Tally((subject,))
    long_tail = "x" * 1000
    for i in range(8):
        tally.add(f"error {i}: ns1/kiali refused: Authorization: Bearer {CANARY}{i} {long_tail}")
    tally.add("something about ns2/other")  # names another object
    [lines] = tally.result()
    assert (lines.matched, lines.errors) == (8, 8)
    assert len(lines.quoted) == QUOTED
    assert all(len(q) <= LINE_LIMIT for q in lines.quoted)
    assert not any(CANARY in q for q in lines.quoted)
    assert lines.quoted[-1].startswith("error 7: ns1/kiali refused")  # newest last
    # a credential past the cut is not a reason to keep it: redaction comes first
    assert cut("a" * 400).endswith("...")


# --- read_tail ---------------------------------------------------------------------------------------


def _reader(data: bytes, chunk: int = CHUNK) -> Iterator[bytes]:
    for start in range(0, len(data), chunk):
        yield data[start : start + chunk]


def test_read_tail_keeps_the_newest_bytes() -> None:
    lines = b"".join(f"line {i:06d}\n".encode() for i in range(100_000))  # 1.2 MB
    chunks = _reader(lines, 7_000)
    body, was_cut = read_tail(lambda n: next(chunks, b""), 5_000)
    assert was_cut is True
    assert len(body) == 5_000
    assert bytes(body) == lines[-5_000:]
    assert body.endswith(b"line 099999\n")
    # a short answer is kept whole, and said not cut
    short = _reader(b"one\ntwo\n")
    body, was_cut = read_tail(lambda n: next(short, b""), 5_000)
    assert (bytes(body), was_cut) == (b"one\ntwo\n", False)


def _peak(total: int) -> int:
    """The most memory read_tail held while reading `total` bytes, keeping MAX_BYTES of them."""
    chunk = b"y" * (CHUNK - 1) + b"\n"
    sent = 0

    def read1(n: int) -> bytes:
        nonlocal sent
        if sent >= total:
            return b""
        sent += len(chunk)
        return chunk  # the same object each time: only what read_tail holds is allocated

    tracemalloc.start()
    try:
        body, was_cut = read_tail(read1, MAX_BYTES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert was_cut is True
    assert len(body) == MAX_BYTES
    return peak


def test_read_tail_holds_no_more_than_it_keeps_whatever_the_size_of_the_answer() -> None:
    small, large = _peak(4 * MAX_BYTES), _peak(64 * MAX_BYTES)
    # a small multiple of what it keeps (the buffer, and its copy while it grows), never the answer's size
    assert large < 3 * MAX_BYTES
    assert abs(large - small) <= CHUNK


def test_read_tail_calls_its_hook_before_each_read() -> None:
    # the hook is where the caller's deadline is checked: it stops a body that keeps coming
    chunks = _reader(b"z" * (10 * CHUNK))
    calls = 0

    def before() -> None:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise TimeoutError("timed out")

    with pytest.raises(TimeoutError):
        read_tail(lambda n: next(chunks, b""), 100, before)
    assert calls == 4


# --- the client's path, against the emulator ------------------------------------------------------------

NOW = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@pytest.fixture
def operator(kube_emulator: Emulator) -> str:
    """A running operator pod in `ops` (on a node, so that its log can be read); its name."""
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator-0", "labels": {"app": "operator"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "manager", "image": "example/operator:1"}]},
    }
    http.post("/api/v1/namespaces/ops/pods", pod)
    return "operator-0"


@pytest.fixture(params=["reader", "client"])
def connection(request: pytest.FixtureRequest, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Connection]:
    """A connection to the emulator that reads with nsstuck's own reader, or through the kubernetes client
    (`client`: the path a connection without a usable reader takes, `Transport._tail_by_client`)."""
    target = ClusterTarget(name=ClusterName("emu"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))
    held = connect(target, pool_size=2)
    if request.param == "client":
        assert held.reader is not None
        held.reader.close()
        held.reader = None
    try:
        yield held
    finally:
        held.close()


def _log(kube: Emulator, lines: list[str]) -> None:
    start = NOW - timedelta(hours=2)
    kube.pod_logs.set("ops", "operator-0", [(start + timedelta(seconds=i), text) for i, text in enumerate(lines)])


def test_get_tail_keeps_the_newest_bytes_of_a_pods_log(
    kube_emulator: Emulator, operator: str, connection: Connection
) -> None:
    _log(kube_emulator, [f"reconcile {i:05d} of ops/thing" for i in range(3_000)])
    transport = Transport(connection, call_timeout=5.0)
    path = f"/api/v1/namespaces/ops/pods/{operator}/log"
    tail = transport.get_tail(path, {"container": "manager", "tailLines": "2000"}, keep=4_096)
    assert tail.cut is True
    assert len(tail.body) == 4_096
    assert tail.body.endswith(b"reconcile 02999 of ops/thing\n")
    # the whole answer when it fits; tailLines is the server's, applied first
    whole = transport.get_tail(path, {"container": "manager", "tailLines": "3"}, keep=4_096)
    assert whole.cut is False
    assert whole.body.decode().splitlines() == [f"reconcile {i:05d} of ops/thing" for i in (2997, 2998, 2999)]


def test_the_controller_log_read_quotes_the_newest_whole_lines_and_no_credential(
    kube_emulator: Emulator, operator: str, connection: Connection
) -> None:
    old = [f"error: ops-old failure {i} about ops/thing" for i in range(5)]
    filler = [f"{i:08d} " + "f" * 1_000 for i in range(1_100)]  # about 1.1 MB: older bytes are dropped
    new = [f"error: cleanup of ops/thing failed: 401 (Authorization: Bearer {CANARY}{i})" for i in range(3)]
    # the line the 1 MiB kept begins in: its kept end names the object in an error; read as a line, it would count
    lines = [*old, *filler, *new]
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    begin = at - MAX_BYTES
    k = max(i for i, start in enumerate(starts) if start <= begin)
    partial = " error: ops/thing partial line"
    lines[k] = "p" * (len(lines[k]) - len(partial)) + partial
    assert k >= len(old)
    assert begin - starts[k] < len(lines[k]) - len(partial)  # the cut falls before the words
    _log(kube_emulator, lines)
    target = LogTarget(
        kind="Deployment",
        namespace="ops",
        name="operator",
        selector={"matchLabels": {"app": "operator"}},
        since=NOW - timedelta(hours=3),
        subjects=(Subject(key="things.example.com/thing", namespace="ops", name="thing"),),
    )
    reading = read_controller_logs(
        Transport(connection, call_timeout=5.0), [target], deadline=time.monotonic() + 10, call_timeout=5.0
    )
    assert reading.gaps == ()
    [found] = reading.logs
    assert found.truncated is True  # the older part was dropped, and said so
    assert found.pods == ("operator-0/manager",)
    [said] = found.objects
    assert said.errors == 3  # the oldest lines, past the 1 MiB kept, are not counted
    assert all("cleanup of ops/thing failed" in q for q in said.quoted)
    assert not any(CANARY in q for q in said.quoted)
    assert CANARY not in repr(found.to_json())
    # the line cut in its middle is not read: only whole lines count
    assert not any("partial" in q for q in said.quoted)
    assert found.lines_read == len(lines) - k - 1
