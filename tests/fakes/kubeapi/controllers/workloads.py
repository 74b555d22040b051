"""Deployment and ReplicaSet controllers, reduced to what a stuck-namespace diagnosis looks at.

- Deployment: one ReplicaSet ``<deployment>-<pod-template-hash>`` owned by it (controller,
  blockOwnerDeletion), replicas copied over; status replicas/ready/available/updated,
  observedGeneration and the Available and Progressing conditions.
- ReplicaSet: creates pods ``<replicaset>-<5 chars>`` (names derived deterministically from the
  ReplicaSet UID and a counter) until the non-deleting pods it owns equal ``spec.replicas``, deletes
  surplus ones, and reports status. Creation fails (403) in a terminating namespace, as on a real
  cluster; that is not retried more than once per pass.

There is no scheduler: a pod template that sets ``spec.nodeName`` is bound to that node; other pods
stay Pending.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import condition, get_path, is_deleting, meta, now_of, rfc3339

_ALPHANUM = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHANUM[b % len(_ALPHANUM)] for b in digest[:length])


def pod_template_hash(template: JSON) -> str:
    return _suffix(json.dumps(template, sort_keys=True), 10)


def _owner_ref(obj: JSON, kind: str, api_version: str) -> JSON:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta(obj).get("name"),
        "uid": meta(obj).get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _owned_by(obj: JSON, owner: JSON) -> bool:
    return any(
        isinstance(ref, dict) and ref.get("uid") == meta(owner).get("uid") and ref.get("controller")
        for ref in meta(obj).get("ownerReferences") or []
    )


def _pod_ready(pod: JSON) -> bool:
    cond = condition(get_path(pod, "status", "conditions"), "Ready")
    return bool(cond and cond.get("status") == "True")


def _put_status(client: KubeHTTP, path: str, obj: JSON, status: JSON, *, replace: bool = False) -> bool:
    current = obj.get("status") or {}
    if (current == status) if replace else all(current.get(k) == v for k, v in status.items()):
        return False
    try:
        client.put(f"{path}/status", {**obj, "status": status if replace else {**current, **status}})
    except ApiError as err:
        if err.not_found or err.conflict or err.status == 403:
            return False
        raise
    return True


class ReplicaSetController:
    name = "replicaset-controller"
    enabled = True

    def __init__(self) -> None:
        self._created: dict[str, int] = {}  # ReplicaSet uid -> pods created so far

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        changed = False
        pods_by_ns: dict[str, list[JSON]] = {}
        for pod in client.list_items("/api/v1/pods"):
            pods_by_ns.setdefault(str(meta(pod).get("namespace")), []).append(pod)
        for rs in client.list_items("/apis/apps/v1/replicasets"):
            changed |= self._sync(client, rs, pods_by_ns.get(str(meta(rs).get("namespace")), []))
        return changed

    def _sync(self, client: KubeHTTP, rs: JSON, pods: list[JSON]) -> bool:
        ns = str(meta(rs).get("namespace"))
        path = f"/apis/apps/v1/namespaces/{ns}/replicasets/{meta(rs).get('name')}"
        owned = [p for p in pods if _owned_by(p, rs)]
        active = sorted((p for p in owned if not is_deleting(p)), key=lambda p: str(meta(p).get("name")))
        changed = False
        if not is_deleting(rs):
            want = int(get_path(rs, "spec", "replicas") if get_path(rs, "spec", "replicas") is not None else 1)
            uid = str(meta(rs).get("uid"))
            if len(active) < want:
                template = get_path(rs, "spec", "template") or {}
                counter = self._created.get(uid, 0)
                for _ in range(want - len(active)):
                    counter += 1
                    name = f"{meta(rs).get('name')}-{_suffix(f'{uid}/{counter}', 5)}"
                    pod: JSON = {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": name,
                            "namespace": ns,
                            "labels": dict(get_path(template, "metadata", "labels") or {}),
                            "annotations": dict(get_path(template, "metadata", "annotations") or {}),
                            "ownerReferences": [_owner_ref(rs, "ReplicaSet", "apps/v1")],
                        },
                        "spec": json.loads(json.dumps(template.get("spec") or {})),
                    }
                    if not pod["metadata"]["annotations"]:
                        del pod["metadata"]["annotations"]
                    try:
                        created = client.post(f"/api/v1/namespaces/{ns}/pods", pod)
                    except ApiError:
                        break  # e.g. 403 in a terminating namespace: the next sync tries again
                    active.append(created)
                    changed = True
                self._created[uid] = counter
            elif len(active) > want:
                for pod in active[want:]:
                    try:
                        client.delete(f"/api/v1/namespaces/{ns}/pods/{meta(pod).get('name')}")
                        changed = True
                    except ApiError:
                        continue
                active = active[:want]
        ready = sum(1 for p in active if _pod_ready(p))
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": meta(rs).get("generation", 1),
        }
        return _put_status(client, path, rs, status) or changed


class DeploymentController:
    name = "deployment-controller"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        now = rfc3339(now_of(emu))
        changed = False
        replicasets = client.list_items("/apis/apps/v1/replicasets")
        for deploy in client.list_items("/apis/apps/v1/deployments"):
            if is_deleting(deploy):
                continue
            changed |= self._sync(client, deploy, replicasets, now)
        return changed

    def _sync(self, client: KubeHTTP, deploy: JSON, replicasets: list[JSON], now: str) -> bool:
        ns = str(meta(deploy).get("namespace"))
        name = str(meta(deploy).get("name"))
        path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
        template = json.loads(json.dumps(get_path(deploy, "spec", "template") or {}))
        hash_ = pod_template_hash(template)
        replicas = get_path(deploy, "spec", "replicas")
        want = 1 if replicas is None else int(replicas)
        template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = hash_
        selector = json.loads(json.dumps(get_path(deploy, "spec", "selector") or {}))
        selector.setdefault("matchLabels", {})["pod-template-hash"] = hash_
        rs_name = f"{name}-{hash_}"
        owned = [rs for rs in replicasets if meta(rs).get("namespace") == ns and _owned_by(rs, deploy)]
        current = next((rs for rs in owned if meta(rs).get("name") == rs_name), None)
        changed = False
        if current is None:
            rs = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "namespace": ns,
                    "labels": dict(get_path(template, "metadata", "labels") or {}),
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                    "ownerReferences": [_owner_ref(deploy, "Deployment", "apps/v1")],
                },
                "spec": {"replicas": want, "selector": selector, "template": template},
            }
            try:
                current = client.post(f"/apis/apps/v1/namespaces/{ns}/replicasets", rs)
                changed = True
            except ApiError:
                return False
        elif get_path(current, "spec", "replicas") != want and not is_deleting(current):
            body = {**current, "spec": {**(current.get("spec") or {}), "replicas": want}}
            try:
                current = client.put(f"/apis/apps/v1/namespaces/{ns}/replicasets/{rs_name}", body)
                changed = True
            except ApiError:
                return changed
        for old in owned:
            # a minimal rollout: previous ReplicaSets are scaled down to zero
            if old is current or is_deleting(old) or get_path(old, "spec", "replicas") == 0:
                continue
            body = {**old, "spec": {**(old.get("spec") or {}), "replicas": 0}}
            try:
                client.put(f"/apis/apps/v1/namespaces/{ns}/replicasets/{meta(old).get('name')}", body)
                changed = True
            except ApiError:
                continue
        ready = int(get_path(current, "status", "readyReplicas") or 0)
        total = int(get_path(current, "status", "replicas") or 0)
        available = "True" if ready >= want else "False"
        old_conditions = get_path(deploy, "status", "conditions") or []
        conditions = [
            self._cond(
                old_conditions,
                "Available",
                available,
                "MinimumReplicasAvailable" if available == "True" else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if available == "True"
                else "Deployment does not have minimum availability.",
                now=now,
            ),
            self._cond(
                old_conditions,
                "Progressing",
                "True",
                "NewReplicaSetAvailable" if available == "True" else "ReplicaSetUpdated",
                f'ReplicaSet "{rs_name}" has successfully progressed.'
                if available == "True"
                else f'ReplicaSet "{rs_name}" is progressing.',
                now=now,
            ),
        ]
        status: JSON = {
            "observedGeneration": meta(deploy).get("generation", 1),
            "replicas": total,
            "updatedReplicas": total,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": conditions,
        }
        if total - ready > 0:
            status["unavailableReplicas"] = total - ready
        return _put_status(client, path, deploy, status, replace=True) or changed

    @staticmethod
    def _cond(old: list[JSON], ctype: str, status: str, reason: str, message: str, *, now: str) -> JSON:
        prev = condition(old, ctype)
        if prev and prev.get("status") == status and prev.get("reason") == reason and prev.get("message") == message:
            return dict(prev)
        transition = prev.get("lastTransitionTime") if prev and prev.get("status") == status else now
        return {
            "type": ctype,
            "status": status,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
            "reason": reason,
            "message": message,
        }
