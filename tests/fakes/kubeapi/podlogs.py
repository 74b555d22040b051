"""`GET /api/v1/namespaces/NS/pods/NAME/log`: the container log lines a test stored on an emulated pod.

The kubelet answers this call in a real cluster (the API server proxies it); here the lines come from
`emu.pod_logs.set(namespace, pod, lines, container=...)`, each a `(time, text)` pair. The query
parameters act as they do on the kubelet (`pkg/kubelet/kuberuntime/logs/logs.go`, `ReadLogs`):

- `container`: required when the pod has more than one container (init containers count); an unknown
  one is refused, as `pkg/registry/core/pod/strategy.go`'s `LogLocation` refuses it (400 BadRequest);
- `tailLines`: the last N lines of the log, taken first;
- `sinceTime` (RFC 3339) or `sinceSeconds` (counted back from the clock): then only the lines at or
  after that time;
- `timestamps=true`: each line is prefixed with its time in RFC 3339 with nanoseconds and a space;
- `limitBytes`: the output is cut after that many bytes, counted from the start of what was selected
  (so it keeps the OLDEST lines of the selection, not the newest).

`PodLogOptions` are validated as `ValidatePodLogOptions` does (422 Invalid): `tailLines` at least 0,
`limitBytes` and `sinceSeconds` greater than 0, not both `sinceTime` and `sinceSeconds`. A pod without
a node is refused (`pod NAME does not have a host assigned`). The body is `text/plain`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import ApiError, FieldError, bad_request, invalid


@dataclass(frozen=True)
class LogLine:
    at: datetime
    text: str


class PodLogs:
    """The log lines of each pod's containers, keyed by (namespace, pod, container)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[tuple[str, str, str], list[LogLine]] = {}

    def set(self, namespace: str, pod: str, lines: Iterable[tuple[datetime, str]], *, container: str = "") -> None:
        """Store a container's log (`container` empty: the pod's only container), oldest first."""
        stored = sorted((LogLine(_utc(at), text) for at, text in lines), key=lambda line: line.at)
        with self._lock:
            self._lines[(namespace, pod, container)] = stored

    def lines(self, namespace: str, pod: str, container: str) -> list[LogLine]:
        with self._lock:
            found = self._lines.get((namespace, pod, container))
            if found is None:  # stored without naming the container: the pod's only one
                found = self._lines.get((namespace, pod, ""), [])
            return list(found)


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def rfc3339_nano(at: datetime) -> str:
    """Go's time.RFC3339Nano: the fraction without trailing zeros, none at all when it is zero."""
    at = _utc(at)
    base = at.strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{at.microsecond:06d}000".rstrip("0")
    return f"{base}.{frac}Z" if frac else f"{base}Z"


def _int(query: dict[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def _since_time(raw: str) -> datetime:
    try:
        return datetime.strptime(raw[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        raise bad_request(
            f'parsing time "{raw}" as "2006-01-02T15:04:05Z07:00": cannot parse "{raw}" as "2006"'
        ) from None


def container_of(pod: dict[str, Any], query: dict[str, str]) -> str:
    """The container the request names, checked against the pod as the API server checks it."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    wanted = query.get("container", "")
    if not wanted:
        if len(names) == 1:
            wanted = names[0]
        else:
            choices = " ".join(names)
            message = f"a container name must be specified for pod {name}, choose one of: [{choices}]"
            if init:
                message += f" or one of the init containers: [{' '.join(init)}]"
            raise bad_request(message)
    if wanted not in names and wanted not in init:
        raise bad_request(f"container {wanted} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    return wanted


def render(lines: list[LogLine], query: dict[str, str], now: datetime, pod_name: str) -> bytes:
    """The body the kubelet would send for these lines and this query."""
    tail = _int(query, "tailLines")
    limit = _int(query, "limitBytes")
    since_seconds = _int(query, "sinceSeconds")
    since_raw = query.get("sinceTime", "")
    errs: list[FieldError] = []
    if tail is not None and tail < 0:
        errs.append(FieldError("tailLines", "Invalid value", "must be greater than or equal to 0", str(tail)))
    if limit is not None and limit < 1:
        errs.append(FieldError("limitBytes", "Invalid value", "must be greater than 0", str(limit)))
    if since_raw and since_seconds is not None:
        errs.append(FieldError("", "Forbidden", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    if since_seconds is not None and since_seconds < 1:
        errs.append(FieldError("sinceSeconds", "Invalid value", "must be greater than 0", str(since_seconds)))
    if errs:
        raise invalid("PodLogOptions", "", pod_name, errs)
    if tail is not None:
        lines = lines[max(0, len(lines) - tail) :] if tail else []  # more than there are: all of them
    since: datetime | None = None
    if since_raw:
        since = _since_time(since_raw)
    elif since_seconds is not None:
        since = _utc(now) - timedelta(seconds=since_seconds)
    if since is not None:
        lines = [line for line in lines if line.at >= since]
    stamped = query.get("timestamps", "").lower() in ("true", "1")
    out = b"".join(
        ((rfc3339_nano(line.at) + " ") if stamped else "").encode() + line.text.encode() + b"\n" for line in lines
    )
    return out[:limit] if limit is not None else out


__all__ = ["ApiError", "LogLine", "PodLogs", "container_of", "render", "rfc3339_nano"]
