"""Events as the rules read them, from either API: `events.k8s.io/v1` or the core `v1` Event.

The two carry the same facts under different names (`regarding`/`involvedObject`, `note`/`message`,
`reportingController`/`source.component`, `series.lastObservedTime`/`lastTimestamp`). `EventView`
names them once. Events expire (an hour by default, the API server's `--event-ttl`), and nothing can
be created in a terminating namespace, so an Event's absence proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.domain.refs import KubeObject, meta, parse_time


@dataclass(frozen=True)
class EventView:
    namespace: str
    reason: str
    message: str
    type: str  # Normal, Warning
    # what the event is about
    kind: str
    name: str
    uid: str
    # who reported it: the controller's name (`reportingController`, or the core source component)
    reporter: str
    # when it was last seen; None when the event carries no time at all
    last_seen: datetime | None
    count: int

    def about(self, obj: KubeObject) -> bool:
        """Whether the event is about this object (by uid when both have one, else by kind and name)."""
        m = meta(obj)
        uid = str(m.get("uid") or "")
        if self.uid and uid:
            return self.uid == uid
        return self.kind == str(obj.get("kind") or "") and self.name == str(m.get("name") or "")


def _time(*values: object) -> datetime | None:
    for value in values:
        if isinstance(value, str) and value:
            parsed = parse_time(value)
            if parsed is not None:
                return parsed
    return None


def view(event: KubeObject) -> EventView:
    """One Event, of either API, as the rules read it."""
    m = meta(event)
    raw_series = event.get("series")
    series: dict[str, object] = raw_series if isinstance(raw_series, dict) else {}
    if str(event.get("apiVersion", "")).startswith("events.k8s.io/"):
        about = event.get("regarding") or {}
        message = event.get("note")
        reporter = event.get("reportingController") or (event.get("deprecatedSource") or {}).get("component")
        seen = _time(
            series.get("lastObservedTime"),
            event.get("eventTime"),
            event.get("deprecatedLastTimestamp"),
            m.get("creationTimestamp"),
        )
        count = series.get("count") or event.get("deprecatedCount") or 1
    else:
        about = event.get("involvedObject") or {}
        message = event.get("message")
        reporter = event.get("reportingComponent") or (event.get("source") or {}).get("component")
        seen = _time(
            series.get("lastObservedTime"),
            event.get("lastTimestamp"),
            event.get("eventTime"),
            event.get("firstTimestamp"),
            m.get("creationTimestamp"),
        )
        count = series.get("count") or event.get("count") or 1
    about = about if isinstance(about, dict) else {}
    return EventView(
        namespace=str(m.get("namespace") or ""),
        reason=str(event.get("reason") or ""),
        message=str(message or ""),
        type=str(event.get("type") or ""),
        kind=str(about.get("kind") or ""),
        name=str(about.get("name") or ""),
        uid=str(about.get("uid") or ""),
        reporter=str(reporter or ""),
        last_seen=seen,
        count=int(count) if isinstance(count, int) else 1,
    )


def newest_first(events: list[KubeObject]) -> list[KubeObject]:
    """Events ordered by when they were last seen, newest first (those without a time last)."""
    stamped = [(view(e).last_seen, i, e) for i, e in enumerate(events)]
    stamped.sort(key=lambda t: (t[0] is None, -(t[0].timestamp() if t[0] else 0.0), t[1]))
    return [e for _, _, e in stamped]
