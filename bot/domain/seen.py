"""A memory of the fix (issue 39 §3): the earlier incidents of the same cluster, cause and blocking object
family, and how often that cause and family came back (contract §2, `seen_before`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.durations import human_seconds

# at most this many earlier incidents in a report, most recent first
SEEN_LIMIT = 3
# the window of the recurrence count
RECURRENCE_DAYS = 30

# what ended an earlier incident
REMEDY = "remedy"
BY_ITSELF = "resolved_by_itself"
STILL_OPEN = "still_open"


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class EndedBy:
    """What ended an earlier incident: an executed remedy (with its audit entry), nothing nsstuck did, or
    nothing yet."""

    what: str  # remedy | resolved_by_itself | still_open
    action: str | None = None
    request: int | None = None
    audit_seq: int | None = None
    audit_hash: str | None = None  # the entry's hash, its first 12 hex digits

    @property
    def said(self) -> str:
        if self.what == REMEDY:
            audit = f", audit entry #{self.audit_seq} ({self.audit_hash})" if self.audit_seq is not None else ""
            return f"{self.action} executed (request #{self.request}{audit})"
        return "resolved by itself" if self.what == BY_ITSELF else "still open"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "said": self.said}
        if self.what == REMEDY:
            out.update(action=self.action, request=self.request, audit={"seq": self.audit_seq, "hash": self.audit_hash})
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EndedBy:
        audit = data.get("audit") or {}
        return cls(
            what=str(data["what"]),
            action=data.get("action"),
            request=data.get("request"),
            audit_seq=audit.get("seq"),
            audit_hash=audit.get("hash"),
        )


@dataclass(frozen=True)
class Thread:
    channel: str
    ts: str
    permalink: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "ts": self.ts, "permalink": self.permalink}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Thread:
        return cls(channel=str(data["channel"]), ts=str(data["ts"]), permalink=data.get("permalink"))


@dataclass(frozen=True)
class SeenBefore:
    """One earlier incident of the same cluster, cause and family."""

    incident: int
    started_at: datetime
    stuck_for_seconds: int
    ended_by: EndedBy
    thread: Thread | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "incident": self.incident,
            "started_at": _iso(self.started_at),
            "stuck_for_seconds": self.stuck_for_seconds,
            "ended_by": self.ended_by.to_json(),
            "thread": self.thread.to_json() if self.thread is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SeenBefore:
        thread = data.get("thread")
        return cls(
            incident=int(data["incident"]),
            started_at=datetime.fromisoformat(data["started_at"]),
            stuck_for_seconds=int(data["stuck_for_seconds"]),
            ended_by=EndedBy.from_json(data["ended_by"]),
            thread=Thread.from_json(thread) if isinstance(thread, dict) else None,
        )

    @property
    def said(self) -> str:
        return f"{_iso(self.started_at)}: stuck {human_seconds(self.stuck_for_seconds)}, {self.ended_by.said}"


@dataclass(frozen=True)
class Recurrence:
    """The cause and family came back `incidents` times in the last `days` days (this incident included),
    more than the threshold: the lasting fix the cause calls for."""

    incidents: int
    days: int
    family: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"incidents": self.incidents, "days": self.days, "family": self.family, "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recurrence:
        return cls(
            incidents=int(data["incidents"]), days=int(data["days"]), family=str(data["family"]), text=str(data["text"])
        )


# the lasting fix each cause calls for, after "<family> has failed N times this month: "
_LASTING = {
    "apiservice_unavailable": (
        "its APIService blocks every namespace deletion while it is down; make its backend highly available "
        "or remove the APIService"
    ),
    "webhook_blocks_delete": (
        "it fails closed and blocks deletions while its backend is down; make the backend highly available, "
        "set failurePolicy: Ignore, or exclude namespace deletions from it"
    ),
    "orphaned_finalizer": (
        "objects keep this finalizer after its controller is gone; uninstall in order (delete the objects "
        "before the controller) or keep the controller installed"
    ),
    "namespace_finalizer": (
        "namespaces keep this finalizer after whatever removes it is gone; fix or uninstall what sets it"
    ),
    "cleanup_failing": (
        "its controller's cleanup keeps failing; fix what the failure names (credentials, the external API)"
    ),
    "finalizer_deadlock": (
        "its cleanup must create objects in the terminating namespace; delete its objects before the namespace"
    ),
    "pod_on_lost_node": (
        "nodes of this pool go away with pods on them; drain nodes before removing them, or let the node "
        "lifecycle controller clean up lost nodes"
    ),
    "pod_not_terminating": (
        "the kubelet cannot finish pods there; look at the volume backends and the container runtime of these nodes"
    ),
    "discovery_failure": "discovery of this group version keeps failing; fix or remove its registration",
    "aggregated_discovery_defect": "this is kubernetes/kubernetes#119662; upgrade the control plane to a fixed release",
}


def recurrence_text(cause: str, family: str, incidents: int) -> str:
    """`metrics-server has failed 4 times this month: ...` in words, for a cause and family."""
    lasting = _LASTING.get(cause, "look for the lasting fix of what keeps failing")
    return f"{family_said(family)} has failed {incidents} times in {RECURRENCE_DAYS} days: {lasting}"


def family_said(family: str) -> str:
    """A family (`apiservice:v1beta1.metrics.k8s.io`) as words (`APIService v1beta1.metrics.k8s.io`)."""
    kind, _, value = family.partition(":")
    return f"{_KIND_SAID.get(kind, kind)} {value}"


_KIND_SAID = {
    "apiservice": "APIService",
    "webhook": "webhook configuration",
    "finalizer": "finalizer",
    "nodepool": "node pool",
    "node": "node",
    "groupversion": "group version",
}
