"""The hostile-server suite (issue 36): every kind of read answered in every way a broken API server, a proxy
in between or an aggregated API half up answers, through the real command line as a process.

One emulated cluster (per kind of read, so that pytest-xdist spreads them), on a clock at the present
(`precheck` reads the real one): `preview` is Active and holds a Kiali object whose operator is gone, so
deleting it would get stuck (`precheck` exits 4); `istio-system` (seed003) and `kiali-two` are Terminating,
held by such an object. A rewrite rule of the emulator (`knobs.rewrite`, or `knobs.trickle`) answers one
kind of read of the namespace under test:

- the discovery root (`GET /apis`), the group's document (`GET /apis/kiali.io/v1alpha1`), the namespace's
  list of Kialis, the namespace itself, and the read of the object being deleted (in the Active namespace:
  the one carrying a finalizer) whole;

with each of: an empty body, `{}`, `null`, an array, a string; a body cut short, gzip garbage, 100 MB, an
endless trickle; a wrong kind, duplicate items, items without metadata. For every combination: no crash,
the report produced and marked incomplete with the gap of that read named, `precheck` never 0 (4 or 5),
no force-finalize offered, the command's peak RSS under 300 MB with NSSTUCK_MAX_ANSWER_MB=64; and, for
the slow answers (100 MB, the trickle), the command ended within its deadline plus 1 s (those tests are
`timing`). The count of combinations tried is printed at the end of the run (tests/hostile/conftest.py).

The slow answers run the `nsstuck` console script as a process each (measured: tests/_measured.py). The
fast ones of a kind of read, and the unbroken cluster's two commands, run in ONE process
(tests/hostile/_batch.py), which runs the command line's entry point once per case, in sequence: the
module's fixture `batch` sets a case's rule, hands the process the case, waits for it to end and clears
the rule, then the next. Each test asserts its own case from what the process recorded: exit code,
stdout and stderr; the process's peak RSS, which only grows, bounds every case it ran up to then. A
process per case cost 0.5-1 CPU-s to start the interpreter and import the client libraries, 130 times.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests._measured import run_measured
from tests._python import PYTHON, assert_no_resource_warning
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario
from tests.foundation.test_config import REPO

DEADLINE = 4.0  # the command's --timeout: a few seconds, which a loaded machine still collects this cluster in
LATE = 1.0  # how much later than its deadline a command may end
LIMIT_MB = 64  # NSSTUCK_MAX_ANSWER_MB in the suite
RSS_MB = 300
ACTIVE = "preview"
TERMINATING = "istio-system"
SECOND = "kiali-two"  # the second Terminating one (tests/hostile/test_hostile_bot.py)
GROUP = "/apis/kiali.io/v1alpha1"
JSON = dict[str, Any]
SCRIPT = shutil.which("nsstuck", path=str(Path(sys.executable).parent))
CASE_SECONDS = 60.0  # the longest a case of the batch may take (a process of its own had 60 s)

# a process per case, and the slow answers wait for the deadline: not in the fast tier (make test-fast)
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Read:
    """A kind of read: the path it asks for (of a namespace), and the `what` of the gap it leaves."""

    name: str
    path: Callable[[str], str]
    gap: Callable[[str], str]  # a regex on the gap's `what`

    def __str__(self) -> str:
        return self.name


READS = [
    Read("discovery-root", lambda ns: "/apis", lambda ns: r"discovery of /apis"),
    Read("group-document", lambda ns: GROUP, lambda ns: r"(discovery|resources) of kiali\.io/v1alpha1"),
    Read("list", lambda ns: f"{GROUP}/namespaces/{ns}/kialis", lambda ns: rf"list kialis\.kiali\.io in {ns}"),
    Read("namespace", lambda ns: f"/api/v1/namespaces/{ns}", lambda ns: rf"get namespace {ns}"),
    Read(
        "deleting-object",
        lambda ns: f"{GROUP}/namespaces/{ns}/kialis/kiali",
        lambda ns: rf"get kialis\.kiali\.io {ns}/kiali",
    ),
]


def _item(ns: str) -> JSON:
    return {"metadata": {"name": "kiali", "namespace": ns, "finalizers": ["kiali.io/finalizer"]}}


def _duplicates(read: Read, ns: str) -> bytes:
    """Two of the same entry, in the document this read must answer."""
    if read.name == "discovery-root":
        group = {"name": "kiali.io", "versions": [{"groupVersion": "kiali.io/v1alpha1", "version": "v1alpha1"}]}
        return json.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group, group]}).encode()
    if read.name == "group-document":
        resource = {"name": "kialis", "kind": "Kiali", "namespaced": True, "verbs": ["get", "list"]}
        doc = {"kind": "APIResourceList", "groupVersion": "kiali.io/v1alpha1", "resources": [resource, resource]}
        return json.dumps(doc).encode()
    items = [_item(ns), _item(ns)]
    return json.dumps({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": items}).encode()


def _without_metadata(read: Read, ns: str) -> bytes:
    """Entries that do not say what they are, in the document this read must answer."""
    if read.name == "discovery-root":
        return json.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{"versions": []}]}).encode()
    if read.name == "group-document":
        doc = {"kind": "APIResourceList", "groupVersion": "kiali.io/v1alpha1", "resources": [{"verbs": ["list"]}]}
        return json.dumps(doc).encode()
    if read.name in ("namespace", "deleting-object"):
        return json.dumps({"kind": "Kiali" if read.name != "namespace" else "Namespace", "spec": {}}).encode()
    doc = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": [{"kind": "Kiali"}]}
    return json.dumps(doc).encode()


def _wrong_kind(read: Read, ns: str) -> bytes:
    """A ConfigMapList named as the object asked for: the shape of a list, of no kind this read may be."""
    return json.dumps(
        {
            "kind": "ConfigMapList",
            "apiVersion": "v1",
            "metadata": {"name": ns if read.name == "namespace" else "kiali"},
            "items": [],
        }
    ).encode()


def _hundred_mb() -> Iterable[bytes]:
    """100 MB of a well-formed start, chunked (nothing announced): read up to the limit, then given up."""
    piece = json.dumps(_item("x")).encode() + b","
    chunk = piece * ((1 << 20) // len(piece))
    return itertools.chain([b'{"kind": "PartialObjectMetadataList", "items": ['], itertools.repeat(chunk, 100))


CUT = b'{"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": [{"metadata": {"na'


@dataclass(frozen=True)
class Answer:
    name: str
    inject: Callable[[Emulator, str, Read, str], object]  # (emulator, the rule's regex, the read, the namespace)
    slow: bool = False  # the deadline or the size bound is what ends it: its time is asserted

    def __str__(self) -> str:
        return self.name


def _body(body: bytes | Callable[[Read, str], bytes], **headers: str) -> Callable[[Emulator, str, Read, str], object]:
    def inject(emu: Emulator, match: str, read: Read, ns: str) -> object:
        data = body(read, ns) if callable(body) else body
        return emu.knobs.rewrite(match, headers=headers or None, body=data)

    return inject


ANSWERS = [
    Answer("empty-body", _body(b"")),
    Answer("empty-object", _body(b"{}")),
    Answer("null", _body(b"null")),
    Answer("array", _body(b'[{"kind": "Namespace"}]')),
    Answer("string", _body(b'"ok"')),
    Answer(
        "cut-short",  # announced longer than sent, then the connection closed
        lambda emu, match, read, ns: emu.knobs.rewrite(
            match, headers={"Content-Length": str(len(CUT) + 4096)}, body=lambda: [CUT]
        ),
    ),
    Answer("gzip-garbage", _body(b"\x1f\x8b\x08\x00garbage, not gzip" * 64, **{"Content-Encoding": "gzip"})),
    Answer("hundred-mb", lambda emu, match, read, ns: emu.knobs.rewrite(match, body=_hundred_mb), slow=True),
    Answer("endless-trickle", lambda emu, match, read, ns: emu.knobs.trickle(match, interval=0.2), slow=True),
    Answer("wrong-kind", _body(_wrong_kind)),
    Answer("duplicate-items", _body(_duplicates)),
    Answer("items-without-metadata", _body(_without_metadata)),
]
FAST = [a for a in ANSWERS if not a.slow]
SLOW = [a for a in ANSWERS if a.slow]


def _orphaned_kiali(http: KubeHTTP, ns: str) -> None:
    http.post(
        f"{GROUP}/namespaces/{ns}/kialis",
        {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": _item(ns)["metadata"]},
    )


@dataclass
class Cluster:
    emu: Emulator
    kubeconfig: Path
    read: Read


@pytest.fixture(scope="module", params=READS, ids=str)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster, for one kind of read (a group of the parallel run per value: tests/_scheduling.py)."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "seed003-kiali-orphaned-finalizer")  # istio-system, Terminating
        http = KubeHTTP(emu.url, emu.admin_token)
        for ns in (ACTIVE, SECOND):
            http.post("/api/v1/namespaces", {"metadata": {"name": ns}})
            _orphaned_kiali(http, ns)
        http.delete(f"/api/v1/namespaces/{SECOND}")
        emu.settle()
        kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp("hostile-server") / "kubeconfig")
        yield Cluster(emu, kubeconfig, request.param)


def _environment() -> dict[str, str]:
    """A user's environment with the suite's size bound (no NSSTUCK_, SLACK_ or KUBECONFIG of the tests)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG"))}
    env["NSSTUCK_MAX_ANSWER_MB"] = str(LIMIT_MB)
    return env


def _arguments(cluster: Cluster, *args: str) -> list[str]:
    return [*args, "--kubeconfig", str(cluster.kubeconfig), "-o", "json", "--timeout", f"{DEADLINE:g}"]


def _run(cluster: Cluster, *args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """`nsstuck ARGS` through the console script as a child process (its ResourceWarnings made errors),
    with the suite's size bound: the process, the seconds from its first request to its end (the
    interpreter's own start left out), and its peak RSS in MB."""
    assert SCRIPT is not None, "the nsstuck console script is not installed"
    env = _environment()
    env["PYTHONWARNINGS"] = "error::ResourceWarning"
    figures = cluster.kubeconfig.parent / "figures"
    measured = run_measured(
        [SCRIPT, *_arguments(cluster, *args)], env=env, journal=cluster.emu.journal, figures=figures
    )
    run = measured.run
    _assert_clean(run.stderr, args)
    return run, measured.seconds, measured.peak_mb


def _assert_clean(stderr: str, args: Iterable[str]) -> None:
    assert "Traceback" not in stderr, stderr
    assert_no_resource_warning(stderr, "nsstuck " + " ".join(args))


@dataclass(frozen=True)
class Case:
    """One command of the batch, and the answer its read gets (none: the unbroken cluster)."""

    command: str  # precheck | diagnose
    answer: Answer | None

    @property
    def id(self) -> str:
        return f"{self.command}/{self.answer or 'unbroken'}"

    @property
    def namespace(self) -> str:
        return ACTIVE if self.command == "precheck" else TERMINATING


@dataclass(frozen=True)
class Outcome:
    run: subprocess.CompletedProcess[str]
    peak_mb: float  # the batch process's peak RSS when this case had ended


CASES = [Case(command, None) for command in ("precheck", "diagnose")]
CASES += [Case(command, answer) for command in ("precheck", "diagnose") for answer in FAST]


def _next_line(channel: int, pending: bytearray, timeout: float) -> str:
    """The next line the batch process writes on its standard output, within `timeout` seconds."""
    ends = time.monotonic() + timeout
    while b"\n" not in pending:
        left = ends - time.monotonic()
        ready, _, _ = select.select([channel], [], [], max(left, 0))
        if not ready:
            raise TimeoutError(f"the batch process said nothing for {timeout:g} s")
        chunk = os.read(channel, 4096)
        if not chunk:
            raise EOFError("the batch process ended before its cases did")
        pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line.decode()


@pytest.fixture(scope="module")
def batch(cluster: Cluster) -> dict[str, Outcome]:
    """Every case of CASES on this kind of read, run in one process (tests/hostile/_batch.py), each with its
    rule set on the emulator while it runs and cleared after: the outcome of each, by the case's id."""
    workdir = cluster.kubeconfig.parent
    results, errors = workdir / "batch.jsonl", workdir / "batch.stderr"
    env = {k: v for k, v in _environment().items() if not k.startswith("COVERAGE_")}  # as tests/_measured.py
    read = cluster.read
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [*PYTHON, "-m", "tests.hostile._batch", str(results)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=REPO,
        )
    assert process.stdin is not None
    assert process.stdout is not None
    pending = bytearray()
    try:
        for case in CASES:
            if case.answer is not None:
                case.answer.inject(cluster.emu, f"^GET {re.escape(read.path(case.namespace))}$", read, case.namespace)
            try:
                arguments = _arguments(cluster, case.command, case.namespace)
                line = {"id": case.id, "args": arguments, "env": {"NSSTUCK_MAX_ANSWER_MB": str(LIMIT_MB)}}
                process.stdin.write((json.dumps(line) + "\n").encode())
                process.stdin.flush()
                assert _next_line(process.stdout.fileno(), pending, CASE_SECONDS) == case.id
            finally:
                cluster.emu.knobs.clear()
        process.stdin.close()
        assert process.wait(timeout=CASE_SECONDS) == 0, errors.read_text()[-4000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    _assert_clean(errors.read_text(), ["(the batch process)"])
    outcomes: dict[str, Outcome] = {}
    for text in results.read_text().splitlines():
        record = json.loads(text)
        run = subprocess.CompletedProcess(["nsstuck", record["id"]], record["code"], record["stdout"], record["stderr"])
        outcomes[record["id"]] = Outcome(run, float(record["peak_mb"]))
    assert sorted(outcomes) == sorted(case.id for case in CASES)
    return outcomes


def _ran(batch: dict[str, Outcome], case: Case) -> Outcome:
    outcome = batch[case.id]
    _assert_clean(outcome.run.stderr, [case.command, case.namespace])
    assert outcome.peak_mb < RSS_MB  # the whole process's peak, up to the end of this case
    return outcome


def _forced(findings: list[JSON]) -> bool:
    return any(r["action"] == "force_finalize_namespace" for f in findings for r in f.get("remedies") or ())


def _check(report: JSON, evidence: JSON, read: Read, ns: str, answer: Answer) -> None:
    """Incomplete, the read's gap named, no force-finalize anywhere in the report."""
    gaps = [f"{g['what']}: {g['detail']}" for g in evidence["gaps"]]
    assert evidence["complete"] is False, gaps
    pattern = re.compile(read.gap(ns))
    assert any(pattern.fullmatch(g["what"]) for g in evidence["gaps"]), (read.gap(ns), gaps)
    assert not _forced(report["findings"])
    assert not _forced((report.get("prediction") or {}).get("findings") or [])


def _precheck_report(run: subprocess.CompletedProcess[str], read: Read, answer: Answer) -> None:
    assert run.returncode in (4, 5), (run.returncode, run.stderr)  # never 0: "nothing would hold it"
    report = json.loads(run.stdout)
    assert report["state"] == "active"
    _check(report, report["prediction"], read, ACTIVE, answer)


def _diagnose_report(run: subprocess.CompletedProcess[str], read: Read, answer: Answer) -> None:
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["state"] == "terminating"
    _check(report, report, read, TERMINATING, answer)


def _slow(cluster: Cluster, command: str, answer: Answer, request: pytest.FixtureRequest) -> float:
    """A slow answer, in a console-script process of its own: the seconds it took (the report checked)."""
    read = cluster.read
    ns = ACTIVE if command == "precheck" else TERMINATING
    request.node.user_properties.append(("hostile_combination", f"{command}/{read}/{answer}"))
    answer.inject(cluster.emu, f"^GET {re.escape(read.path(ns))}$", read, ns)
    try:
        run, elapsed, peak_mb = _run(cluster, command, ns)
    finally:
        cluster.emu.knobs.clear()
    (_precheck_report if command == "precheck" else _diagnose_report)(run, read, answer)
    assert peak_mb < RSS_MB
    return elapsed


@pytest.mark.timeout(len(CASES) * 10)  # the first test of a kind of read: its setup runs the whole batch
def test_unbroken_the_cluster_gives_what_the_suite_breaks(cluster: Cluster, batch: dict[str, Outcome]) -> None:
    """Without a rule: precheck says it would get stuck (4, complete), the diagnosis is complete and names
    the Kiali object; what the rules then break is what a report rests on."""
    run = _ran(batch, Case("precheck", None)).run
    assert run.returncode == 4, run.stderr
    prediction = json.loads(run.stdout)["prediction"]
    assert prediction["complete"] is True, prediction["gaps"]
    assert prediction["findings"][0]["cause"] == "orphaned_finalizer"
    run = _ran(batch, Case("diagnose", None)).run
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["complete"] is True, report["gaps"]
    assert report["findings"][0]["cause"] == "orphaned_finalizer"


@pytest.mark.parametrize("answer", FAST, ids=str)
def test_precheck_never_says_nothing_would_hold_it(
    cluster: Cluster, batch: dict[str, Outcome], answer: Answer, request: pytest.FixtureRequest
) -> None:
    request.node.user_properties.append(("hostile_combination", f"precheck/{cluster.read}/{answer}"))
    _precheck_report(_ran(batch, Case("precheck", answer)).run, cluster.read, answer)


@pytest.mark.parametrize("answer", FAST, ids=str)
def test_diagnose_names_the_gap(
    cluster: Cluster, batch: dict[str, Outcome], answer: Answer, request: pytest.FixtureRequest
) -> None:
    request.node.user_properties.append(("hostile_combination", f"diagnose/{cluster.read}/{answer}"))
    _diagnose_report(_ran(batch, Case("diagnose", answer)).run, cluster.read, answer)


@pytest.mark.timing
@pytest.mark.parametrize("answer", SLOW, ids=str)
def test_precheck_ends_by_its_deadline(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> None:
    elapsed = _slow(cluster, "precheck", answer, request)
    assert elapsed < DEADLINE + LATE, elapsed


@pytest.mark.timing
@pytest.mark.parametrize("answer", SLOW, ids=str)
def test_diagnose_ends_by_its_deadline(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> None:
    elapsed = _slow(cluster, "diagnose", answer, request)
    assert elapsed < DEADLINE + LATE, elapsed
