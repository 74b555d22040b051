"""Reading a controller's own words (issue 37 §2): the recent log lines of its pods that name the objects it
keeps a finalizer on, bounded in every way, and kept only as quoted, redacted lines and counts.

For each `LogTarget` (a workload chosen by the diagnosis, the objects, since when): its pods are listed by
the workload's selector (at most `PODS` of them, ready first) and each container's log is read with
`sinceTime` (the deletion's start), `tailLines` (`TAIL_LINES`), the call's deadline, and a hard cap on the
bytes kept (`MAX_BYTES`) that keeps the newest (`Transport.get_tail`; the API's `limitBytes` would keep
the oldest). The text goes line by line into a `Tally`, which keeps only what names the objects, redacted;
the log itself is dropped here. A refused read (403: the role lacks `get pods/log`) is said in the
ControllerLog and is a gap; a cluster configured with `evidence.controller_logs: false` is not read, and
the ControllerLog says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.domain.controller_logs import MAX_BYTES, TAIL_LINES, ControllerLog, LogTarget, Tally, merge
from bot.domain.findings import Gap
from bot.domain.refs import KubeObject, name_of
from bot.kube.transport import CallError, CallKind, Transport

log = logging.getLogger(__name__)

PODS = 2  # pods read per workload (ready ones first)
CONTAINERS = 3  # containers read per pod
WORKERS = 8

DISABLED = "not read: evidence.controller_logs is false for this cluster"


@dataclass(frozen=True)
class LogReading:
    logs: tuple[ControllerLog, ...]
    gaps: tuple[Gap, ...]


def selector_text(selector: Any) -> str | None:
    """A LabelSelector as the `labelSelector` query parameter (None: it selects nothing we can say)."""
    if not isinstance(selector, dict):
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), ",".join(expr.get("values") or ())
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None


def _ready(pod: KubeObject) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    )


def _restarts(pod: KubeObject) -> list[str]:
    out = []
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        count = status.get("restartCount") or 0
        if isinstance(count, int) and count > 0:
            last = ((status.get("lastState") or {}).get("terminated") or {}).get("reason")
            out.append(
                f"pod {name_of(pod)} container {status.get('name')}: {count} restarts"
                + (f", last ended {last}" if last else "")
            )
    return out


def _reason(error: CallError) -> str:
    if error.status == 403:
        return "forbidden"
    if error.kind is CallKind.TIMEOUT:
        return "timeout"
    return "unavailable" if error.kind is CallKind.CONNECTION else "error"


def read_controller_logs(
    transport: Transport,
    targets: Sequence[LogTarget],
    *,
    deadline: float,
    call_timeout: float,
    enabled: bool = True,
) -> LogReading:
    """Every target's log, read in parallel within `deadline` (time.monotonic())."""
    if not targets:
        return LogReading((), ())
    if not enabled:
        return LogReading(
            tuple(
                ControllerLog(
                    t.namespace, t.workload, t.since, subjects=tuple(s.key for s in t.subjects), problem=DISABLED
                )
                for t in targets
            ),
            (),
        )
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(targets)), thread_name_prefix="podlogs") as pool:
        results = list(pool.map(lambda t: _read_one(transport, t, deadline, call_timeout), targets))
    logs = tuple(r[0] for r in results)
    gaps = tuple(g for r in results for g in r[1])
    return LogReading(logs, gaps)


def _read_one(
    transport: Transport, target: LogTarget, deadline: float, call_timeout: float
) -> tuple[ControllerLog, list[Gap]]:
    subjects = tuple(s.key for s in target.subjects)
    what = f"read logs of {target.workload} in {target.namespace}"

    def failed(error: CallError, step: str) -> tuple[ControllerLog, list[Gap]]:
        reason = _reason(error)
        message = f"{reason}: {step}: {error.message[:300]}"
        return (
            ControllerLog(target.namespace, target.workload, target.since, subjects=subjects, problem=message),
            [Gap(what=what, reason=reason, detail=f"{step}: {error.message[:300]}")],
        )

    selector = selector_text(target.selector)
    if selector is None:
        problem = "no pod selector on the workload"
        return ControllerLog(target.namespace, target.workload, target.since, subjects=subjects, problem=problem), []
    timeout = max(0.5, min(call_timeout, deadline - time.monotonic()))
    try:
        doc = transport.get(
            f"/api/v1/namespaces/{quote(target.namespace)}/pods",
            {"labelSelector": selector, "limit": "50"},
            timeout=timeout,
            deadline=deadline,
            kind="PodList",
        )
    except CallError as e:
        return failed(e, f"list pods {selector}")
    pods = [p for p in doc.get("items") or () if isinstance(p, dict) and (p.get("spec") or {}).get("nodeName")]
    pods.sort(key=lambda p: (not _ready(p), name_of(p)))
    pods = pods[:PODS]
    if not pods:
        problem = f"no pod of {target.workload} is scheduled to a node"
        return ControllerLog(target.namespace, target.workload, target.since, subjects=subjects, problem=problem), []
    since = target.since.strftime("%Y-%m-%dT%H:%M:%SZ")
    parts = []
    read: list[str] = []
    lines_read = 0
    truncated = False
    restarts: list[str] = []
    for pod in pods:
        restarts.extend(_restarts(pod))
        containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or ()][:CONTAINERS]
        for container in containers:
            timeout = max(0.5, min(call_timeout, deadline - time.monotonic()))
            path = f"/api/v1/namespaces/{quote(target.namespace)}/pods/{quote(name_of(pod))}/log"
            query = {"container": container, "sinceTime": since, "tailLines": str(TAIL_LINES)}
            try:
                answer = transport.get_tail(path, query, keep=MAX_BYTES, timeout=timeout, deadline=deadline)
            except CallError as e:
                return failed(e, f"get pods/{name_of(pod)}/log (container {container})")
            text = answer.body.decode("utf-8", "replace")
            lines = text.splitlines()
            if answer.cut and lines:
                lines = lines[1:]  # the first kept line may be cut in its middle
            tally = Tally(target.subjects)
            for line in lines:
                tally.add(line)
            lines_read += tally.lines_read
            truncated = truncated or answer.cut
            parts.append(tally.result())
            read.append(f"{name_of(pod)}/{container}")
            del text, lines  # the raw log goes no further
    return (
        ControllerLog(
            target.namespace,
            target.workload,
            target.since,
            subjects=subjects,
            pods=tuple(read),
            lines_read=lines_read,
            objects=merge(parts),
            restarts=tuple(restarts),
            truncated=truncated,
        ),
        [],
    )
