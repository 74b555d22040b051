"""Leader-election Leases as evidence that a controller runs: fresh, stale, absent, or not seen.

A controller that elects a leader renews its Lease every few seconds while it runs; a Lease renewed
within its `leaseDurationSeconds` shows a live holder, one that is not shows none. No Lease proves
nothing by itself (leader election off, a managed control plane that hides its components), and a
Lease list that failed shows nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from bot.diagnosis.reading import human_duration
from bot.domain.refs import parse_time
from bot.domain.snapshot import NamespaceSnapshot

CONTROLLER_MANAGER = ("kube-system", "kube-controller-manager")
# kube-controller-manager's controllers that remove finalizers or delete namespaces
CONTROLLER_MANAGER_OWNS = ("namespace", "garbage collector", "pvc-protection", "pv-protection")


class LeaseState(StrEnum):
    FRESH = "fresh"  # renewed within its duration: its holder runs
    STALE = "stale"  # not renewed within its duration: no holder runs
    ABSENT = "absent"  # the Lease list was read and has no such Lease
    NOT_SEEN = "not seen"  # the Lease list could not be read


@dataclass(frozen=True)
class LeaseReading:
    state: LeaseState
    evidence: str  # one sentence naming the Lease and what it shows


def read_lease(snapshot: NamespaceSnapshot, namespace: str, name: str, now: datetime) -> LeaseReading:
    where = f"Lease {namespace}/{name}"
    if any("leases" in gap.what for gap in snapshot.gaps):
        return LeaseReading(LeaseState.NOT_SEEN, f"the cluster's Leases could not be read, so {where} was not seen")
    lease = snapshot.lease(namespace, name)
    if lease is None:
        return LeaseReading(LeaseState.ABSENT, f"there is no {where}")
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    holder = spec.get("holderIdentity") or "nobody"
    if renewed is None or not isinstance(duration, int):
        return LeaseReading(LeaseState.STALE, f"{where} (held by {holder}) has no renewal time or duration")
    ago = now - renewed
    if ago <= timedelta(seconds=duration):
        return LeaseReading(
            LeaseState.FRESH,
            f"{where} was renewed {human_duration(max(ago, timedelta(0)))} ago by {holder} "
            f"(it lapses after {duration}s)",
        )
    return LeaseReading(
        LeaseState.STALE,
        f"{where} was last renewed {human_duration(ago)} ago by {holder}, longer than its {duration}s duration",
    )


def controller_manager(snapshot: NamespaceSnapshot, now: datetime) -> LeaseReading:
    """kube-controller-manager's Lease: whether its namespace, garbage-collector and protection
    controllers run."""
    return read_lease(snapshot, *CONTROLLER_MANAGER, now)
