"""The PVC- and PV-protection controllers.

- A PersistentVolumeClaim being deleted loses ``kubernetes.io/pvc-protection`` once no scheduled pod
  of its namespace uses it: one that names it in a ``persistentVolumeClaim`` volume, whatever its phase
  or deletion, or whose generic ephemeral volume made it, unless the pod is shut down (deleting with
  grace 0) (kubernetes/kubernetes pkg/controller/volume/pvcprotection/pvc_protection_controller.go,
  ``podUsesPVC``, ``podIsShutDown``). A pod stuck in Terminating on a dead node still counts, which is
  how a lost node pins a PVC.
- A PersistentVolume being deleted loses ``kubernetes.io/pv-protection`` once it is not Bound.
"""

from __future__ import annotations

from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import finalizers_of, get_path, is_deleting, meta

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"


def pod_uses_claim(pod: JSON, claim: str) -> bool:
    if not get_path(pod, "spec", "nodeName"):
        return False
    shut_down = is_deleting(pod) and meta(pod).get("deletionGracePeriodSeconds") == 0
    for volume in get_path(pod, "spec", "volumes") or []:
        if not isinstance(volume, dict):
            continue
        if get_path(volume, "persistentVolumeClaim", "claimName") == claim:
            return True
        ephemeral = isinstance(volume.get("ephemeral"), dict)
        if ephemeral and not shut_down and f"{meta(pod).get('name')}-{volume.get('name')}" == claim:
            return True
    return False


def _drop_finalizer(client: KubeHTTP, path: str, obj: JSON, finalizer: str) -> bool:
    remaining = [f for f in finalizers_of(obj) if f != finalizer]
    try:
        client.patch(
            path,
            {
                "metadata": {
                    "finalizers": remaining or None,
                    "resourceVersion": meta(obj).get("resourceVersion"),
                }
            },
        )
    except ApiError as err:
        if err.not_found or err.conflict:
            return False
        raise
    return True


class PVCProtectionController:
    name = "pvc-protection-controller"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        changed = False
        pods: list[JSON] | None = None
        for pvc in client.list_items("/api/v1/persistentvolumeclaims"):
            if not is_deleting(pvc) or PVC_PROTECTION not in finalizers_of(pvc):
                continue
            if pods is None:
                pods = client.list_items("/api/v1/pods")
            ns = meta(pvc).get("namespace")
            name = str(meta(pvc).get("name"))
            if any(meta(p).get("namespace") == ns and pod_uses_claim(p, name) for p in pods):
                continue
            changed |= _drop_finalizer(
                client, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", pvc, PVC_PROTECTION
            )
        for pv in client.list_items("/api/v1/persistentvolumes"):
            if not is_deleting(pv) or PV_PROTECTION not in finalizers_of(pv):
                continue
            if get_path(pv, "status", "phase") == "Bound":
                continue
            changed |= _drop_finalizer(client, f"/api/v1/persistentvolumes/{meta(pv).get('name')}", pv, PV_PROTECTION)
        return changed
