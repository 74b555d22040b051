"""The garbage collector: ownerReferences, and the ``orphan`` / ``foregroundDeletion`` finalizers.

What it does on each pass (pkg/controller/garbagecollector, reduced to its observable effects):

- an owner being deleted with the ``orphan`` finalizer: strip the ownerReferences that point at it
  from every dependent, then remove ``orphan``;
- an owner being deleted with ``foregroundDeletion``: delete its dependents (Foreground when they
  have dependents of their own, else Background) and remove ``foregroundDeletion`` once no
  dependent with ``blockOwnerDeletion: true`` is left;
- a dependent whose owners are all gone (not found, or found with another UID) or waiting for their
  dependents' deletion: delete it (Background, or Foreground under a foreground owner when it has
  dependents itself); when some owners are still there, drop only the dangling references.

An owner whose kind cannot be resolved through discovery (its CRD is gone) is neither dangling nor
present: the real GC cannot build a REST mapping and keeps retrying, so the dependent stays.
"""

from __future__ import annotations

import json
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._inventory import Inventory, cached_discovery, object_url, take_inventory
from ._util import finalizers_of, is_deleting, meta, owner_refs
from .discovery_client import APIResource, DiscoveryError

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _gc_signature(obj: JSON) -> str:
    """The metadata the garbage collector's decisions depend on."""
    m = meta(obj)
    return json.dumps([m.get("deletionTimestamp"), m.get("finalizers"), m.get("ownerReferences")], sort_keys=True)


class GarbageCollector:
    name = "garbage-collector"
    enabled = True

    def __init__(self) -> None:
        self.log: list[str] = []
        self._seen_rv: int | None = None
        self._signatures: dict[str, str] = {}  # uid -> _gc_signature at the last pass

    def _woken(self, emu: Any) -> bool:
        """Whether anything happened since the last pass that could change a decision.

        The real GC is driven by watch events on every resource; this reads the emulator's event
        log in-process as that wake-up signal when it is available (and runs every time when not).
        Events that cannot matter: status-only updates, and new objects without ownerReferences
        that are not being deleted. The decisions themselves always come from the HTTP API.
        """
        store = getattr(getattr(emu, "cluster", None), "store", None)
        events_after = getattr(store, "events_after", None)
        if self._seen_rv is None or events_after is None:
            return True
        try:
            with store.lock:  # type: ignore[union-attr]
                if getattr(store, "first_rv", 0) > self._seen_rv:
                    return True  # the log was trimmed past our position
                events = list(events_after(self._seen_rv))
            for event in events:
                obj = event.entry.obj
                if event.type == "DELETED" or event.key[1] in ("customresourcedefinitions", "apiservices"):
                    return True
                m = meta(obj)
                if event.type == "ADDED":
                    if m.get("ownerReferences") or m.get("deletionTimestamp"):
                        return True
                    continue
                if self._signatures.get(str(m.get("uid"))) != _gc_signature(obj):
                    return True
        except (AttributeError, TypeError, IndexError):
            return True  # an event log of another shape: just run
        return False

    def reconcile(self, emu: Any) -> bool:
        if not self._woken(emu):
            return False
        client = client_for(emu)
        store = getattr(getattr(emu, "cluster", None), "store", None)
        seen = getattr(store, "rv", None)
        try:
            discovery = cached_discovery(client)
        except DiscoveryError as err:
            self.log.append(f"failed to discover resources: {err}")
            return False
        inv = take_inventory(client, discovery)
        self._seen_rv = seen if isinstance(seen, int) else None
        self._signatures = {str(meta(o).get("uid")): _gc_signature(o) for _, o in inv.objects}
        changed = False
        for res, obj in inv.objects:
            if is_deleting(obj) and ORPHAN in finalizers_of(obj):
                changed |= self._orphan_dependents(client, inv, res, obj)
            elif is_deleting(obj) and FOREGROUND in finalizers_of(obj):
                changed |= self._delete_dependents_foreground(client, inv, res, obj)
        for res, obj in inv.objects:
            if owner_refs(obj) and not is_deleting(obj):
                changed |= self._check_owners(client, inv, res, obj)
        return changed

    # -- owners being deleted ----------------------------------------------------------------------
    def _orphan_dependents(self, client: KubeHTTP, inv: Inventory, res: APIResource, owner: JSON) -> bool:
        uid = str(meta(owner).get("uid"))
        changed = False
        for dep_res, dep in inv.dependents.get(uid, []):
            remaining = [ref for ref in owner_refs(dep) if ref.get("uid") != uid]
            changed |= self._patch(
                client,
                object_url(dep_res, dep),
                {"metadata": {"ownerReferences": remaining or None, "uid": meta(dep).get("uid")}},
            )
        changed |= self._remove_finalizer(client, res, owner, ORPHAN)
        return changed

    def _delete_dependents_foreground(self, client: KubeHTTP, inv: Inventory, res: APIResource, owner: JSON) -> bool:
        uid = str(meta(owner).get("uid"))
        changed = False
        blocking = 0
        for dep_res, dep in inv.dependents.get(uid, []):
            ref = next((r for r in owner_refs(dep) if r.get("uid") == uid), {})
            if ref.get("blockOwnerDeletion") is True:
                blocking += 1
            if is_deleting(dep):
                continue
            if self._has_solid_owner(inv, dep_res, dep, ignore=uid):
                # another live owner keeps it: just drop the reference to this owner
                remaining = [r for r in owner_refs(dep) if r.get("uid") != uid]
                changed |= self._patch(
                    client,
                    object_url(dep_res, dep),
                    {"metadata": {"ownerReferences": remaining, "uid": meta(dep).get("uid")}},
                )
                if ref.get("blockOwnerDeletion") is True:
                    blocking -= 1
                continue
            policy = "Foreground" if inv.dependents.get(str(meta(dep).get("uid"))) else "Background"
            changed |= self._delete(client, dep_res, dep, policy)
        if blocking == 0:
            changed |= self._remove_finalizer(client, res, owner, FOREGROUND)
        return changed

    # -- dependents ----------------------------------------------------------------------------------
    def _owner_state(self, inv: Inventory, dep_res: APIResource, dep: JSON, ref: JSON) -> str:
        """'solid', 'dangling', 'waiting' (owner deleting in foreground) or 'unknown' (no REST mapping)."""
        owner_res = inv.discovery.by_kind(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""))
        if owner_res is None:
            return "unknown"
        found = inv.by_uid.get(str(ref.get("uid") or ""))
        if found is None:
            return "dangling"
        owner_res_found, owner = found
        if owner_res_found.name != owner_res.name or owner_res_found.group != owner_res.group:
            return "dangling"
        if owner_res.namespaced and meta(owner).get("namespace") != meta(dep).get("namespace"):
            return "dangling"
        if meta(owner).get("name") != ref.get("name"):
            return "dangling"
        if is_deleting(owner) and FOREGROUND in finalizers_of(owner):
            return "waiting"
        return "solid"

    def _has_solid_owner(self, inv: Inventory, dep_res: APIResource, dep: JSON, *, ignore: str) -> bool:
        for ref in owner_refs(dep):
            if ref.get("uid") == ignore:
                continue
            if self._owner_state(inv, dep_res, dep, ref) in ("solid", "unknown"):
                return True
        return False

    def _check_owners(self, client: KubeHTTP, inv: Inventory, res: APIResource, obj: JSON) -> bool:
        states = [(ref, self._owner_state(inv, res, obj, ref)) for ref in owner_refs(obj)]
        if any(state == "unknown" for _, state in states):
            self.log.append(
                f"unable to get REST mapping for the owners of {res.name} {meta(obj).get('namespace')}/"
                f"{meta(obj).get('name')}"
            )
            # the item is retried later; dangling references are left alone meanwhile
            return False
        solid = [ref for ref, state in states if state == "solid"]
        dangling = [ref for ref, state in states if state == "dangling"]
        waiting = [ref for ref, state in states if state == "waiting"]
        if solid:
            if not dangling and not waiting:
                return False
            drop = {str(ref.get("uid")) for ref in dangling + waiting}
            remaining = [ref for ref in owner_refs(obj) if str(ref.get("uid")) not in drop]
            return self._patch(
                client,
                object_url(res, obj),
                {"metadata": {"ownerReferences": remaining, "uid": meta(obj).get("uid")}},
            )
        if waiting and inv.dependents.get(str(meta(obj).get("uid"))):
            return self._delete(client, res, obj, "Foreground")
        return self._delete(client, res, obj, "Background")

    # -- writes -------------------------------------------------------------------------------------------
    def _delete(self, client: KubeHTTP, res: APIResource, obj: JSON, policy: str) -> bool:
        try:
            client.delete(
                object_url(res, obj),
                {"propagationPolicy": policy, "preconditions": {"uid": meta(obj).get("uid")}},
            )
        except ApiError as err:
            if not (err.not_found or err.conflict):
                self.log.append(f"failed to delete {object_url(res, obj)}: {err}")
            return False
        return True

    def _patch(self, client: KubeHTTP, url: str, body: JSON) -> bool:
        try:
            client.patch(url, body)
        except ApiError as err:
            if not (err.not_found or err.conflict):
                self.log.append(f"failed to patch {url}: {err}")
            return False
        return True

    def _remove_finalizer(self, client: KubeHTTP, res: APIResource, obj: JSON, finalizer: str) -> bool:
        remaining = [f for f in finalizers_of(obj) if f != finalizer]
        return self._patch(
            client,
            object_url(res, obj),
            {
                "metadata": {
                    "finalizers": remaining or None,
                    "resourceVersion": meta(obj).get("resourceVersion"),
                }
            },
        )
