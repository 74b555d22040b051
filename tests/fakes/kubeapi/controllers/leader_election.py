"""kube-controller-manager's leader election: the `kube-system/kube-controller-manager` Lease.

A real kube-controller-manager renews it every 2 s (`--leader-elect-retry-period`) and holds it for
15 s (`--leader-elect-lease-duration`); nsstuck reads it to tell whether the namespace controller (and
the garbage collector, pvc-protection and pv-protection controllers beside it) is running. Here it is
renewed at every pass in which the emulator's clock has moved, while kube-controller-manager runs
(`stop_kube_controller_manager()` stops the renewals, so the Lease goes stale after 15 s of the
emulator's time). Emulator option `controller_manager_lease` (default True): False, as on control
planes that run without leader election or do not show it, keeps no Lease at all.
"""

from __future__ import annotations

from typing import Any

from ._http import ApiError, client_for
from ._util import now_of, option, rfc3339

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
LEASE_NAME = "kube-controller-manager"
LEASE_DURATION_SECONDS = 15
HOLDER = "control-plane-1_6f1c2a9e-2b7d-4c1e-9a53-0d8e7b4f3a21"


class LeaderElection:
    name = "kube-controller-manager-leader-election"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        if not option(emu, "controller_manager_lease", True):
            return False
        client = client_for(emu)
        now = rfc3339(now_of(emu))
        current = client.get_or_none(f"{LEASE_PATH}/{LEASE_NAME}")
        if current is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": LEASE_NAME, "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": HOLDER,
                    "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                client.post(LEASE_PATH, body)
            except ApiError:
                return False
            return True
        spec = current.get("spec") or {}
        if spec.get("renewTime") == now:
            return False
        current["spec"] = {**spec, "holderIdentity": HOLDER, "renewTime": now}
        try:
            client.put(f"{LEASE_PATH}/{LEASE_NAME}", current)
        except ApiError:
            return False
        return True
