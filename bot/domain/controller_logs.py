"""A controller's own words about the objects it keeps a finalizer on (issue 37 §2). Pure.

What is kept of a log read is never the log: only the lines that name a held object (its name,
`namespace/name` or uid), each redacted (bearer tokens, `key=value` secrets, URLs with user info) and cut
to `LINE_LIMIT` characters, at most `QUOTED` per object, and counts of what the matching lines said.
The reading side (`bot.kube.podlogs`) applies `summarise` to the text as it comes, so the raw log never
reaches a snapshot, a report or the database.

A line is classified as:
- a **refusal**: NamespaceLifecycle refused the controller's own write in the terminating namespace
  (`unable to create new content in namespace NS because it is being terminated`), unless the line is about
  an Event (`Server rejected event ...`): a controller's Events are refused in a terminating namespace too,
  which proves nothing about its cleanup;
- an **error**: any other line saying that something failed;
- neither (the controller logging its work).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# the bounds of one read (the caller's `tailLines` and the bytes it keeps, newest last)
TAIL_LINES = 2000
MAX_BYTES = 1 << 20
# what is quoted per object, and how long each line may be
QUOTED = 5
LINE_LIMIT = 300
# a failure is "repeated" from this many error lines about the object
REPEATED = 2

REFUSAL = re.compile(r"unable to create new content in namespace (\S+?)[\"'\\,:;]* because it is being terminated")
# client-go's event recorder: `Server rejected event '&v1.Event{...}' (will not retry!)`, and events.k8s.io's
EVENT_REFUSAL = re.compile(r"(?i)(server rejected event|unable to (create|record|write) event|events?\.k8s\.io)")
ERROR = re.compile(
    r"(?i)(\berror\b|\berr=|\"error\"|level=error|\bfail(ed|ure|ing|s)?\b|\bunauthori[sz]ed\b|\bforbidden\b|"
    r"\bdenied\b|\brefused\b|\bunable to\b|\bcannot\b|\bcan't\b|\bnot found\b|\btimed? ?out\b|\binvalid\b|\b[45]\d\d\b|"
    r"^E\d{4} )"
)

_REDACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    # an Authorization header's value, or any bearer token
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 [REDACTED]"),
    # user info in a URL: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+(:[^/\s@]*)?@"), r"\1[REDACTED]@"),
    # key=value or key: value where the key names a secret (password=..., "token":"...", client_secret=...)
    (
        re.compile(
            r"(?i)(\"?[\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|"
            r"credential|auth)[\w.-]*\"?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&}\]]+)"
        ),
        r"\1[REDACTED]",
    ),
    # well-known token shapes wherever they stand: Slack, GitHub, AWS access keys, JWTs
    (re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{8,}"), "[REDACTED]"),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"), "[REDACTED]"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), "[REDACTED]"),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), "[REDACTED]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "[REDACTED]"),
)


def redact(text: str) -> str:
    """`text` with anything that looks like a credential replaced by [REDACTED]."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def cut(text: str, limit: int = LINE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_refusal(line: str, namespace: str) -> bool:
    """NamespaceLifecycle refused the controller's own write in `namespace` (not one of its Events)."""
    match = REFUSAL.search(line)
    return bool(match and match.group(1) == namespace and not EVENT_REFUSAL.search(line))


def is_event_refusal(line: str, namespace: str) -> bool:
    match = REFUSAL.search(line)
    return bool(match and match.group(1) == namespace and EVENT_REFUSAL.search(line))


def is_error(line: str) -> bool:
    return bool(ERROR.search(line))


def _word(word: str, line: str) -> bool:
    return bool(word) and re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", line) is not None


@dataclass(frozen=True)
class Subject:
    """A held object whose controller's log is read: how a line may name it."""

    key: str  # the object's display (`kafkausers.kafka.banzaicloud.io/stress-user`), how findings name it
    namespace: str
    name: str
    uid: str = ""

    def named_in(self, line: str) -> bool:
        """The line names it: its uid, `namespace/name`, or its name and its namespace as words (a name
        alone may be another namespace's object of the same name)."""
        if self.uid and self.uid in line:
            return True
        if f"{self.namespace}/{self.name}" in line:
            return True
        return _word(self.name, line) and _word(self.namespace, line)

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "namespace": self.namespace, "name": self.name, "uid": self.uid}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Subject:
        return cls(key=data["key"], namespace=data["namespace"], name=data["name"], uid=data.get("uid", ""))


@dataclass(frozen=True)
class LogTarget:
    """Whose log to read, from when, and for which objects (chosen by the diagnosis: live or unknown
    controllers of blocking objects that stood still past the bound)."""

    kind: str  # Deployment | StatefulSet | DaemonSet
    namespace: str
    name: str
    selector: Mapping[str, Any]  # the workload's spec.selector
    since: datetime  # when the deletion of its objects began
    subjects: tuple[Subject, ...]

    @property
    def workload(self) -> str:
        return f"{self.kind.lower()}/{self.name}"


@dataclass(frozen=True)
class ObjectLines:
    """What one controller's log said about one object since its deletion began."""

    key: str
    matched: int = 0  # lines naming it
    refusals: int = 0  # of which NamespaceLifecycle refused the controller's own write
    event_refusals: int = 0  # of which only its Events were refused (proves nothing)
    errors: int = 0  # of which other errors
    quoted: tuple[str, ...] = ()  # redacted, cut, newest last, at most QUOTED

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "matched": self.matched,
            "refusals": self.refusals,
            "event_refusals": self.event_refusals,
            "errors": self.errors,
            "quoted": list(self.quoted),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectLines:
        return cls(
            key=data["key"],
            matched=int(data.get("matched", 0)),
            refusals=int(data.get("refusals", 0)),
            event_refusals=int(data.get("event_refusals", 0)),
            errors=int(data.get("errors", 0)),
            quoted=tuple(data.get("quoted", ())),
        )


@dataclass(frozen=True)
class ControllerLog:
    """One read of a controller's logs (its pods' containers), kept as what it said about each object.

    `problem` says why nothing could be read (`forbidden: ...`, `timeout: ...`, `disabled ...`,
    `no pod ...`); then `objects` is empty and the finding names the gap."""

    namespace: str
    workload: str  # `deployment/kafka-operator`
    since: datetime
    subjects: tuple[str, ...] = ()  # the objects it was read for (their display)
    pods: tuple[str, ...] = ()  # `pod/container` read
    lines_read: int = 0
    objects: tuple[ObjectLines, ...] = ()
    restarts: tuple[str, ...] = ()  # the pods' restarts, in words (`pod X container c: 12 restarts, last OOMKilled`)
    problem: str = ""
    # where the read was cut (bytes kept from the newest end)
    truncated: bool = False

    @property
    def read(self) -> bool:
        return not self.problem

    def about(self, key: str) -> ObjectLines | None:
        return next((o for o in self.objects if o.key == key), None)

    def command(self, since: datetime) -> str:
        return (
            f"kubectl -n {self.namespace} logs {self.workload} --all-containers --since-time="
            f"{since.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "workload": self.workload,
            "since": self.since.isoformat(),
            "subjects": list(self.subjects),
            "pods": list(self.pods),
            "lines_read": self.lines_read,
            "objects": [o.to_json() for o in self.objects],
            "restarts": list(self.restarts),
            "problem": self.problem,
        }
        if self.truncated:
            out["truncated"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControllerLog:
        return cls(
            namespace=data["namespace"],
            workload=data["workload"],
            since=datetime.fromisoformat(data["since"]),
            subjects=tuple(data.get("subjects", ())),
            pods=tuple(data.get("pods", ())),
            lines_read=int(data.get("lines_read", 0)),
            objects=tuple(ObjectLines.from_json(o) for o in data.get("objects", ())),
            restarts=tuple(data.get("restarts", ())),
            problem=data.get("problem", ""),
            truncated=bool(data.get("truncated", False)),
        )


class Tally:
    """The lines of one controller's log, read one at a time, kept as `ObjectLines` per subject (the raw
    lines are dropped as they are read)."""

    def __init__(self, subjects: Iterable[Subject]) -> None:
        self.subjects = tuple(subjects)
        self.lines_read = 0
        self._counts: dict[str, list[int]] = {s.key: [0, 0, 0, 0] for s in self.subjects}
        self._quoted: dict[str, list[str]] = {s.key: [] for s in self.subjects}

    def add(self, line: str) -> None:
        self.lines_read += 1
        for subject in self.subjects:
            if not subject.named_in(line):
                continue
            counts = self._counts[subject.key]
            counts[0] += 1
            if is_refusal(line, subject.namespace):
                counts[1] += 1
            elif is_event_refusal(line, subject.namespace):
                counts[2] += 1
            elif is_error(line):
                counts[3] += 1
            quoted = self._quoted[subject.key]
            quoted.append(cut(redact(line.rstrip())))
            if len(quoted) > QUOTED:
                del quoted[0]

    def result(self) -> tuple[ObjectLines, ...]:
        return tuple(
            ObjectLines(
                key=s.key,
                matched=self._counts[s.key][0],
                refusals=self._counts[s.key][1],
                event_refusals=self._counts[s.key][2],
                errors=self._counts[s.key][3],
                quoted=tuple(self._quoted[s.key]),
            )
            for s in self.subjects
        )


def merge(parts: Iterable[tuple[ObjectLines, ...]]) -> tuple[ObjectLines, ...]:
    """The per-object results of several containers' logs, summed (the newest quotes kept)."""
    merged: dict[str, ObjectLines] = {}
    for part in parts:
        for lines in part:
            was = merged.get(lines.key)
            if was is None:
                merged[lines.key] = lines
                continue
            merged[lines.key] = ObjectLines(
                key=lines.key,
                matched=was.matched + lines.matched,
                refusals=was.refusals + lines.refusals,
                event_refusals=was.event_refusals + lines.event_refusals,
                errors=was.errors + lines.errors,
                quoted=(*was.quoted, *lines.quoted)[-QUOTED:],
            )
    return tuple(merged.values())
