"""The namespace controller of kube-controller-manager, as far as namespace deletion goes.

Behaviour (see docs/k8s-namespace-deletion.md §2):

- only namespaces with a ``deletionTimestamp`` are processed; the first sync happens 5 s after the
  controller sees the deletion (``namespaceDeletionGracePeriod``), every status update it makes is
  followed by another sync 5 s later (the informer's update event), content that remains is
  re-checked after ``estimate/2 + 1`` s, other errors back off exponentially from 5 ms to 60 s, and
  every namespace is resynced every 5 minutes. All of this runs on ``emu.clock``, so under a
  FakeClock nothing happens until the test advances the clock.
- ``Delete``: set phase Terminating if needed; stop if ``spec.finalizers`` is empty; delete all
  content; any error (a partial discovery failure included) keeps ``kubernetes`` in
  ``spec.finalizers``; otherwise PUT ``/finalize`` without ``kubernetes``.
- ``deleteAllContent``: ServerPreferredNamespacedResources (partial failures are not fatal),
  only resources that support ``delete``; OrderedNamespaceDeletion deletes pods first and stops
  while pods remain (1.34+ behaviour, default on); per resource: estimate (pods only),
  DELETECOLLECTION (or LIST + DELETE) with ``propagationPolicy: Background``, re-list, count.
- the five conditions, in order, with the exact reasons and messages, and ``lastTransitionTime``
  changing only when a condition's status flips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ._http import JSON, ApiError, KubeHTTP, client_for
from ._inventory import cached_discovery
from ._util import finalizers_of, get_path, meta, now_of, option, parse_time, rfc3339
from .discovery_client import (
    APIResource,
    DiscoveryError,
    DiscoveryErrorStyle,
    DiscoveryResult,
    GroupDiscoveryFailed,
    supports_all,
)

FINALIZER_TOKEN = "kubernetes"
NAMESPACE_DELETION_GRACE_PERIOD = 5.0  # seconds, namespaceDeletionGracePeriod
FINALIZER_ESTIMATE_SECONDS = 15  # finalizerEstimateSeconds
RESYNC_PERIOD = 300.0  # NamespaceSyncPeriod
BACKOFF_BASE = 0.005
BACKOFF_MAX = 60.0

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
CONDITION_TYPES = (
    DISCOVERY_FAILURE,
    GV_PARSING_FAILURE,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
)

# The "OK" variant of each condition (status False).
SUCCESS_CONDITIONS: dict[str, tuple[str, str]] = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GV_PARSING_FAILURE: ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


class ResourcesRemainingError(Exception):
    def __init__(self, estimate: int) -> None:
        self.estimate = estimate
        super().__init__(f"some content remains in the namespace, estimate {estimate} seconds before it is removed")


# --------------------------------------------------------------------------------------------
# Pure parts: message formats and condition bookkeeping.


def discovery_failure_message(err: Exception) -> str:
    if isinstance(err, GroupDiscoveryFailed):
        return f"Discovery failed for some groups, {len(err.groups)} failing: {err}"
    return str(err)


def content_failure_message(errors: Iterable[str]) -> str:
    msgs = sorted(errors)
    return f"Failed to delete all resource types, {len(msgs)} remaining: {', '.join(msgs)}"


def content_remaining_message(remaining: Mapping[tuple[str, str], int]) -> str:
    """``remaining`` maps (group, resource) to the number of instances left."""
    parts = sorted(f"{res}.{group} has {n} resource instances" for (group, res), n in remaining.items() if n)
    return "Some resources are remaining: " + ", ".join(parts)


def finalizers_remaining_message(finalizers: Mapping[str, int]) -> str:
    parts = sorted(f"{name} in {n} resource instances" for name, n in finalizers.items() if n)
    return "Some content in the namespace has finalizers remaining: " + ", ".join(parts)


def unexpected_items_message(namespace: str, gvr_text: str) -> str:
    return f"unexpected items still remain in namespace: {namespace} for gvr: {gvr_text}"


@dataclass
class ConditionUpdater:
    """namespaceConditionUpdater: collects failures during one pass, then merges them into status."""

    new_conditions: list[JSON] = field(default_factory=list)
    delete_content_errors: list[str] = field(default_factory=list)

    def _add(self, ctype: str, reason: str, message: str) -> None:
        self.new_conditions.append({"type": ctype, "status": "True", "reason": reason, "message": message})

    def process_discover_resources_err(self, err: Exception) -> None:
        self._add(DISCOVERY_FAILURE, "DiscoveryFailed", discovery_failure_message(err))

    def process_group_version_err(self, err: Exception) -> None:
        self._add(GV_PARSING_FAILURE, "GroupVersionParsingFailed", str(err))

    def process_delete_content_err(self, err: Exception) -> None:
        self.delete_content_errors.append(str(err))

    def process_content_totals(
        self, gvr_remaining: Mapping[tuple[str, str], int], finalizers_remaining: Mapping[str, int]
    ) -> None:
        if gvr_remaining:
            self._add(CONTENT_REMAINING, "SomeResourcesRemain", content_remaining_message(gvr_remaining))
        if finalizers_remaining:
            self._add(
                FINALIZERS_REMAINING,
                "SomeFinalizersRemain",
                finalizers_remaining_message(finalizers_remaining),
            )

    def final_conditions(self) -> list[JSON]:
        conditions = list(self.new_conditions)
        if self.delete_content_errors and not any(c["type"] == CONTENT_FAILURE for c in conditions):
            conditions.append(
                {
                    "type": CONTENT_FAILURE,
                    "status": "True",
                    "reason": "ContentDeletionFailed",
                    "message": content_failure_message(self.delete_content_errors),
                }
            )
        return conditions

    def update(self, status: JSON, now: datetime) -> bool:
        """Merge into ``status['conditions']`` in place; True when anything changed."""
        return update_conditions(status, self.final_conditions(), now)


def conditions_of_version(version: object) -> tuple[str, ...]:
    """The condition types the namespace controller of a release writes: none before 1.16, the three
    failure conditions in 1.16, all five from 1.17 (k8s.io/api core/v1 types.go at those tags); a
    version that cannot be read (the default) writes all five."""
    text = str(version or "").lstrip("v")
    parts = text.split(".")
    try:
        major, minor = int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return CONDITION_TYPES
    if (major, minor) < (1, 16):
        return ()
    if (major, minor) < (1, 17):
        return CONDITION_TYPES[:3]
    return CONDITION_TYPES


def update_conditions(status: JSON, new_conditions: list[JSON], now: datetime) -> bool:
    """updateConditions: every type present, OK variant when not failing; transition time on flips only."""
    existing = status.get("conditions")
    conditions: list[JSON] = [dict(c) for c in existing] if isinstance(existing, list) else []
    changed = False
    stamp = rfc3339(now)
    for ctype in CONDITION_TYPES:
        new = next((c for c in new_conditions if c["type"] == ctype), None)
        if new is None:
            reason, message = SUCCESS_CONDITIONS[ctype]
            new = {"type": ctype, "status": "False", "reason": reason, "message": message}
        old = next((c for c in conditions if c.get("type") == ctype), None)
        if old is None:
            conditions.append(
                {
                    "type": ctype,
                    "status": new["status"],
                    "lastTransitionTime": stamp,
                    "reason": new["reason"],
                    "message": new["message"],
                }
            )
            changed = True
        elif (old.get("status"), old.get("reason"), old.get("message")) != (
            new["status"],
            new["reason"],
            new["message"],
        ):
            if old.get("status") != new["status"]:
                old["lastTransitionTime"] = stamp
            old["status"] = new["status"]
            old["reason"] = new["reason"]
            old["message"] = new["message"]
            changed = True
    if changed:
        status["conditions"] = conditions
    return changed


def pod_estimate(pods: Iterable[JSON]) -> int:
    """estimateGracefulTerminationForPods: max terminationGracePeriodSeconds of non-terminal pods."""
    estimate = 0
    for pod in pods:
        if get_path(pod, "status", "phase") in ("Succeeded", "Failed"):
            continue
        grace = get_path(pod, "spec", "terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace > estimate:
            estimate = grace
    return estimate


def allowed_estimate(estimate: int, deleted_at: datetime, now: datetime) -> int:
    """The estimate is dropped to 0 once the namespace has been deleting for at least that long."""
    if (now - deleted_at).total_seconds() >= estimate:
        return 0
    return estimate


def finalized_spec(finalizers: Iterable[str]) -> list[str]:
    """spec.finalizers without the controller's token, sorted through a set as sets.NewString does."""
    return sorted({f for f in finalizers if f != FINALIZER_TOKEN})


def backoff_delay(failures: int) -> float:
    return float(min(BACKOFF_BASE * float(2**failures), BACKOFF_MAX))


# --------------------------------------------------------------------------------------------
# The controller.


@dataclass
class _GVRResult:
    estimate: int = 0
    remaining: int = 0
    finalizers: dict[str, int] = field(default_factory=dict)


@dataclass
class _QueueEntry:
    due: datetime
    failures: int = 0
    seen_rv: str = ""
    last_sync: datetime | None = None


class NamespaceController:
    """Deletes the content of terminating namespaces and removes the ``kubernetes`` finalizer."""

    name = "namespace-controller"
    enabled = True

    def __init__(
        self,
        *,
        ordered_deletion: bool | None = None,
        discovery_error_style: DiscoveryErrorStyle | None = None,
        sync_delay: float = NAMESPACE_DELETION_GRACE_PERIOD,
    ) -> None:
        self.ordered_deletion = ordered_deletion
        self.discovery_error_style = discovery_error_style
        self.sync_delay = sync_delay
        self._queue: dict[str, _QueueEntry] = {}
        self._unsupported: set[tuple[str, str, str, str]] = set()  # (verb, group, version, resource)
        self.log: list[str] = []  # the controller's log lines (errors it would print)

    # -- options resolved against the emulator -------------------------------------------------
    def _ordered(self, emu: Any) -> bool:
        if self.ordered_deletion is not None:
            return self.ordered_deletion
        return bool(option(emu, "ordered_namespace_deletion", True))

    def _style(self, emu: Any) -> DiscoveryErrorStyle:
        style = self.discovery_error_style or option(emu, "discovery_error_style", "legacy")
        return "stale" if style == "stale" else "legacy"

    # -- scheduling ------------------------------------------------------------------------------
    def _schedule(self, namespaces: list[JSON], now: datetime) -> list[str]:
        """Track deleting namespaces; return the names whose sync is due, in name order."""
        present = set()
        for ns in namespaces:
            name = str(meta(ns).get("name") or "")
            rv = str(meta(ns).get("resourceVersion") or "")
            deleted_at = parse_time(meta(ns).get("deletionTimestamp"))
            if deleted_at is None:
                continue
            present.add(name)
            entry = self._queue.get(name)
            if entry is None:
                # the informer's add/update event: AddAfter(key, namespaceDeletionGracePeriod)
                first = max(deleted_at, now) + timedelta(seconds=self.sync_delay)
                self._queue[name] = _QueueEntry(due=first, seen_rv=rv)
                continue
            if rv != entry.seen_rv:
                # an update event from the informer: AddAfter(key, 5s), keeping an earlier due time
                entry.due = min(entry.due, now + timedelta(seconds=self.sync_delay))
                entry.seen_rv = rv
            if entry.last_sync is not None:
                entry.due = min(entry.due, entry.last_sync + timedelta(seconds=RESYNC_PERIOD + self.sync_delay))
        for gone in set(self._queue) - present:
            del self._queue[gone]
        return sorted(name for name in present if self._queue[name].due <= now)

    def reconcile(self, emu: Any) -> bool:
        if not self.enabled:
            self._queue.clear()  # a stopped controller manager loses its work queue
            return False
        client = client_for(emu)
        now = now_of(emu)
        namespaces = client.list_items("/api/v1/namespaces")
        due = self._schedule(namespaces, now)
        if not due:
            return False
        changed = False
        discovery: DiscoveryResult | Exception | None = None
        for name in due:
            entry = self._queue[name]
            if discovery is None:
                try:
                    discovery = cached_discovery(client, style=self._style(emu))
                except DiscoveryError as err:
                    discovery = err
            outcome = _Sync(self, emu, client, name, discovery=discovery, now=now)
            try:
                outcome.run()
            except ResourcesRemainingError as err:
                entry.due = now + timedelta(seconds=err.estimate // 2 + 1)
            except (ApiError, _SyncError) as err:
                self.log.append(f"deletion of namespace {name} failed: {err}")
                entry.due = now + timedelta(seconds=backoff_delay(entry.failures))
                entry.failures += 1
            else:
                entry.failures = 0
                entry.due = now + timedelta(seconds=RESYNC_PERIOD + self.sync_delay)
            entry.last_sync = now
            if outcome.namespace_written:
                # our own status write comes back as an update event
                entry.due = min(entry.due, now + timedelta(seconds=self.sync_delay))
                entry.seen_rv = outcome.last_rv
            changed = changed or outcome.changed
        return changed


class _SyncError(Exception):
    """The aggregate of the errors of one pass (utilerrors.NewAggregate)."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        super().__init__(text)


class _Sync:
    """One run of namespacedResourcesDeleter.Delete for one namespace."""

    def __init__(
        self,
        ctrl: NamespaceController,
        emu: Any,
        client: KubeHTTP,
        name: str,
        *,
        discovery: DiscoveryResult | Exception,
        now: datetime,
    ) -> None:
        self.ctrl = ctrl
        self.emu = emu
        self.client = client
        self.name = name
        self.discovery = discovery
        self.now = now
        self.changed = False
        self.namespace_written = False
        self.last_rv = ""

    @property
    def ns_path(self) -> str:
        return f"/api/v1/namespaces/{self.name}"

    def run(self) -> None:
        ns = self.client.get_or_none(self.ns_path)
        if ns is None or not meta(ns).get("deletionTimestamp"):
            return
        ns = self._ensure_terminating(ns)
        if not (get_path(ns, "spec", "finalizers") or []):
            return
        estimate = self._delete_all_content(ns)
        if estimate > 0:
            raise ResourcesRemainingError(estimate)
        self._finalize(ns)

    # -- status --------------------------------------------------------------------------------
    def _ensure_terminating(self, ns: JSON) -> JSON:
        if get_path(ns, "status", "phase") == "Terminating":
            return ns
        for _ in range(5):
            body = {**ns, "status": {**(ns.get("status") or {}), "phase": "Terminating"}}
            try:
                updated = self.client.put(f"{self.ns_path}/status", body)
            except ApiError as err:
                if not err.conflict:
                    raise
                latest = self.client.get(self.ns_path)
                if meta(latest).get("uid") != meta(ns).get("uid"):
                    raise _SyncError(["namespace uid has changed across retries"]) from err
                ns = latest
                if get_path(ns, "status", "phase") == "Terminating":
                    return ns
                continue
            self._written(updated)
            return updated
        raise _SyncError(["too many conflicts updating the namespace phase"])

    def _written(self, ns: JSON) -> None:
        self.changed = True
        self.namespace_written = True
        self.last_rv = str(meta(ns).get("resourceVersion") or "")

    def _write_conditions(self, ns: JSON, updater: ConditionUpdater) -> None:
        written = conditions_of_version(option(self.emu, "server_version", None))
        if not written:
            return  # before 1.16 the namespace controller writes no conditions
        status = dict(ns.get("status") or {})
        if not updater.update(status, self.now):
            return
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") in written]
        try:
            updated = self.client.put(f"{self.ns_path}/status", {**ns, "status": status})
        except ApiError as err:
            # utilruntime.HandleError: logged, the next sync tries again
            self.ctrl.log.append(f"couldn't update status condition for namespace {self.name!r}: {err}")
            return
        self._written(updated)

    def _finalize(self, ns: JSON) -> None:
        for _ in range(5):
            body = {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": meta(ns),
                "spec": {
                    **(ns.get("spec") or {}),
                    "finalizers": finalized_spec(get_path(ns, "spec", "finalizers") or []),
                },
            }
            try:
                result = self.client.put(f"{self.ns_path}/finalize", body)
            except ApiError as err:
                if err.not_found:
                    return
                if not err.conflict:
                    raise
                latest = self.client.get_or_none(self.ns_path)
                if latest is None:
                    return
                ns = latest
                continue
            self.changed = True
            self.namespace_written = True
            self.last_rv = str(meta(result).get("resourceVersion") or "")
            return
        raise _SyncError(["too many conflicts finalizing the namespace"])

    # -- content ---------------------------------------------------------------------------------
    def _delete_all_content(self, ns: JSON) -> int:
        errors: list[str] = []
        updater = ConditionUpdater()
        estimate = 0
        deleted_at = parse_time(meta(ns).get("deletionTimestamp")) or self.now

        resources: list[APIResource] = []
        if isinstance(self.discovery, Exception):
            errors.append(str(self.discovery))
            updater.process_discover_resources_err(self.discovery)
        else:
            resources = self.discovery.namespaced()
            if self.discovery.failed is not None:
                errors.append(str(self.discovery.failed))
                updater.process_discover_resources_err(self.discovery.failed)
        deletable = [r for r in resources if supports_all(r, "delete")]
        # discovery.GroupVersionResources: the group versions came from parsed strings already, so
        # parsing cannot fail here; the condition stays in its OK variant.
        gvr_remaining: dict[tuple[str, str], int] = {}
        finalizers_remaining: dict[str, int] = {}

        def account(res: APIResource, result: _GVRResult) -> None:
            nonlocal estimate
            estimate = max(estimate, result.estimate)
            if result.remaining > 0:
                gvr_remaining[(res.group, res.name)] = result.remaining
                for fin, count in result.finalizers.items():
                    if count:
                        finalizers_remaining[fin] = finalizers_remaining.get(fin, 0) + count

        pods = next((r for r in deletable if r.group == "" and r.version == "v1" and r.name == "pods"), None)
        if self.ctrl._ordered(self.emu) and pods is not None:
            result = self._delete_gvr(pods, deleted_at, errors, updater)
            account(pods, result)
            if gvr_remaining.get(("", "pods"), 0) > 0:
                # "pods still remain, delaying deletion of other resources": the conditions are
                # updated without the content totals (kubernetes#138208).
                self._write_conditions(ns, updater)
                if errors:
                    raise _SyncError(errors)
                return estimate

        for res in deletable:
            if self.ctrl._ordered(self.emu) and res is pods:
                continue
            result = self._delete_gvr(res, deleted_at, errors, updater)
            account(res, result)
        updater.process_content_totals(gvr_remaining, finalizers_remaining)
        self._write_conditions(ns, updater)
        if errors:
            raise _SyncError(errors)
        return estimate

    def _delete_gvr(
        self, res: APIResource, deleted_at: datetime, errors: list[str], updater: ConditionUpdater
    ) -> _GVRResult:
        try:
            return self._delete_gvr_inner(res, deleted_at)
        except _GVRError as err:
            errors.append(err.text)
            updater.process_delete_content_err(Exception(err.text))
            return err.result

    def _path(self, res: APIResource, name: str | None = None) -> str:
        prefix = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
        path = f"{prefix}/namespaces/{self.name}/{res.name}"
        return f"{path}/{name}" if name is not None else path

    def _key(self, verb: str, res: APIResource) -> tuple[str, str, str, str]:
        return (verb, res.group, res.version, res.name)

    def _delete_gvr_inner(self, res: APIResource, deleted_at: datetime) -> _GVRResult:
        estimate = 0
        if res.group == "" and res.name == "pods":
            try:
                pods = self.client.list_items(self._path(res))
            except ApiError as err:
                raise _GVRError(err.client_go_text, _GVRResult()) from err
            estimate = allowed_estimate(pod_estimate(pods), deleted_at, self.now)

        if not self._delete_collection(res, estimate):
            self._delete_each_item(res, estimate)

        items, supported = self._list(res, estimate)
        if not supported or not items:
            return _GVRResult(estimate=estimate)
        fins: dict[str, int] = {}
        for item in items:
            for fin in finalizers_of(item):
                fins[fin] = fins.get(fin, 0) + 1
        if estimate:
            return _GVRResult(estimate=estimate, remaining=len(items), finalizers=fins)
        if fins:
            return _GVRResult(estimate=FINALIZER_ESTIMATE_SECONDS, remaining=len(items), finalizers=fins)
        raise _GVRError(
            unexpected_items_message(self.name, res.gvr_text()),
            _GVRResult(estimate=estimate, remaining=len(items)),
        )

    def _supported(self, verb: str, res: APIResource) -> bool:
        # initOpCache: verbs missing from discovery are unsupported from the start
        return verb in res.verbs and self._key(verb, res) not in self.ctrl._unsupported

    def _delete_collection(self, res: APIResource, estimate: int) -> bool:
        if not self._supported("deletecollection", res):
            return False
        try:
            result = self.client.delete(self._path(res), {"propagationPolicy": "Background"})
        except ApiError as err:
            if err.method_not_supported or err.not_found:
                self.ctrl._unsupported.add(self._key("deletecollection", res))
                return False
            raise _GVRError(err.client_go_text, _GVRResult(estimate=estimate)) from err
        if result.get("items"):
            self.changed = True
        return True

    def _list(self, res: APIResource, estimate: int) -> tuple[list[JSON], bool]:
        if not self._supported("list", res):
            return [], False
        try:
            return self.client.list_items(self._path(res)), True
        except ApiError as err:
            if err.method_not_supported or err.not_found:
                self.ctrl._unsupported.add(self._key("list", res))
                return [], False
            raise _GVRError(err.client_go_text, _GVRResult(estimate=estimate)) from err

    def _delete_each_item(self, res: APIResource, estimate: int) -> None:
        items, supported = self._list(res, estimate)
        if not supported:
            return
        for item in items:
            item_name = str(meta(item).get("name") or "")
            try:
                self.client.delete(self._path(res, item_name), {"propagationPolicy": "Background"})
            except ApiError as err:
                if err.not_found or err.method_not_supported:
                    continue
                raise _GVRError(err.client_go_text, _GVRResult(estimate=estimate)) from err
            self.changed = True


class _GVRError(Exception):
    def __init__(self, text: str, result: _GVRResult) -> None:
        self.text = text
        self.result = result
        super().__init__(text)
