"""events.k8s.io/v1: the same Events as core v1, under other field names (one storage, two views).

kube-apiserver stores Events once and serves them in both groups, converting on the way in and out
(pkg/apis/events/v1/conversion.go: `regarding` is `involvedObject`, `note` is `message`,
`reportingController` is `reportingComponent`, and the core fields without a new name keep theirs
under `deprecated...`). The emulator does the same: events.k8s.io reads and writes go to the core
store through these two functions.
"""

from __future__ import annotations

from typing import Any

GROUP = "events.k8s.io"
API_VERSION = "events.k8s.io/v1"

# core name -> events.k8s.io name, for the fields that are renamed
_RENAMED = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)
_KEPT = ("metadata", "eventTime", "series", "action", "reason", "type", "related", "reportingInstance")


def to_events_v1(core: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Event"}
    out.update({k: core[k] for k in _KEPT if k in core and core[k] not in (None, "")})
    out.update({new: core[old] for old, new in _RENAMED if core.get(old) not in (None, "", 0)})
    return out


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    out.update({k: event[k] for k in _KEPT if k in event})
    out.update({old: event[new] for old, new in _RENAMED if new in event})
    return out
