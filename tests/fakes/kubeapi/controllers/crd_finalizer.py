"""apiextensions-apiserver's CRD finalizer (pkg/controller/finalizer/crd_finalizer.go).

A CustomResourceDefinition being deleted keeps ``customresourcecleanup.apiextensions.k8s.io``
until all its instances are gone. Each attempt:

1. ``Terminating`` = True, ``InstanceDeletionInProgress``, "CustomResource deletion is in progress";
2. list the instances (failure: ``InstanceDeletionFailed``, ``could not list instances: %v``) and
   issue one DELETECOLLECTION per namespace that has instances (failure: ``InstanceDeletionFailed``,
   ``could not issue all deletes: %v``);
3. poll for up to one minute (on ``emu.clock``) for zero instances; when the minute passes with
   instances left (their finalizers hold them): ``InstanceDeletionCheck``, ``could not confirm zero
   CustomResources remaining: timed out waiting for the condition``, and the attempt is retried
   with the default controller back-off (5 ms doubling, at most 1000 s);
4. zero instances: ``Terminating`` = False, ``InstanceDeletionCompleted``, "removed all instances",
   and the finalizer is removed, which lets the API server delete the CRD.

A CRD that was never Established skips the deletion (``NeverEstablished``, "resource was never
established").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._util import condition, finalizers_of, get_path, is_deleting, meta, now_of, rfc3339

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
POLL_TIMEOUT = 60.0
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0


@dataclass
class _Attempt:
    started: datetime
    retry_at: datetime | None = None
    failures: int = 0
    polling: bool = False


def set_crd_condition(conditions: list[JSON], new: JSON, now: datetime) -> list[JSON]:
    """SetCRDCondition: keep lastTransitionTime unless the status changes."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == new["type"]:
            if c.get("status") != new["status"]:
                c["lastTransitionTime"] = rfc3339(now)
            c["status"] = new["status"]
            c["reason"] = new["reason"]
            c["message"] = new["message"]
            return out
    out.append({**new, "lastTransitionTime": rfc3339(now)})
    return out


def _instances_path(crd: JSON) -> tuple[str, str, bool]:
    """(group-version root, plural, namespaced) of a CRD's storage version."""
    spec = crd.get("spec") or {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    storage = next((v for v in versions if v.get("storage")), versions[0] if versions else {})
    base = f"/apis/{spec.get('group') or ''}/{storage.get('name') or 'v1'}"
    plural = str(get_path(spec, "names", "plural") or "")
    return base, plural, spec.get("scope", "Namespaced") == "Namespaced"


def _terminating(status: str, reason: str, message: str) -> JSON:
    return {"type": "Terminating", "status": status, "reason": reason, "message": message}


class CRDFinalizer:
    name = "crd-finalizer"
    enabled = True

    def __init__(self) -> None:
        self._attempts: dict[str, _Attempt] = {}
        self.log: list[str] = []

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        now = now_of(emu)
        changed = False
        seen: set[str] = set()
        for crd in client.list_items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
            name = str(meta(crd).get("name"))
            if not is_deleting(crd) or CLEANUP_FINALIZER not in finalizers_of(crd):
                continue
            seen.add(name)
            changed |= self._sync(client, crd, now)
        for gone in set(self._attempts) - seen:
            del self._attempts[gone]
        return changed

    def _status_path(self, crd: JSON) -> str:
        return f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{meta(crd).get('name')}/status"

    def _update_status(self, client: KubeHTTP, crd: JSON, cond: JSON, now: datetime) -> tuple[JSON, bool]:
        conditions = get_path(crd, "status", "conditions") or []
        new_conditions = set_crd_condition(conditions, cond, now)
        if new_conditions == conditions:
            return crd, False
        body = {**crd, "status": {**(crd.get("status") or {}), "conditions": new_conditions}}
        try:
            return client.put(self._status_path(crd), body), True
        except ApiError as err:
            if err.not_found or err.conflict:
                return crd, False
            # UpdateStatus errors are logged (utilruntime.HandleError) and the sync goes on
            self.log.append(f"failed to update the status of CRD {meta(crd).get('name')}: {err}")
            return crd, False

    def _sync(self, client: KubeHTTP, crd: JSON, now: datetime) -> bool:
        name = str(meta(crd).get("name"))
        attempt = self._attempts.get(name)
        if attempt is not None and attempt.retry_at is not None and now < attempt.retry_at:
            return False
        if attempt is not None and not attempt.retry_at and attempt.polling:
            return self._poll(client, crd, attempt, now)
        if attempt is None:
            attempt = self._attempts[name] = _Attempt(started=now)
        attempt.started = now
        attempt.retry_at = None
        attempt.polling = False

        crd, changed = self._update_status(
            client,
            crd,
            _terminating("True", "InstanceDeletionInProgress", "CustomResource deletion is in progress"),
            now,
        )
        established = condition(get_path(crd, "status", "conditions"), "Established")
        if not (established and established.get("status") == "True"):
            final = _terminating("False", "NeverEstablished", "resource was never established")
            return self._finish(client, crd, final, now) or changed

        base, plural, namespaced = _instances_path(crd)
        try:
            items = client.list_items(f"{base}/{plural}")
        except ApiError as err:
            msg = f"could not list instances: {err.client_go_text}"
            cond = _terminating("True", "InstanceDeletionFailed", msg)
            return self._fail(client, crd, attempt, cond, now) or changed
        errors: list[str] = []
        done_ns: set[str] = set()
        for item in items:
            ns = str(meta(item).get("namespace") or "")
            if ns in done_ns:
                continue
            done_ns.add(ns)
            path = f"{base}/namespaces/{ns}/{plural}" if namespaced and ns else f"{base}/{plural}"
            try:
                result = client.delete(path)
            except ApiError as err:
                errors.append(err.client_go_text)
                continue
            changed |= bool(result.get("items"))
        if errors:
            text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            cond = _terminating("True", "InstanceDeletionFailed", f"could not issue all deletes: {text}")
            return self._fail(client, crd, attempt, cond, now) or changed
        attempt.polling = True
        return self._poll(client, crd, attempt, now) or changed

    def _poll(self, client: KubeHTTP, crd: JSON, attempt: _Attempt, now: datetime) -> bool:
        base, plural, _ = _instances_path(crd)
        try:
            remaining = client.list_items(f"{base}/{plural}")
        except ApiError:
            remaining = [{}]
        if remaining:
            if now - attempt.started >= timedelta(seconds=POLL_TIMEOUT):
                cond = _terminating(
                    "True",
                    "InstanceDeletionCheck",
                    "could not confirm zero CustomResources remaining: timed out waiting for the condition",
                )
                return self._fail(client, crd, attempt, cond, now)
            return False
        final = _terminating("False", "InstanceDeletionCompleted", "removed all instances")
        return self._finish(client, crd, final, now)

    def _fail(self, client: KubeHTTP, crd: JSON, attempt: _Attempt, cond: JSON, now: datetime) -> bool:
        _, changed = self._update_status(client, crd, cond, now)
        delay = min(BACKOFF_BASE * 2**attempt.failures, BACKOFF_MAX)
        attempt.failures += 1
        attempt.retry_at = now + timedelta(seconds=delay)
        attempt.polling = False
        return changed

    def _finish(self, client: KubeHTTP, crd: JSON, cond: JSON, now: datetime) -> bool:
        conditions = set_crd_condition(get_path(crd, "status", "conditions") or [], cond, now)
        finalizers = [f for f in finalizers_of(crd) if f != CLEANUP_FINALIZER]
        body = {
            **crd,
            "metadata": {**meta(crd), "finalizers": finalizers or None},
            "status": {**(crd.get("status") or {}), "conditions": conditions},
        }
        try:
            updated = client.put(self._status_path(crd), body)
        except ApiError as err:
            if err.not_found:
                return True
            if err.conflict:
                return False
            raise
        if CLEANUP_FINALIZER in finalizers_of(updated):
            # a status update that does not carry metadata changes: remove it on the main resource
            try:
                client.patch(
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{meta(crd).get('name')}",
                    {
                        "metadata": {
                            "finalizers": finalizers or None,
                            "resourceVersion": meta(updated).get("resourceVersion"),
                        }
                    },
                )
            except ApiError as err:
                if not (err.not_found or err.conflict):
                    raise
        self._attempts.pop(str(meta(crd).get("name")), None)
        return True
