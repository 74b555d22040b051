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
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
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

DEADLINE = 4.0  # the command's --timeout: a few seconds, which a loaded machine still collects this cluster in
LATE = 1.0  # how much later than its deadline a command may end
LIMIT_MB = 64  # NSSTUCK_MAX_ANSWER_MB in the suite
RSS_MB = 300
ACTIVE = "preview"
TERMINATING = "istio-system"
SECOND = "kiali-two"  # the second Terminating one (tests/hostile/test_hostile_bot.py)
GROUP = "/apis/kiali.io/v1alpha1"
JSON = dict[str, Any]

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


def _run(cluster: Cluster, *args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """`nsstuck ARGS` as a child process, with the suite's size bound: the process, the seconds from its
    first request to its end (the interpreter's own start left out), and its peak RSS in MB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG"))}
    env["NSSTUCK_MAX_ANSWER_MB"] = str(LIMIT_MB)
    figures = cluster.kubeconfig.parent / "figures"
    command = [*PYTHON, "-m", "bot", *args, "--kubeconfig", str(cluster.kubeconfig), "-o", "json"]
    command += ["--timeout", f"{DEADLINE:g}"]
    measured = run_measured(command, env=env, journal=cluster.emu.journal, figures=figures)
    run = measured.run
    assert "Traceback" not in run.stderr, run.stderr
    assert_no_resource_warning(run.stderr, "nsstuck " + " ".join(args))
    return run, measured.seconds, measured.peak_mb


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


def _precheck(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> float:
    read = cluster.read
    request.node.user_properties.append(("hostile_combination", f"precheck/{read}/{answer}"))
    answer.inject(cluster.emu, f"^GET {re.escape(read.path(ACTIVE))}$", read, ACTIVE)
    try:
        run, elapsed, peak_mb = _run(cluster, "precheck", ACTIVE)
    finally:
        cluster.emu.knobs.clear()
    assert run.returncode in (4, 5), (run.returncode, run.stderr)  # never 0: "nothing would hold it"
    report = json.loads(run.stdout)
    assert report["state"] == "active"
    _check(report, report["prediction"], read, ACTIVE, answer)
    assert peak_mb < RSS_MB
    return elapsed


def _diagnose(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> float:
    read = cluster.read
    request.node.user_properties.append(("hostile_combination", f"diagnose/{read}/{answer}"))
    answer.inject(cluster.emu, f"^GET {re.escape(read.path(TERMINATING))}$", read, TERMINATING)
    try:
        run, elapsed, peak_mb = _run(cluster, "diagnose", TERMINATING)
    finally:
        cluster.emu.knobs.clear()
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["state"] == "terminating"
    _check(report, report, read, TERMINATING, answer)
    assert peak_mb < RSS_MB
    return elapsed


def test_unbroken_the_cluster_gives_what_the_suite_breaks(cluster: Cluster) -> None:
    """Without a rule: precheck says it would get stuck (4, complete), the diagnosis is complete and names
    the Kiali object; what the rules then break is what a report rests on."""
    run, _, _ = _run(cluster, "precheck", ACTIVE)
    assert run.returncode == 4, run.stderr
    prediction = json.loads(run.stdout)["prediction"]
    assert prediction["complete"] is True, prediction["gaps"]
    assert prediction["findings"][0]["cause"] == "orphaned_finalizer"
    run, _, _ = _run(cluster, "diagnose", TERMINATING)
    report = json.loads(run.stdout)
    assert report["complete"] is True, report["gaps"]
    assert report["findings"][0]["cause"] == "orphaned_finalizer"


@pytest.mark.parametrize("answer", FAST, ids=str)
def test_precheck_never_says_nothing_would_hold_it(
    cluster: Cluster, answer: Answer, request: pytest.FixtureRequest
) -> None:
    _precheck(cluster, answer, request)


@pytest.mark.parametrize("answer", FAST, ids=str)
def test_diagnose_names_the_gap(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> None:
    _diagnose(cluster, answer, request)


@pytest.mark.timing
@pytest.mark.parametrize("answer", SLOW, ids=str)
def test_precheck_ends_by_its_deadline(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> None:
    elapsed = _precheck(cluster, answer, request)
    assert elapsed < DEADLINE + LATE, elapsed


@pytest.mark.timing
@pytest.mark.parametrize("answer", SLOW, ids=str)
def test_diagnose_ends_by_its_deadline(cluster: Cluster, answer: Answer, request: pytest.FixtureRequest) -> None:
    elapsed = _diagnose(cluster, answer, request)
    assert elapsed < DEADLINE + LATE, elapsed
