"""Load a corpus case (tests/corpus/cases/*.yaml) into the Kubernetes emulator, and score a diagnosis of it.

A case posts the state of a stuck namespace as a public thread showed it. The loader writes that state
through the emulator's HTTP API as the admin identity, the way the objects came to be: every object is
created (its posted status written through `/status`), then each object with a `deletionTimestamp` is
deleted at that moment of the FakeClock (a pod `terminationGracePeriodSeconds` earlier, with that grace,
so that its deletionTimestamp lands where the thread shows it), the namespace's `spec.finalizers` are
set through `/finalize` when they differ from `[kubernetes]`, its posted conditions are written through
`/status`, and webhook configurations are created last (a fail-closed webhook would otherwise refuse
the loader's own writes). The controllers are never run, so nothing changes what the case posts; the
clock is then set to the case's `observed_at`.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bot.domain.findings import Action, Cause, ControllerState, Diagnosis
from tests.fakes.kubeapi.controllers._http import KubeHTTP

CASES = Path(__file__).resolve().parent / "cases"

# where an APIService or a webhook is the cause, force-finalize must never come first
NO_FORCE_FIRST = {
    Cause.APISERVICE_UNAVAILABLE.value,
    Cause.AGGREGATED_DISCOVERY_DEFECT.value,
    Cause.WEBHOOK_BLOCKS_DELETE.value,
}
# causes that issue 37 adds to contract §2 and no rule produces yet: a case may expect one (it counts as a miss)
PENDING_CAUSES = {"cleanup_failing"}
_WEBHOOK_KINDS = {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
_FIRST_KINDS = ["CustomResourceDefinition", "Node", "APIService", "Namespace"]
_DROPPED_META = ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "uid", "creationTimestamp")


class CaseError(ValueError):
    """A case file that does not say what a case must say."""


@dataclass(frozen=True)
class ExpectedObject:
    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class PodLog:
    """A container's log lines as the thread quotes them, served by the emulator's pods/log."""

    namespace: str
    pod: str
    container: str
    lines: tuple[tuple[datetime, str], ...]


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    summary: str
    resolution: str
    namespace: str
    observed_at: datetime
    cluster: tuple[dict[str, Any], ...]
    invented: tuple[str, ...]
    cause: str
    blocking: tuple[ExpectedObject, ...]
    kubernetes_version: str | None = None
    emulator: dict[str, Any] = field(default_factory=dict)
    logs: tuple[PodLog, ...] = ()


def _time(text: Any, where: str) -> datetime:
    try:
        return datetime.strptime(str(text)[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError as err:
        raise CaseError(f"{where}: not an RFC 3339 time: {text!r}") from err


def load_case(path: Path) -> Case:
    data = yaml.safe_load(path.read_text())
    where = path.name
    if not isinstance(data, dict):
        raise CaseError(f"{where}: not a mapping")
    for key in ("source", "summary", "resolution", "namespace", "observed_at", "cluster", "invented", "expected"):
        if key not in data:
            raise CaseError(f"{where}: missing {key!r}")
    if not str(data["source"]).startswith("https://github.com/"):
        raise CaseError(f"{where}: source must be a https://github.com/ link")
    expected = data["expected"] or {}
    cause = str(expected.get("cause", ""))
    if cause not in {c.value for c in Cause} | PENDING_CAUSES:
        raise CaseError(f"{where}: unknown cause {cause!r}")
    blocking = tuple(
        ExpectedObject(kind=str(o["kind"]), name=str(o["name"]), namespace=o.get("namespace"))
        for o in expected.get("blocking") or ()
    )
    if not blocking:
        raise CaseError(f"{where}: expected.blocking names no object")
    cluster = tuple(data["cluster"] or ())
    namespaces = [o for o in cluster if o.get("kind") == "Namespace" and o["metadata"]["name"] == data["namespace"]]
    if len(namespaces) != 1 or not namespaces[0]["metadata"].get("deletionTimestamp"):
        raise CaseError(f"{where}: the cluster must hold namespace {data['namespace']!r} with a deletionTimestamp")
    logs = tuple(_pod_log(entry, cluster, where) for entry in data.get("logs") or ())
    return Case(
        id=path.stem,
        source=str(data["source"]),
        summary=str(data["summary"]).strip(),
        resolution=str(data["resolution"]).strip(),
        namespace=str(data["namespace"]),
        observed_at=_time(data["observed_at"], f"{where} observed_at"),
        cluster=cluster,
        invented=tuple(str(i) for i in data["invented"] or ()),
        cause=cause,
        blocking=blocking,
        kubernetes_version=str(data["kubernetes_version"]) if data.get("kubernetes_version") else None,
        emulator=dict(data.get("emulator") or {}),
        logs=logs,
    )


def _pod_log(entry: dict[str, Any], cluster: tuple[dict[str, Any], ...], where: str) -> PodLog:
    """`logs:` items: {namespace, pod, container?, lines: [[time, text], ...]}, for a pod of the cluster."""
    namespace, pod = str(entry["namespace"]), str(entry["pod"])
    if not any(
        o.get("kind") == "Pod" and o["metadata"]["name"] == pod and o["metadata"].get("namespace") == namespace
        for o in cluster
    ):
        raise CaseError(f"{where}: logs name pod {namespace}/{pod}, which the cluster does not hold")
    lines = tuple((_time(at, f"{where} logs of {pod}"), str(text)) for at, text in entry.get("lines") or ())
    if not lines:
        raise CaseError(f"{where}: logs of {pod} hold no line")
    return PodLog(namespace=namespace, pod=pod, container=str(entry.get("container") or ""), lines=lines)


def all_cases() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


# --------------------------------------------------------------------------------------------------
# Loading into the emulator


class _Resources:
    """kind -> (plural, namespaced) per apiVersion, from the emulator's discovery."""

    def __init__(self, http: KubeHTTP) -> None:
        self.http = http
        self.cache: dict[str, dict[str, tuple[str, bool]]] = {}

    def of(self, api_version: str, kind: str) -> tuple[str, bool]:
        if api_version not in self.cache:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.http.get(path)
            self.cache[api_version] = {
                r["kind"]: (r["name"], bool(r["namespaced"])) for r in listing["resources"] if "/" not in r["name"]
            }
        try:
            return self.cache[api_version][kind]
        except KeyError:
            raise CaseError(f"the emulator serves no {kind} in {api_version}") from None

    def path(self, obj: dict[str, Any], *, named: bool = False) -> str:
        api_version = obj["apiVersion"]
        plural, namespaced = self.of(api_version, obj["kind"])
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            prefix += f"/namespaces/{urllib.parse.quote(obj['metadata']['namespace'])}"
        prefix += f"/{plural}"
        if named:
            prefix += f"/{urllib.parse.quote(obj['metadata']['name'])}"
        return prefix


def _order(obj: dict[str, Any]) -> int:
    kind = obj["kind"]
    if kind in _WEBHOOK_KINDS:
        return len(_FIRST_KINDS) + 1
    return _FIRST_KINDS.index(kind) if kind in _FIRST_KINDS else len(_FIRST_KINDS)


def _creatable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in _DROPPED_META}
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = meta
    if obj["kind"] == "Namespace":
        body.pop("spec", None)  # the API server sets spec.finalizers: [kubernetes]; /finalize sets the rest
    return body


def load(emu: Any, case: Case) -> None:
    """Write the case's cluster state into a started emulator whose controllers do not run."""
    http = KubeHTTP(emu.url, emu.admin_token)
    try:
        _load(emu, http, case)
    finally:
        http.close_all()


def _load(emu: Any, http: KubeHTTP, case: Case) -> None:
    resources = _Resources(http)
    objects = sorted(case.cluster, key=_order)
    deleting = [o for o in objects if o["metadata"].get("deletionTimestamp")]
    start = min(_time(o["metadata"]["deletionTimestamp"], "deletionTimestamp") for o in deleting)
    emu.clock.set(start - timedelta(hours=1))

    later = [o for o in objects if o["kind"] in _WEBHOOK_KINDS]
    for obj in objects:
        if obj in later:
            continue
        if obj["kind"] == "Namespace" and http.get_or_none(f"/api/v1/namespaces/{obj['metadata']['name']}"):
            continue  # kube-system, default: already there
        if obj["kind"] == "APIService" and http.get_or_none(resources.path(obj, named=True)):
            http.delete(resources.path(obj, named=True))  # the emulator's own, replaced by the case's
        created = http.post(resources.path(obj), _creatable(obj))
        if obj.get("status") and obj["kind"] not in ("Namespace", "CustomResourceDefinition"):
            http.put(f"{resources.path(obj, named=True)}/status", {**created, "status": obj["status"]})
        if obj["kind"] == "CustomResourceDefinition":
            resources.cache.clear()  # its types are served now

    for obj in sorted(deleting, key=lambda o: (_time(o["metadata"]["deletionTimestamp"], "x"), _order(o))):
        when = _time(obj["metadata"]["deletionTimestamp"], f"{obj['kind']} deletionTimestamp")
        options: dict[str, Any] | None = None
        if obj["kind"] == "Pod":
            grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            when -= timedelta(seconds=grace)
            options = {"gracePeriodSeconds": grace}
        emu.clock.set(when)
        http.delete(resources.path(obj, named=True), options)

    for obj in objects:
        if obj["kind"] != "Namespace" or not obj["metadata"].get("deletionTimestamp"):
            continue
        path = f"/api/v1/namespaces/{urllib.parse.quote(obj['metadata']['name'])}"
        spec_finalizers = list((obj.get("spec") or {}).get("finalizers") or [])
        if spec_finalizers != ["kubernetes"]:
            current = http.get(path)
            http.put(f"{path}/finalize", {**current, "spec": {"finalizers": spec_finalizers}})
        if (obj.get("status") or {}).get("conditions"):
            current = http.get(path)
            http.put(f"{path}/status", {**current, "status": {**current["status"], **obj["status"]}})

    for obj in later:
        http.post(resources.path(obj), _creatable(obj))
    for log in case.logs:
        emu.pod_logs.set(log.namespace, log.pod, log.lines, container=log.container)
    emu.clock.set(case.observed_at)
    _check(http, resources, case)


def _check(http: KubeHTTP, resources: _Resources, case: Case) -> None:
    """What the emulator now holds is what the case posts: deletion times, finalizers, conditions."""
    for obj in case.cluster:
        if obj["kind"] == "Namespace" and not obj["metadata"].get("deletionTimestamp"):
            continue
        stored = http.get_or_none(resources.path(obj, named=True))
        where = f"{case.id}: {obj['kind']} {obj['metadata']['name']}"
        if stored is None:
            raise CaseError(f"{where}: gone once deleted (an object without finalizers cannot stay deleting)")
        posted_ts = obj["metadata"].get("deletionTimestamp")
        stored_ts = stored["metadata"].get("deletionTimestamp")
        if (posted_ts and _time(posted_ts, where) != _time(stored_ts, where)) or bool(posted_ts) != bool(stored_ts):
            raise CaseError(f"{where}: deletionTimestamp {stored_ts} instead of {posted_ts}")
        posted_fin = sorted(obj["metadata"].get("finalizers") or [])
        stored_fin = sorted(stored["metadata"].get("finalizers") or [])
        if posted_fin != stored_fin:
            raise CaseError(f"{where}: finalizers {stored_fin} instead of {posted_fin}")
        if obj["kind"] == "Namespace":
            spec = (obj.get("spec") or {}).get("finalizers") or []
            if (stored.get("spec") or {}).get("finalizers", []) != spec:
                raise CaseError(f"{where}: spec.finalizers {stored.get('spec')} instead of {spec}")
            posted_cond = [(c["type"], c["status"], c.get("message")) for c in obj["status"].get("conditions") or []]
            stored_cond = [(c["type"], c["status"], c.get("message")) for c in stored["status"].get("conditions") or []]
            if posted_cond != stored_cond:
                raise CaseError(f"{where}: conditions {stored_cond} instead of {posted_cond}")


# --------------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True)
class Score:
    case: str
    expected: str
    got: str
    cause_ok: bool
    objects_ok: bool
    missing: tuple[str, ...]
    force_first: bool  # force-finalize ranked first
    force_forbidden: bool  # ... where it must not be (APIService/webhook cause, or incomplete evidence)
    first_remedy: str
    # issue 37: the finalizer's removal first where its controller runs; force-finalize offered at all
    # (at any rank) on incomplete evidence
    remove_first_while_alive: bool = False
    force_on_incomplete: bool = False

    @property
    def ok(self) -> bool:
        return self.cause_ok and self.objects_ok and not (self.force_first and self.force_forbidden)

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause_ok, "objects": self.objects_ok, "got": self.got}


def score(case: Case, diagnosis: Diagnosis) -> Score:
    blocking = [f for f in diagnosis.findings if f.blocking]
    # the first blocking finding's cause; where none blocks, the report's (content_deleting: still being
    # deleted, slow rather than stuck); none without findings
    got = (blocking[0].cause.value if blocking else diagnosis.cause.value) if diagnosis.cause else "none"
    named = {(o.kind, o.name, o.namespace) for f in diagnosis.findings for o in f.objects}
    missing = tuple(
        str(e)
        for e in case.blocking
        if not any(k == e.kind and n == e.name and (e.namespace is None or ns == e.namespace) for k, n, ns in named)
    )
    first = diagnosis.first_remedy
    force_first = first is not None and first.action == Action.FORCE_FINALIZE_NAMESPACE
    with_remedy = next((f for f in diagnosis.findings if f.remedies), None)
    alive = (
        with_remedy is not None
        and with_remedy.controller is not None
        and (with_remedy.controller.state is ControllerState.ALIVE)
    )
    offered = {r.action for f in diagnosis.findings for r in f.remedies}
    return Score(
        case=case.id,
        expected=case.cause,
        got=got,
        cause_ok=got == case.cause,
        objects_ok=not missing,
        missing=missing,
        force_first=force_first,
        force_forbidden=case.cause in NO_FORCE_FIRST or not diagnosis.complete,
        first_remedy=first.action.value if first else "none",
        remove_first_while_alive=alive and first is not None and first.action == Action.REMOVE_FINALIZER,
        force_on_incomplete=not diagnosis.complete and Action.FORCE_FINALIZE_NAMESPACE in offered,
    )
