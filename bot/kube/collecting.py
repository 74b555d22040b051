"""Collecting a NamespaceSnapshot: everything the rules need, in parallel, within one deadline.

The calls run on a bounded thread pool. The collecting thread drives them like a small event
loop: each finished call may schedule the calls that follow from it (a group's discovery -> the
lists of its types; an APIService -> its Service -> endpoints and pods; a deleting pod -> its node),
so that nothing waits for a whole round to finish. Every failed call becomes a gap, never a crash;
only an unreachable or unauthorized cluster raises.

What is asked for, and so what enters the process: the types in a terminating namespace are listed as
metadata only (`PartialObjectMetadataList`: apiVersion, kind, metadata), since the rules read only
their finalizers, owner references and deletion timestamps; Secrets and ConfigMaps always so, so that
their values are never sent to nsstuck. The one type of the namespace listed in full is pods (their
node, volumes and status). Full objects are also read of what the rules read the spec or status of:
the namespace, APIServices, webhook configurations, CRDs, Deployments, StatefulSets and DaemonSets,
the Services behind APIServices and webhooks with their EndpointSlices, Endpoints and pods, and the
nodes of deleting pods. Every object is trimmed (`trim`, `bot.domain.values`) before anything keeps it.

An Active namespace (`collect`, for the prediction of `bot.diagnosis.predicting`: would deleting it
now get stuck?) is collected the same way, with the same reads, applied to what its deletion will
touch: the objects that carry a finalizer are read whole in place of the deleting ones (never Secrets
and ConfigMaps), and the node of every pod that is scheduled and not finished is read, in place of the
nodes of deleting pods.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from bot.domain import conditions as ns_conditions
from bot.domain.events import newest_first
from bot.domain.events import view as event_view
from bot.domain.findings import Gap
from bot.domain.gitops import OWNER_KINDS, OwnerKind, marked_kinds, trim_owner
from bot.domain.refs import ClusterName, KubeObject, deletion_time, finalizers_of, meta, service_of_address
from bot.domain.snapshot import GroupVersionStatus, NamespaceSnapshot, ResourceType, labels_of
from bot.domain.values import is_value_resource, metadata_only, snapshot_safe, without_values
from bot.errors import ClusterUnreachableError
from bot.kube.requesting import MAX_ANSWER
from bot.kube.transport import AGGREGATED_DISCOVERY, JSON, METADATA_LIST, CallError, CallKind, Transport
from bot.logs import carrying

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# (finalizer, API group of the object, the cluster's workloads) -> search the cluster for its controller?
OwnerSearch = Callable[[str, str, Sequence[KubeObject]], bool]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class CollectOptions:
    deadline: float = 20.0  # seconds for the whole snapshot
    call_timeout: float = 10.0  # seconds for one call
    workers: int = 32
    page_size: int = 500
    # list in a namespace only the types its namespace controller reports as remaining, when its
    # conditions account for all the content (see `remaining_types`); the full listing otherwise
    contents_from_conditions: bool = False
    # told how far the collection is, after each batch of answers (`nsstuck diagnose` in a terminal)
    progress: Callable[[Progress], None] | None = field(default=None, compare=False)
    # collect an Active namespace whole, for the prediction of what deleting it would meet; scans, which
    # diagnose terminating namespaces only, read one that turned Active alone
    predict: bool = True
    # the largest answer read, in bytes (NSSTUCK_MAX_ANSWER_MB): a larger one is a gap saying so
    max_answer: int = MAX_ANSWER
    # seconds a live controller's objects may stand still after their deletion began before it is no
    # longer "at work" (NSSTUCK_NO_PROGRESS_MINUTES; issue 37 §1): the diagnosis's bound, and whose logs to read
    no_progress_after: float = 1800.0
    # whether a finalizer (of an object being deleted, or in an Active namespace carrying one), given the API
    # group of that object and the cluster's workloads, needs its controller searched for in the cluster: then
    # RBAC and OLM's ClusterServiceVersions are read as well (`bot.diagnosis.owners.needs_search`); None:
    # never (the kube layer does not know the finalizer catalogue)
    owner_search: OwnerSearch | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Progress:
    """How many discovery documents and lists have been asked for so far, and how many have answered."""

    discovery_done: int = 0
    discovery_total: int = 0
    lists_done: int = 0
    lists_total: int = 0


# how long past the deadline the end of a collection waits for its calls still running: a call is given
# what is left of the deadline as its timeout, for its whole answer (bot.kube.requesting), so it has
# ended by then, its socket closed, unless it went through the client and its server trickles the headers
LATE_CALL_GRACE = 0.25

# a call whose timeout ran out this close to the deadline (or after it) was cut short by the deadline
DEADLINE_SLACK = 0.05


def not_finished(budget: float) -> str:
    """The gap's detail for a call the deadline ended."""
    return f"not finished within {budget:g}s"


# aggregated APIs that compute views and store no objects: their outage hides nothing in a namespace
STATELESS_GROUPS = frozenset({"metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"})

_WORKLOADS = (
    ("/apis/apps/v1/deployments", "Deployment"),
    ("/apis/apps/v1/statefulsets", "StatefulSet"),
    ("/apis/apps/v1/daemonsets", "DaemonSet"),
)
_WEBHOOKS = (
    ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
)

# ValidatingAdmissionPolicies and their bindings (GA in 1.30; a server without them answers 404: not a gap)
_POLICIES = (
    ("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
    ("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
)


# the controller's passes that must have succeeded for its count to cover the whole namespace
_CLEAN_PASS = (ns_conditions.DISCOVERY, ns_conditions.PARSING, ns_conditions.CONTENT_FAILURE)


def remaining_types(namespace_object: KubeObject | None) -> frozenset[str] | None:
    """The types (`resource.group`, `pods.` for the core group) still holding objects in a terminating
    namespace, by its namespace controller's last pass; None when that pass may not cover them all.

    Nothing can be created in a terminating namespace (the NamespaceLifecycle admission plugin
    refuses it), so its content only shrinks: when the controller's last pass discovered every
    group, parsed every version and deleted without an error, the types its NamespaceContentRemaining
    condition names are the only ones that can still hold objects. Not trusted: conditions absent
    (clusters before 1.17, a controller that never ran), any failing pass, a message we cannot read
    in full, and `pods.` among the remaining types (under OrderedNamespaceDeletion the controller
    stops at the pods and counts nothing else), or "All content successfully removed" on a namespace
    still stuck (the same feature misreports remaining pods that way).
    """
    if namespace_object is None or deletion_time(namespace_object) is None:
        return None
    conditions = {
        str(c.get("type")): c
        for c in (namespace_object.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    }
    if any((conditions.get(kind) or {}).get("status") != "False" for kind in _CLEAN_PASS):
        return None
    remaining = conditions.get(ns_conditions.CONTENT_REMAINING) or {}
    if remaining.get("status") != "True":
        return None
    types = ns_conditions.remaining_types_exactly(str(remaining.get("message") or ""))
    return None if not types or "pods." in types else types


class _Namespace:
    """What one namespace's snapshot gets on its own: its contents, its nodes, its gaps."""

    def __init__(self, base: NamespaceSnapshot) -> None:
        self.base = base
        self.name = base.namespace
        self.gaps: list[Gap] = list(base.gaps)  # the read of the namespace itself may have left one
        self.contents: dict[str, tuple[KubeObject, ...]] = {}
        self.nodes: dict[str, KubeObject | None] = {}
        self.requested_nodes: set[str] = set()
        # group versions whose every CRD type was listed in this namespace although discovery failed
        self.fallback_complete: dict[str, bool] = {}
        # when set, the only types (`resource.group`) that can hold objects here: the others are not listed
        self.only: frozenset[str] | None = None
        self.events: list[KubeObject] = []
        self.full_reads = 0
        # the claims of deleting pods past their grace period, with the nodes of those pods, and the
        # Services of the NFS servers their volumes need (issue 37 §5)
        self.claims: dict[str, set[str]] = {}
        self.services: set[tuple[str, str]] = set()
        self.csi_nodes: set[str] = set()
        # the search for finalizers' controllers (`CollectOptions.owner_search`): the finalizers of watched
        # objects not weighed yet (with their object's group), those weighed, whether it was started here,
        # and the namespace's Roles and RoleBindings it read
        self.owner_pending: list[tuple[str, str]] = []
        self.owner_weighed: set[str] = set()
        self.owner_search = False
        self.roles: list[KubeObject] = []
        self.role_bindings: list[KubeObject] = []
        # issue 38 §5: the GitOps owner kinds the namespace's or its content's marks asked to list
        self.gitops_kinds: set[OwnerKind] = set()
        # not being deleted: collected for a prediction of what its deletion will meet
        self.active = base.namespace_object is not None and deletion_time(base.namespace_object) is None

    def watched(self, obj: KubeObject) -> bool:
        """An object whose controller the rules judge: one being deleted, or, in an Active namespace, one
        that carries a finalizer (its deletion will wait for it)."""
        return deletion_time(obj) is not None or (self.active and bool(finalizers_of(obj)))

    def wants_node(self, pod: KubeObject) -> bool:
        """Whether the rules read the node of this pod: it is being deleted, or, in an Active namespace, it
        will be (a finished pod is removed at once: its grace period is 0)."""
        if deletion_time(pod) is not None:
            return True
        return self.active and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")

    def lists(self, rtype: ResourceType) -> bool:
        return self.only is None or f"{rtype.resource}.{rtype.group}" in self.only


# the namespaces a call is for (a late call is a gap in each of them); None: every namespace of the run
Scope = Sequence[_Namespace] | None


def _no_call() -> None:
    """Never run: what `_Calls` queues in place of a call submitted first (kept apart, run before the next)."""


_FIRST: tuple[int, Callable[[], Any]] = (-1, _no_call)


class _Calls:
    """The collection's calls, run on at most `size` threads, each call's outcome put on `finished` as
    (its token, its result, the exception it raised).

    What a `ThreadPoolExecutor` does with a Future (a condition and its lock) per call, its locks and
    its semaphore, done with two queues: the thousand discovery documents and lists of a CRD-heavy
    cluster spent more of the collecting thread's time submitting calls than deciding what to call.
    Threads are started as calls come, up to `size`. A call submitted `first` is started by the next
    thread free, before the calls queued (the owner search's few reads, decided on while a thousand lists
    wait their turn, run beside them instead of after them). `shutdown` drops the calls not started yet; the
    `with` block's end waits for those running (their connection may be closed right after), until
    `wait_until` (a `time.monotonic()`): a call still running then is left to end by itself on its
    daemon thread. Its timeout bounds the whole answer on the Reader's path and the body on the
    client's, but only each receive of the headers there, so a server that trickles its headers to the
    client would otherwise hold the collection past its deadline, however long it trickles.

    Kept over a `ThreadPoolExecutor` on measurement (issue 35; the executor tried in place of this class,
    `_Loop` unchanged, futures handing their outcome to `finished` from a done callback). Its threads are
    not daemons: the interpreter joins them at exit, so `nsstuck diagnose --timeout 3` against a list
    that trickles was still running after 60 s, where with this class it ends at 3 s and its start-up
    (tests/faults/test_command_report.py, a list that trickles).
    asyncio would run these blocking calls on such an executor too (`asyncio.run` waits for it at its
    end). Nor was it faster: on bench/diagnose.py's two clusters, 7 alternated runs of each, the process's
    CPU (median) was 0.714 s with this class against 0.774 s with the executor on the 150-type cluster,
    1.428 s against 1.441 s on the 1,000-type one, the same peak RSS; their wall times against the floor
    could not be told apart on that machine (a load average of 30 on its 2 cores: 3.6x against 5.9x,
    3.7x against 4.2x). See docs/performance.md.
    """

    def __init__(self, size: int, wait_until: float) -> None:
        self.size = size
        self.wait_until = wait_until
        self.finished: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
        self._work: queue.SimpleQueue[tuple[int, Callable[[], Any]] | None] = queue.SimpleQueue()
        # the calls submitted `first`; each also puts _FIRST on `_work`, which wakes a waiting thread
        self._first: deque[tuple[int, Callable[[], Any]]] = deque()
        self._threads: list[threading.Thread] = []
        self._submitted = 0
        self._stopped = False

    def submit(self, token: int, call: Callable[[], Any], *, first: bool = False) -> None:
        if first:
            self._first.append((token, call))
            self._work.put(_FIRST)
        else:
            self._work.put((token, call))
        self._submitted += 1
        if len(self._threads) < min(self.size, self._submitted):
            thread = threading.Thread(target=self._serve, name="nsstuck-collect", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            # a call submitted first goes before the one taken (there are at least as many _FIRST on `_work` as
            # calls in `_first`, so each is run, by the thread that takes its _FIRST at the latest)
            for token, call in (self._pop_first(), item):
                if self._stopped:
                    return
                if call is not _no_call:
                    self._run(token, call)

    def _pop_first(self) -> tuple[int, Callable[[], Any]]:
        if self._first:
            try:
                return self._first.popleft()
            except IndexError:  # another thread took it meanwhile
                pass
        return _FIRST

    def _run(self, token: int, call: Callable[[], Any]) -> None:
        try:
            self.finished.put((token, call(), None))
        except BaseException as e:  # the loop raises what is not a CallError, on the collecting thread
            self.finished.put((token, None, e))

    def shutdown(self) -> None:
        """Start no more calls (those queued are dropped); the threads end after their current call."""
        self._stopped = True
        for _ in self._threads:
            self._work.put(None)

    def __enter__(self) -> _Calls:
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()
        for thread in self._threads:
            thread.join(max(0.0, self.wait_until - time.monotonic()))
        left = sum(1 for thread in self._threads if thread.is_alive())
        if left:
            log.info("%d call(s) still running past the collection's deadline were left to end by themselves", left)


class _Loop:
    """Labelled calls on the pool, with callbacks run on the collecting thread, until the deadline.

    (An event loop of asyncio would do this part, but its calls would still be blocking ones on an
    executor's threads: see `_Calls` for why those are ours.)"""

    def __init__(
        self,
        pool: _Calls,
        deadline: float,
        progress: Callable[[Progress], None] | None = None,
        *,
        budget: float,
    ) -> None:
        self.pool = pool
        self.deadline = deadline
        self.budget = budget  # the seconds the deadline stands for, as a late call's gap says them
        self.pending: dict[int, tuple[str, Callable[[Any], None], Callable[[CallError], None], Scope]] = {}
        self.tokens = itertools.count()
        self.progress = progress
        self.counts = {"discovery": [0, 0], "list": [0, 0]}  # kind -> [done, total]

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def add(
        self,
        label: str,
        call: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[CallError], None],
        scope: Scope = None,
        *,
        first: bool = False,
    ) -> None:
        """A call, queued (`first`: before the calls queued already, see `_Calls`)."""
        token = next(self.tokens)
        self.pending[token] = (label, on_done, on_error, scope)
        self.pool.submit(token, carrying(self._to_deadline(call)), first=first)
        kind = label.partition(" ")[0]
        if kind in self.counts:
            self.counts[kind][1] += 1

    def _to_deadline(self, call: Callable[[], Any]) -> Callable[[], Any]:
        """A call whose timeout the deadline cut short (the transport gives a call what is left of it)
        fails as one not finished in time, in the words of a call still running at the deadline: which
        of the two notices first is a race, and it must not change what the gap says."""
        budget, deadline = self.budget, self.deadline

        def bounded() -> Any:
            try:
                return call()
            except CallError as e:
                if e.kind is not CallKind.TIMEOUT or time.monotonic() < deadline - DEADLINE_SLACK:
                    raise
                raise CallError(CallKind.TIMEOUT, not_finished(budget)) from None

        return bounded

    def run(self) -> list[tuple[str, Scope]]:
        """Drive until nothing is pending or time is up; returns the calls that did not finish."""
        # every call finished meanwhile is handed over at once: fewer wake-ups of this thread than
        # taking them one by one, which measured faster when many clusters share the interpreter lock
        finished = self.pool.finished
        while self.pending:
            left = self.remaining()
            if left <= 0:
                break
            try:
                done = [finished.get(timeout=left)]
            except queue.Empty:
                break
            while True:
                try:
                    done.append(finished.get_nowait())
                except queue.Empty:
                    break
            for token, result, error in done:
                entry = self.pending.pop(token, None)
                if entry is None:
                    continue
                label, on_done, on_error, _ = entry
                kind = label.partition(" ")[0]
                if kind in self.counts:
                    self.counts[kind][0] += 1
                if error is None:
                    on_done(result)
                elif isinstance(error, CallError):
                    on_error(error)
                else:
                    raise error
            if self.progress is not None:
                (d_done, d_total), (l_done, l_total) = self.counts["discovery"], self.counts["list"]
                self.progress(Progress(d_done, d_total, l_done, l_total))
        late = [(label, scope) for label, _, _, scope in self.pending.values()]
        self.pending.clear()
        return late


def _reason(error: CallError) -> str:
    """The gap's reason: timeout (ours, or the API server's 504), forbidden, unavailable (the server or
    a gateway cannot serve now, or throttles us), error (anything else, a dropped connection included)."""
    if error.kind is CallKind.TIMEOUT or error.status == 504:
        return "timeout"
    if error.status == 403:
        return "forbidden"
    if error.status in (429, 502, 503):
        return "unavailable"
    return "error"


# Events kept per namespace: the newest ones, and any about an object being deleted; at most this many
# pages of a namespace's Events are read to find them
EVENTS_KEPT = 500
EVENT_PAGES = 10
# objects being deleted (in an Active namespace: carrying a finalizer), listed as metadata, that are then
# read whole, per namespace: the rules read their status and conditions, and who last wrote them
# (`managedFields`: manager, operation, time)
FULL_READS = 100
# the namespace of the kubelets' heartbeat Leases: one per node, never a controller's
NODE_LEASES = "kube-node-lease"


# the types of a terminating namespace listed in full: the rules read the spec and status of pods
# (their node, their volumes, their phase and conditions); of every other type only the metadata
FULL_CONTENTS = frozenset({"pods"})


def trim(obj: KubeObject) -> KubeObject:
    """Drop what no rule reads and what weighs most: managed fields and annotations (last-applied copies
    among them); and the values snapshots (kept in the database) must never hold (`bot.domain.values`):
    a Secret's or ConfigMap's data (should a server send them although we asked for metadata only), and
    of every container (a pod's, a pod template's) its environment values, the values of its command
    line (flag names kept), its probes' and hooks' commands and header values; of annotations, those
    the rules read are kept (`KEPT_ANNOTATIONS`)."""
    without_values(obj)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return snapshot_safe(obj)


def trim_full(obj: KubeObject) -> KubeObject:
    """`trim`, keeping of `managedFields` who wrote what and when: each entry's manager, operation,
    time and subresource, and the top-level fields it owns (`f:status`, `f:spec`...), without the
    field sets themselves."""
    entries = meta(obj).get("managedFields")
    kept = [
        {
            **{k: e[k] for k in ("manager", "operation", "time", "subresource") if k in e},
            "fieldsV1": {k: {} for k in e.get("fieldsV1") or {} if isinstance(k, str)},
        }
        for e in entries or ()
        if isinstance(e, dict)
    ]
    trim(obj)
    if kept:
        obj["metadata"]["managedFields"] = kept
    return obj


def trim_lease(obj: KubeObject) -> KubeObject:
    m = meta(obj)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {k: m[k] for k in ("name", "namespace", "uid") if k in m},
        "spec": dict(obj.get("spec") or {}),
    }


_CONTAINER_KEYS = ("name", "image", "args", "command")
_WORKLOAD_STATUS_KEYS = ("replicas", "readyReplicas", "availableReplicas", "numberReady", "desiredNumberScheduled")


def trim_workload(obj: KubeObject, kind: str) -> KubeObject:
    """Only what controller attribution reads (`bot.diagnosis.controllers`, `catalogue.workload_text`,
    `reading`): identity (name, namespace, uid, labels), replicas, selector, the template's labels, its
    containers' names, images and command lines as flag names (`trim` reduced them already: this takes
    a listed item), readiness. Nothing else, in whichever namespace it runs: no annotations, no
    environment, no init containers, no volumes.

    A cluster can have thousands of workloads and a digest holds several clusters' at once, so the
    label map that the metadata, the selector and the pod template usually repeat is kept once and
    shared between them (snapshots are never changed after collection).
    """
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    pod_spec = template.get("spec") or {}
    containers = [{k: c[k] for k in _CONTAINER_KEYS if k in c} for c in pod_spec.get("containers") or ()]
    m = meta(obj)
    labels = m.get("labels")
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    if template_labels == labels:
        template_labels = labels
    selector = spec.get("selector")
    if isinstance(selector, dict) and "matchLabels" in selector and selector["matchLabels"] == template_labels:
        selector = {**selector, "matchLabels": template_labels}
    status = obj.get("status") or {}
    template_spec: dict[str, Any] = {"containers": containers}
    # who it runs as: RBAC's grants to that service account find a finalizer's controller (bot.diagnosis.owners)
    account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    if account:
        template_spec["serviceAccountName"] = account
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        # annotations: the ones `trim` kept (Helm's release)
        "metadata": {k: m[k] for k in ("name", "namespace", "uid", "labels", "annotations") if k in m},
        "spec": {
            "replicas": spec.get("replicas", 1),
            "selector": selector,
            "template": {"metadata": {"labels": template_labels}, "spec": template_spec},
        },
        "status": _workload_status(status),
    }


def _workload_status(status: KubeObject) -> KubeObject:
    """Readiness counts, and a Deployment's Available condition (since when it has been unavailable:
    `bot.diagnosis.controllers` calls a controller dead only after 10 minutes of it)."""
    out = {k: status[k] for k in _WORKLOAD_STATUS_KEYS if k in status}
    available = [
        {k: c[k] for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
        for c in status.get("conditions") or ()
        if isinstance(c, dict) and c.get("type") == "Available"
    ]
    if available:
        out["conditions"] = available
    return out


def trim_crd(obj: KubeObject) -> KubeObject:
    """CRDs without their (often huge) schemas."""
    spec = dict(obj.get("spec") or {})
    spec["versions"] = [{k: v[k] for k in ("name", "served", "storage") if k in v} for v in spec.get("versions") or ()]
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": trim(dict(obj.get("metadata") or {})),
        "spec": spec,
        "status": {"conditions": (obj.get("status") or {}).get("conditions") or []},
    }


# the sources of a PersistentVolume whose backend the rules follow (issue 37 §5), and what is kept of each:
# where an NFS server is, which CSI driver serves a volume; of any other source only its name
_VOLUME_SOURCE_KEYS = {"nfs": ("server", "path"), "csi": ("driver",)}


def trim_volume(obj: KubeObject) -> KubeObject:
    """A PersistentVolume reduced to what `bot.diagnosis.pod_volumes` reads: its identity and deletion, its
    claim, its source (an NFS server and path, a CSI driver; any other source by name alone: no volume
    handle, attributes or secret references) and its phase."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    kept: dict[str, Any] = {}
    for key, value in spec.items():
        if key in _VOLUME_SOURCE_KEYS and isinstance(value, dict):
            kept[key] = {k: value[k] for k in _VOLUME_SOURCE_KEYS[key] if k in value}
        elif isinstance(value, dict) and key not in ("claimRef", "capacity", "nodeAffinity", "mountOptions"):
            kept[key] = {}
    claim = spec.get("claimRef")
    if isinstance(claim, dict):
        kept["claimRef"] = {k: claim[k] for k in ("namespace", "name", "uid") if k in claim}
    if "storageClassName" in spec:
        kept["storageClassName"] = spec["storageClassName"]
    fields = ("name", "uid", "deletionTimestamp", "finalizers")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {k: m[k] for k in fields if k in m},
        "spec": kept,
        "status": {k: v for k, v in (obj.get("status") or {}).items() if k == "phase"},
    }


def trim_csi_node(obj: KubeObject) -> KubeObject:
    """A CSINode: its name and the names of the CSI drivers whose node plugin registered there."""
    drivers = [
        {"name": d["name"]} for d in (obj.get("spec") or {}).get("drivers") or () if isinstance(d, dict) and "name" in d
    ]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": meta(obj).get("name")},
        "spec": {"drivers": drivers},
    }


# the verbs with which a controller removes a finalizer (`*` included); RBAC reads keep only such grants
_UPDATE_VERBS = frozenset({"update", "patch", "*"})
_AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"


def trim_role(obj: KubeObject) -> KubeObject | None:
    """A ClusterRole or Role reduced to its rules that let update or patch resources named explicitly in
    groups named explicitly (no `*` in either, no resourceNames); None when it has none, or when it is
    aggregated (`aggregationRule`: its rules are its sources') or one of the user-facing pieces aggregated
    into admin, edit and view."""
    m = meta(obj)
    if obj.get("aggregationRule") or any(str(k).startswith(_AGGREGATE_TO) for k in m.get("labels") or {}):
        return None
    rules = []
    for rule in obj.get("rules") or ():
        if not isinstance(rule, dict) or rule.get("resourceNames"):
            continue
        groups = [str(g) for g in rule.get("apiGroups") or ()]
        verbs = [str(v) for v in rule.get("verbs") or () if v in _UPDATE_VERBS]
        resources = [str(r) for r in rule.get("resources") or () if "*" not in str(r)]
        if verbs and groups and "*" not in groups and resources:
            rules.append({"apiGroups": groups, "resources": resources, "verbs": verbs})
    if not rules:
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": obj.get("kind"),
        "metadata": {k: m[k] for k in ("name", "namespace", "uid") if k in m},
        "rules": rules,
    }


def trim_binding(obj: KubeObject) -> KubeObject | None:
    """A ClusterRoleBinding or RoleBinding reduced to its role and its ServiceAccount subjects; None without any."""
    m = meta(obj)
    subjects = [
        {"kind": "ServiceAccount", "name": s.get("name"), "namespace": s.get("namespace") or m.get("namespace")}
        for s in obj.get("subjects") or ()
        if isinstance(s, dict) and s.get("kind") == "ServiceAccount"
    ]
    ref = obj.get("roleRef") or {}
    if not subjects or not isinstance(ref, dict):
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": obj.get("kind"),
        "metadata": {k: m[k] for k in ("name", "namespace", "uid") if k in m},
        "roleRef": {"kind": ref.get("kind"), "name": ref.get("name")},
        "subjects": subjects,
    }


def trim_csv(obj: KubeObject) -> KubeObject | None:
    """An OLM ClusterServiceVersion reduced to the CRDs it owns and the deployments it installs; None when it
    owns none."""
    spec = obj.get("spec") or {}
    owned = [
        {k: o[k] for k in ("name", "version", "kind") if k in o}
        for o in (spec.get("customresourcedefinitions") or {}).get("owned") or ()
        if isinstance(o, dict) and o.get("name")
    ]
    if not owned:
        return None
    install = spec.get("install") or {}
    deployments = [
        {"name": d.get("name")}
        for d in (install.get("spec") or {}).get("deployments") or ()
        if isinstance(d, dict) and d.get("name")
    ]
    m = meta(obj)
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": "ClusterServiceVersion",
        "metadata": {k: m[k] for k in ("name", "namespace", "uid") if k in m},
        "spec": {
            "customresourcedefinitions": {"owned": owned},
            "install": {"strategy": install.get("strategy"), "spec": {"deployments": deployments}},
        },
        "status": {"phase": (obj.get("status") or {}).get("phase")},
    }


def _grants_on(role: KubeObject, types: set[tuple[str, str]]) -> bool:
    """Whether a trimmed role names one of these (group, resource) types, or its finalizers."""
    for rule in role.get("rules") or ():
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                if (group, str(resource).removesuffix("/finalizers")) in types:
                    return True
    return False


def _refusal(cluster: ClusterName, host: str, error: CallError) -> ClusterUnreachableError:
    """What a failed read of the cluster's namespaces means: unreachable, or not letting us in."""
    if error.status in (401, 403):
        return ClusterUnreachableError(f"cluster {cluster!r} ({host}) refuses our credentials: {error.message}")
    return ClusterUnreachableError(f"cluster {cluster!r} ({host}) is unreachable: {error.message}")


def _trim_listed_namespace(item: KubeObject) -> KubeObject:
    m = meta(item)
    phase = (item.get("status") or {}).get("phase")
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {k: m[k] for k in ("name", "uid", "deletionTimestamp", "finalizers") if k in m},
        "status": {"phase": phase} if phase is not None else {},
    }


def list_namespaces(transport: Transport, *, timeout: float | None = None) -> list[KubeObject]:
    """Every namespace of the cluster, trimmed to what a scan reads: name, uid, deletionTimestamp and
    finalizers in `metadata`, and `status.phase`.

    One GET of /api/v1/namespaces; a server that pages the answer anyway (`metadata.continue`) is
    followed with `limit=500`. Raises ClusterUnreachableError, as the collector's read of a namespace
    does: the server cannot be reached, refuses our credentials (401, 403), or answers anything else
    than the list.
    """
    connection = transport.connection
    items: list[KubeObject] = []
    query: dict[str, str] | None = None
    while True:
        try:
            doc = transport.get("/api/v1/namespaces", query, timeout=timeout, kind="NamespaceList")
        except CallError as e:
            raise _refusal(connection.target.name, connection.host, e) from None
        items.extend(_trim_listed_namespace(item) for item in doc["items"])
        token = (doc.get("metadata") or {}).get("continue")
        if not token:
            return items
        query = {"limit": "500", "continue": str(token)}


class Collector:
    def __init__(
        self,
        transport: Transport,
        *,
        cluster: ClusterName,
        options: CollectOptions | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.transport = transport
        self.cluster = cluster
        self.options = options or CollectOptions()
        self.clock = clock

    # -- calls -----------------------------------------------------------------------------------

    def _get(self, loop: _Loop, path: str, query: dict[str, str] | None = None, *, kind: str | None = None) -> Any:
        """A GET whose answer is judged (`bot.kube.answers`: an object of `kind` when given, a discovery
        document of its shape...) before it is handed over: a malformed one is a CallError, so a gap.
        The transport's retries (429, a 5xx or a dropped connection) stay within the deadline."""
        return self.transport.get(path, query, timeout=self.options.call_timeout, deadline=loop.deadline, kind=kind)

    def _get_discovery(self, loop: _Loop, path: str) -> tuple[Any, str]:
        """/api or /apis, asked for aggregated discovery first: the document and its Content-Type."""
        return self.transport.get_negotiated(
            path, accept=AGGREGATED_DISCOVERY, timeout=self.options.call_timeout, deadline=loop.deadline
        )

    def _list(
        self,
        loop: _Loop,
        path: str,
        query: dict[str, str] | None = None,
        max_pages: int | None = None,
        *,
        kind: str | None = None,
    ) -> list[KubeObject]:
        """All pages of a list (at most `max_pages`), each item trimmed and given its apiVersion and kind.
        Each page is judged as a list (`kind`, e.g. PodList, when given) before any item is taken."""
        items: list[KubeObject] = []
        params = dict(query or {})
        params["limit"] = str(self.options.page_size)
        pages = 0
        while True:
            pages += 1
            doc = self._get(loop, path, params, kind=kind)
            api_version = doc.get("apiVersion", "")
            item_kind = str(doc["kind"]).removesuffix("List")
            for item in doc["items"]:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", item_kind)
                items.append(trim(item))
            token = (doc.get("metadata") or {}).get("continue")
            if not token or (max_pages is not None and pages >= max_pages):
                return items
            params["continue"] = token

    def _list_metadata(self, loop: _Loop, path: str, rtype: ResourceType) -> list[KubeObject]:
        """All pages of a list as metadata only, each item given its type's apiVersion and kind.

        A server that cannot answer with metadata only (406: an aggregated API not built on the
        Kubernetes API server library) is asked once more for the whole objects, reduced to their
        metadata at once; never for Secrets and ConfigMaps, which the API server itself serves.
        """
        params = {"limit": str(self.options.page_size)}
        items: list[KubeObject] = []
        accept = METADATA_LIST
        while True:
            # the list judged as what was asked for: metadata only (or the type's own list, from a server that
            # ignores the Accept header), or, after a 406, the type's own list
            own = f"{rtype.kind}List"
            kind = ("PartialObjectMetadataList", own) if accept == METADATA_LIST else own
            try:
                doc = self.transport.get(
                    path, params, timeout=self.options.call_timeout, deadline=loop.deadline, accept=accept, kind=kind
                )
            except CallError as e:
                if e.status != 406 or accept != METADATA_LIST or is_value_resource(rtype.group, rtype.resource):
                    raise
                accept, params, items = JSON, {"limit": str(self.options.page_size)}, []
                continue
            for item in doc["items"]:
                items.append(trim(metadata_only(item, rtype.group_version, rtype.kind)))
            token = (doc.get("metadata") or {}).get("continue")
            if not token:
                return items
            params["continue"] = token

    def _pool(self, deadline: float) -> _Calls:
        # a call ends at the deadline (its timeout is what is left of it) unless its server trickles
        return _Calls(self.options.workers, wait_until=deadline + LATE_CALL_GRACE)

    # -- the snapshot ----------------------------------------------------------------------------

    def collect(self, namespace: str) -> NamespaceSnapshot:
        started = time.monotonic()
        observed_at = self.clock()
        deadline = started + self.options.deadline
        with self._pool(deadline) as pool:
            loop = _Loop(pool, deadline, self.options.progress, budget=self.options.deadline)
            run = _Run(self, loop, [])
            # discovery's first two documents are asked for while the namespace is read: whatever it
            # is, a collection starts with them (a missing namespace, or an Active one not predicted,
            # wastes these two GETs); their answers are taken once the namespace is known
            run.discover()
            namespace_object, read_gaps = self._read_namespace(namespace, deadline)
            base = NamespaceSnapshot(
                cluster=self.cluster,
                namespace=namespace,
                observed_at=observed_at,
                namespace_object=namespace_object,
                gaps=read_gaps,
            )
            if namespace_object is None:
                pool.shutdown()
                return base
            if deletion_time(namespace_object) is None:
                if not self.options.predict:
                    pool.shutdown()
                    return base
                base = replace(base, for_prediction=True)
            run.add_namespaces([base])
            snapshots = run.collect()
            pool.shutdown()
        return snapshots[namespace]

    def collect_many(self, namespaces: Sequence[str]) -> dict[str, NamespaceSnapshot]:
        """For each namespace, the snapshot `collect(namespace)` would give, from one collection.

        The cluster-scoped calls (discovery, APIServices, CRDs, webhook configurations, cluster-wide
        workloads, the Services behind them, nodes) are made once for all the namespaces; the
        namespaced lists once per namespace collected; all of it on one pool within one deadline.
        Raises ClusterUnreachableError, as `collect` would, if the read of any namespace fails (the
        first such namespace in the order given); `collect_each` reports that per namespace instead.
        """
        outcomes = self.collect_each(namespaces)
        snapshots: dict[str, NamespaceSnapshot] = {}
        for name, outcome in outcomes.items():
            if isinstance(outcome, ClusterUnreachableError):
                raise outcome from None
            snapshots[name] = outcome
        return snapshots

    def collect_each(self, namespaces: Sequence[str]) -> dict[str, NamespaceSnapshot | ClusterUnreachableError]:
        """`collect_many`, where a namespace whose read fails maps to the error `collect` would raise for it.

        The namespaces are read first, in parallel (a missing one gets the snapshot of a missing
        namespace, and an Active one without `options.predict` that of the namespace alone, as `collect`
        gives them); the rest is collected only for the others. Keys in the order given, without repeats.
        """
        names = list(dict.fromkeys(namespaces))
        if not names:
            return {}
        started = time.monotonic()
        observed_at = self.clock()
        host = self.transport.connection.host
        failed: dict[str, ClusterUnreachableError] = {}
        read: dict[str, KubeObject | None] = {}
        snapshots: dict[str, NamespaceSnapshot] = {}

        def on_read(name: str, doc: Any) -> None:
            read[name] = trim(doc)  # judged an object with metadata (`bot.kube.answers`)

        read_gaps: dict[str, tuple[Gap, ...]] = {}

        def on_read_error(name: str, error: CallError) -> None:
            if error.status == 404:
                read[name] = None
            elif error.status in (401, 403):
                failed[name] = _refusal(self.cluster, host, error)
            else:  # read from the list of namespaces instead, as `collect` does (`_read_namespace`)
                loop.add(
                    f"get namespace {name}",
                    partial(self._listed_namespace, name, deadline),
                    partial(on_listed, name, error),
                    partial(on_unlisted, name, error),
                )

        def on_unlisted(name: str, first: CallError, _: CallError) -> None:
            failed[name] = _refusal(self.cluster, host, first)

        def on_listed(name: str, first: CallError, found: KubeObject | None) -> None:
            read[name] = found
            read_gaps[name] = (_namespace_read_gap(name, first),)

        deadline = started + self.options.deadline
        with self._pool(deadline) as pool:
            loop = _Loop(pool, deadline, self.options.progress, budget=self.options.deadline)
            for name in names:
                loop.add(
                    f"get namespace {name}",
                    partial(self._get_namespace, name, deadline),
                    partial(on_read, name),
                    partial(on_read_error, name),
                )
            for label, _ in loop.run():
                name = label.removeprefix("get namespace ")
                late = CallError(CallKind.TIMEOUT, f"not answered within {self.options.deadline:g}s")
                failed[name] = _refusal(self.cluster, host, late)
            existing: list[NamespaceSnapshot] = []
            for name, namespace_object in read.items():
                base = NamespaceSnapshot(
                    cluster=self.cluster,
                    namespace=name,
                    observed_at=observed_at,
                    namespace_object=namespace_object,
                    gaps=read_gaps.get(name, ()),
                )
                if deletion_time(namespace_object or {}) is not None:
                    existing.append(base)
                elif namespace_object is not None and self.options.predict:
                    existing.append(replace(base, for_prediction=True))  # as `collect` collects it
                else:
                    snapshots[name] = base
            if existing:
                snapshots.update(_Run(self, loop, existing).collect())
            pool.shutdown()
        return {name: failed[name] if name in failed else snapshots[name] for name in names}

    def _read_namespace(self, namespace: str, deadline: float) -> tuple[KubeObject | None, tuple[Gap, ...]]:
        """The namespace (None: not found), and the gap its read left.

        Its GET is given half the deadline at most: should it fail otherwise than by a 404 or a refusal of
        our credentials (an answer in a shape it cannot have, too large, encoded, not in time, a server
        error), the namespace is read once more from the list of namespaces (by a field selector on its
        name), with what is left of the deadline, and the first failure is a gap of the report. Only when
        that fails too is the cluster unreachable."""
        host = self.transport.connection.host
        try:
            return trim(self._get_namespace(namespace, deadline)), ()
        except CallError as e:
            if e.status == 404:
                return None, ()
            if e.status in (401, 403):
                raise _refusal(self.cluster, host, e) from None
            first = e
        try:
            found = self._listed_namespace(namespace, deadline)
        except CallError:
            raise _refusal(self.cluster, host, first) from None
        return found, (_namespace_read_gap(namespace, first),)

    def _get_namespace(self, namespace: str, deadline: float) -> Any:
        """The GET of a namespace, judged a Namespace, in half the deadline at most (`_read_namespace`)."""
        timeout = min(self.options.call_timeout, self.options.deadline / 2)
        path = f"/api/v1/namespaces/{quote(namespace)}"
        return self.transport.get(path, timeout=timeout, deadline=deadline, kind="Namespace")

    def _listed_namespace(self, namespace: str, deadline: float) -> KubeObject | None:
        """The namespace as the list of namespaces gives it (a field selector on its name); None: not there."""
        listed = self.transport.get(
            "/api/v1/namespaces",
            {"fieldSelector": f"metadata.name={namespace}"},
            timeout=self.options.call_timeout,
            deadline=deadline,
            kind="NamespaceList",
        )
        found = next((item for item in listed["items"] if meta(item).get("name") == namespace), None)
        if found is None:
            return None
        found.setdefault("apiVersion", "v1")
        found.setdefault("kind", "Namespace")
        return trim(found)


class _Run:
    """The state of one collection for one or more terminating namespaces of a cluster (or one Active
    namespace, collected for a prediction).

    What is cluster-wide (discovery, APIServices, webhooks, CRDs, workloads, the Services behind
    them, node objects) is requested once and shared; what is namespaced (the lists of every type,
    the nodes of deleting pods, the CRD fallbacks, the gaps) is kept per namespace.
    """

    def __init__(self, collector: Collector, loop: _Loop, bases: Sequence[NamespaceSnapshot]) -> None:
        self.c = collector
        self.loop = loop
        self.namespaces: list[_Namespace] = []
        self.add_namespaces(bases)
        self.discovering = False
        self.group_versions: dict[str, GroupVersionStatus] = {}
        self.resource_types: list[ResourceType] = []
        self.apiservices: list[KubeObject] = []
        # per kind, joined in a fixed order at the end (the calls finish in any order)
        self.webhooks: dict[str, list[KubeObject]] = {}
        self.policies: dict[str, list[KubeObject]] = {}
        self.crds: list[KubeObject] = []
        self.workloads: dict[str, list[KubeObject]] = {}
        self.services: dict[tuple[str, str], KubeObject] = {}
        self.slices: list[KubeObject] = []
        self.endpoints: list[KubeObject] = []
        self.backend_pods: dict[str, KubeObject] = {}
        # the Services followed for every namespace, and the Services each backend pod was listed for
        self.shared_services: set[tuple[str, str]] = set()
        self.pod_services: dict[str, set[tuple[str, str]]] = {}
        # a node is read once for every namespace with a deleting pod on it
        self.node_results: dict[str, KubeObject | CallError] = {}
        self.node_waiters: dict[str, list[_Namespace]] = {}
        self.preferred: dict[str, str] = {"": "v1"}
        self.requested_services: set[tuple[str, str]] = set()
        self.discovery_errors: dict[str, CallError] = {}
        self.crds_loaded = False
        self.fallback_done: set[str] = set()
        self.server_version: dict[str, Any] | None = None
        self.leases: list[KubeObject] = []
        self.volume_attachments: list[KubeObject] = []
        # issue 37 §5: the PersistentVolumes (listed once, when a deleting pod past its grace mounts a claim;
        # None until answered) and the CSINodes of the nodes of such pods
        self.volumes: list[KubeObject] | None = None
        self.volumes_asked = False
        self.csi_nodes: dict[str, KubeObject | None] = {}
        self.csi_nodes_asked: set[str] = set()
        # the namespaces each of those reads is for (a read late at the deadline is a gap in them alone)
        self.volume_scope: list[_Namespace] = []
        self.csi_scope: dict[str, list[_Namespace]] = {}
        # the search for finalizers' controllers: the workload lists not answered yet (a finalizer is weighed
        # against the workloads), the namespaces that started it, what its cluster-wide reads gave
        self.workload_lists_left = len(_WORKLOADS)
        self.owner_namespaces: list[_Namespace] = []
        self.cluster_roles: list[KubeObject] = []
        self.cluster_role_bindings: list[KubeObject] = []
        self.csvs: list[KubeObject] = []
        # issue 38 §5: per GitOps owner kind, the cluster-wide list (asked once, when a mark asks for it), the
        # namespaces that asked (a failed or late read is a gap in them alone), and the gap of a failed read
        self.gitops_items: dict[OwnerKind, list[KubeObject]] = {}
        self.gitops_scope: dict[OwnerKind, list[_Namespace]] = {}
        self.gitops_failed: dict[OwnerKind, Gap] = {}

    def add_namespaces(self, bases: Sequence[NamespaceSnapshot]) -> None:
        """The namespaces collected (before `collect`, and before any answer is handed over by the loop)."""
        for base in bases:
            ns = _Namespace(base)
            if self.c.options.contents_from_conditions:
                ns.only = remaining_types(ns.base.namespace_object)
            self.namespaces.append(ns)

    def discover(self) -> None:
        """Ask for /api and /apis (once): what the rest of discovery, and the lists, follow from."""
        if self.discovering:
            return
        self.discovering = True
        loop = self.loop
        loop.add(
            "discovery of /api",
            lambda: self.c._get_discovery(loop, "/api"),
            self._on_core_versions,
            self.gap("discovery of /api"),
        )
        loop.add(
            "discovery of /apis",
            lambda: self.c._get_discovery(loop, "/apis"),
            self._on_groups,
            self.gap("discovery of /apis"),
        )

    def gap(self, what: str) -> Callable[[CallError], None]:
        """A failed cluster-wide call: a gap in every namespace."""

        def record(error: CallError) -> None:
            for ns in self.namespaces:
                ns.gaps.append(Gap(what=what, reason=_reason(error), detail=error.message))

        return record

    def collect(self) -> dict[str, NamespaceSnapshot]:
        loop = self.loop
        self.discover()
        # a call's label is the name of its gap, whether it fails or does not finish in time
        loop.add(
            "list apiservices (cluster-wide)",
            lambda: self.c._list(loop, "/apis/apiregistration.k8s.io/v1/apiservices", kind="APIServiceList"),
            self._on_apiservices,
            self.gap("list apiservices (cluster-wide)"),
        )
        for path, kind in _WEBHOOKS:
            what = f"list {kind}s"
            call = partial(self.c._list, loop, path, kind=f"{kind}List")
            loop.add(what, call, self._on_webhooks(kind), self.gap(what))
        for path, kind in _POLICIES:
            what = f"list {path.rpartition('/')[2]}"
            call = partial(self.c._list, loop, path, kind=f"{kind}List")
            loop.add(what, call, self._on_policies(kind), self.optional_gap(what))
        loop.add(
            "list customresourcedefinitions",
            lambda: self.c._list(
                loop, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kind="CustomResourceDefinitionList"
            ),
            self._on_crds,
            self.gap("list customresourcedefinitions"),
        )
        for path, kind in _WORKLOADS:
            what = f"list {kind.lower()}s (cluster-wide workloads)"
            call = partial(self.c._list, loop, path, kind=f"{kind}List")
            loop.add(what, call, self._on_workloads(kind), self._workloads_failed(what))
        loop.add("get /version", lambda: self.c._get(loop, "/version"), self._on_version, self.gap("get /version"))
        loop.add(
            "list leases (cluster-wide)",
            lambda: self.c._list(
                loop,
                "/apis/coordination.k8s.io/v1/leases",
                {"fieldSelector": f"metadata.namespace!={NODE_LEASES}"},
                kind="LeaseList",
            ),
            lambda items: self.leases.extend(trim_lease(i) for i in items),
            self.optional_gap("list leases (cluster-wide)"),
        )
        loop.add(
            "list volumeattachments",
            lambda: self.c._list(loop, "/apis/storage.k8s.io/v1/volumeattachments", kind="VolumeAttachmentList"),
            self.volume_attachments.extend,
            self.optional_gap("list volumeattachments"),
        )
        for ns in self.namespaces:
            self._list_events(ns)
            if ns.base.namespace_object is not None:
                self._want_gitops(ns, marked_kinds(ns.base.namespace_object))
        late = loop.run()
        deadline = self.c.options.deadline
        for label, scope in late:
            for ns in self.namespaces if scope is None else scope:
                ns.gaps.append(Gap(what=label, reason="timeout", detail=not_finished(deadline)))
        for ns in self.namespaces:
            for gv, error in self.discovery_errors.items():
                if error.malformed or error.kind is not CallKind.STATUS:
                    # an answer not to believe (bot.kube.answers), refused, cut off or not in time: a gap,
                    # whatever else was read (an error the server said is the namespace controller's too)
                    pass
                elif ns.fallback_complete.get(gv) or gv.rpartition("/")[0] in STATELESS_GROUPS:
                    continue  # nothing of it can be missing from our picture of the namespace
                ns.gaps.append(
                    Gap(what=f"resources of {gv}", reason=_reason(error), detail=f"discovery failed: {error}")
                )
        shared: dict[str, Any] = {
            "group_versions": tuple(sorted(self.group_versions.values(), key=lambda g: g.group_version)),
            "resource_types": tuple(sorted(self.resource_types, key=lambda t: t.key)),
            "apiservices": tuple(self.apiservices),
            "webhook_configurations": tuple(o for _, kind in _WEBHOOKS for o in self.webhooks.get(kind, ())),
            "admission_policies": tuple(o for _, kind in _POLICIES for o in self.policies.get(kind, ())),
            "crds": tuple(self.crds),
            "workloads": tuple(o for _, kind in _WORKLOADS for o in self.workloads.get(kind, ())),
            "server_version": self.server_version,
            "leases": tuple(sorted(self.leases, key=_namespaced_name)),
        }
        return {
            ns.name: replace(
                ns.base,
                contents=dict(sorted(ns.contents.items())),
                nodes=dict(sorted(ns.nodes.items())),
                events=tuple(_kept_events(ns)),
                volume_attachments=tuple(self._attachments_of(ns)),
                persistent_volumes=tuple(self._volumes_of(ns)),
                csi_nodes={n: self.csi_nodes[n] for n in sorted(self.csi_nodes) if n in ns.csi_nodes},
                **self._services_of(ns),
                gaps=tuple(sorted(ns.gaps, key=lambda g: (g.what, g.reason, g.detail))),
                **self._owners_of(ns),
                **self._gitops_of(ns),
                **shared,
            )
            for ns in self.namespaces
        }

    def optional_gap(self, what: str) -> Callable[[CallError], None]:
        """A cluster-wide call whose API an older server may not have (404): nothing to see, not a gap."""
        record = self.gap(what)
        return lambda e: None if e.status == 404 else record(e)

    def _on_version(self, doc: Any) -> None:
        if isinstance(doc, dict):
            self.server_version = {k: v for k, v in doc.items() if isinstance(v, str)}

    def _list_events(self, ns: _Namespace, *, core: bool = False) -> None:
        """The namespace's Events: events.k8s.io/v1, or core v1 on a server without it."""
        loop = self.loop
        root = "/api/v1" if core else "/apis/events.k8s.io/v1"
        path = f"{root}/namespaces/{quote(ns.name)}/events"
        what = f"list events in {ns.name}"

        def failed(error: CallError) -> None:
            if error.status == 404 and not core:
                self._list_events(ns, core=True)
            else:
                ns.gaps.append(Gap(what=what, reason=_reason(error), detail=error.message))

        call = partial(self.c._list, loop, path, None, EVENT_PAGES, kind="EventList")
        loop.add(what, call, ns.events.extend, failed, (ns,))

    def _attachments_of(self, ns: _Namespace) -> list[KubeObject]:
        """The VolumeAttachments on the nodes of the namespace's deleting pods or of its claims' volumes."""
        volumes = {
            str((claim.get("spec") or {}).get("volumeName"))
            for claim in ns.contents.get("persistentvolumeclaims", ())
            if (claim.get("spec") or {}).get("volumeName")
        }
        return sorted(
            (
                a
                for a in self.volume_attachments
                if (a.get("spec") or {}).get("nodeName") in ns.requested_nodes
                or ((a.get("spec") or {}).get("source") or {}).get("persistentVolumeName") in volumes
            ),
            key=_namespaced_name,
        )

    # -- discovery -------------------------------------------------------------------------------

    def _discover(self, path: str, group_version: str, *, aggregated: str | None = None) -> None:
        """The per-version document: the only view under legacy discovery; for a version aggregated
        discovery lists as Stale (`aggregated` names the apidiscovery version), the second opinion."""
        loop = self.loop
        stale = {"aggregated": aggregated, "freshness": "Stale"} if aggregated else {}

        def failed(error: CallError) -> None:
            raw = error.body if error.body and not error.body.lstrip().startswith("{") else None
            self.group_versions[group_version] = GroupVersionStatus(
                group_version,
                available=False,
                status_code=error.status,
                error=error.message,
                body=raw,
                legacy_answered=False if aggregated else None,
                **stale,
            )
            self.discovery_errors[group_version] = error
            self._fallback_to_crds(group_version)

        def answered(doc: Any) -> None:
            if aggregated:
                # the namespace controller reads aggregated discovery and fails on the Stale version,
                # whatever this document says; its resources are still ours to list
                self.group_versions[group_version] = GroupVersionStatus(
                    group_version,
                    available=False,
                    status_code=200,
                    error=f"stale GroupVersion discovery: {group_version}",
                    legacy_answered=True,
                    **stale,
                )
            self._on_resources(group_version, doc, record=not aggregated)

        loop.add(f"discovery of {group_version}", lambda: self.c._get(loop, path), answered, failed)

    @staticmethod
    def _aggregated_version(content_type: str) -> str | None:
        """The apidiscovery.k8s.io version of an APIGroupDiscoveryList answer, None for a legacy one."""
        params = dict(p.strip().split("=", 1) for p in content_type.split(";")[1:] if "=" in p)
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            return params.get("v") or "v2"
        return None

    def _on_aggregated(self, doc: Any, version: str) -> None:
        """An APIGroupDiscoveryList: Current versions give their resources at once; Stale ones fail, as
        they do for the namespace controller, and their per-version document is asked as a second
        opinion (the evidence chain of a failing group version)."""
        for item in doc["items"]:  # judged: an APIGroupDiscoveryList whose items are objects
            group = str(_field(item.get("metadata"), "name") or "")
            versions = [v for v in _listed(item.get("versions")) if isinstance(v, dict)]
            if versions:  # listed in preference order
                self.preferred[group] = str(versions[0].get("version") or "")
            for entry in versions:
                name = str(entry.get("version") or "")
                gv = f"{group}/{name}" if group else name
                if entry.get("freshness") == "Stale":
                    self._discover(f"/apis/{gv}" if group else f"/api/{name}", gv, aggregated=version)
                    continue
                self.group_versions[gv] = GroupVersionStatus(
                    gv, available=True, aggregated=version, freshness=str(entry.get("freshness") or "Current")
                )
                resources = [
                    {
                        "name": str(r.get("resource") or ""),
                        "kind": str(_field(r.get("responseKind"), "kind") or ""),
                        "namespaced": r.get("scope") == "Namespaced",
                        "verbs": list(_listed(r.get("verbs"))),
                    }
                    for r in _listed(entry.get("resources"))
                    if isinstance(r, dict) and r.get("resource")
                ]
                self._on_resources(gv, {"resources": resources}, record=False)

    def _on_core_versions(self, answer: tuple[Any, str]) -> None:
        doc, content_type = answer
        version = self._aggregated_version(content_type)
        if version:
            self._on_aggregated(doc, version)
            return
        for core_version in doc["versions"]:  # judged: an APIVersions whose versions are strings
            self._discover(f"/api/{core_version}", str(core_version))

    def _on_groups(self, answer: tuple[Any, str]) -> None:
        doc, content_type = answer
        aggregated = self._aggregated_version(content_type)
        if aggregated:
            self._on_aggregated(doc, aggregated)
            return
        for group in doc["groups"]:  # judged: an APIGroupList whose groups are named objects
            name = str(group["name"])
            preferred = _field(group.get("preferredVersion"), "version")
            versions = [
                str(v["version"]) for v in _listed(group.get("versions")) if isinstance(v, dict) and v.get("version")
            ]
            if preferred or versions:
                self.preferred[name] = str(preferred or versions[0])
            for version in versions:
                self._discover(f"/apis/{name}/{version}", f"{name}/{version}")

    def _on_resources(self, group_version: str, doc: Any, *, record: bool = True) -> None:
        if record:
            self.group_versions[group_version] = GroupVersionStatus(group_version, available=True, status_code=200)
        group, _, version = group_version.rpartition("/")
        if self.preferred.get(group) != version:
            return
        for resource in doc["resources"]:  # judged: an APIResourceList whose resources are named objects
            name = str(resource["name"])
            verbs = tuple(str(v) for v in _listed(resource.get("verbs")))
            if "/" in name or not resource.get("namespaced") or "list" not in verbs:
                continue
            rtype = ResourceType(group, version, name, str(resource.get("kind", "")), True, verbs)
            self.resource_types.append(rtype)
            for ns in self.namespaces:
                if ns.lists(rtype):
                    self._list_contents(ns, rtype, self._content_failed(ns, rtype))

    def _list_contents(self, ns: _Namespace, rtype: ResourceType, failed: Callable[[CallError], None]) -> None:
        base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
        path = f"{base}/namespaces/{quote(ns.name)}/{rtype.resource}"
        if rtype.key in FULL_CONTENTS:
            call = partial(self.c._list, self.loop, path, kind=f"{rtype.kind}List")
        else:
            call = partial(self.c._list_metadata, self.loop, path, rtype)
        self.loop.add(
            f"list {rtype.key} in {ns.name}",
            call,
            partial(self._on_contents, ns, rtype),
            failed,
            (ns,),
        )

    def _content_failed(self, ns: _Namespace, rtype: ResourceType) -> Callable[[CallError], None]:
        def failed(error: CallError) -> None:
            if error.status in (404, 405):
                return  # the type went away or cannot be listed: nothing of it can hold the namespace
            ns.gaps.append(Gap(what=f"list {rtype.key} in {ns.name}", reason=_reason(error), detail=error.message))

        return failed

    def _on_contents(self, ns: _Namespace, rtype: ResourceType, items: list[KubeObject]) -> None:
        if items:
            ns.contents[rtype.key] = tuple(items)
            self._note_finalizers(ns, rtype, items)
            self._want_gitops(ns, {kind for item in items for kind in marked_kinds(item)})
        if rtype.key not in FULL_CONTENTS and not is_value_resource(rtype.group, rtype.resource):
            for index, item in enumerate(items):
                if ns.full_reads < FULL_READS and ns.watched(item):  # the count first: it is cheaper
                    ns.full_reads += 1
                    self._read_whole(ns, rtype, index, str(meta(item).get("name", "")))
        if rtype.key == "pods":
            for pod in items:
                node = (pod.get("spec") or {}).get("nodeName")
                if node and ns.wants_node(pod) and node not in ns.requested_nodes:
                    ns.requested_nodes.add(node)
                    self._want_node(ns, str(node))
                if node:
                    self._want_volumes(ns, pod, str(node))

    def _read_whole(self, ns: _Namespace, rtype: ResourceType, index: int, name: str) -> None:
        """Read a watched object whole (its status, conditions and managers), in place of its metadata."""
        base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
        path = f"{base}/namespaces/{quote(ns.name)}/{rtype.resource}/{quote(name)}"
        what = f"get {rtype.key} {ns.name}/{name}"

        def answered(obj: Any) -> None:
            listed = list(ns.contents.get(rtype.key, ()))
            if not isinstance(obj, dict) or index >= len(listed) or meta(listed[index]).get("name") != name:
                return
            obj.setdefault("apiVersion", rtype.group_version)
            obj.setdefault("kind", rtype.kind)
            listed[index] = trim_full(obj)
            ns.contents[rtype.key] = tuple(listed)

        def failed(error: CallError) -> None:
            if error.status != 404:  # gone since the list: the metadata read is the last word on it
                ns.gaps.append(Gap(what=what, reason=_reason(error), detail=error.message))

        self.loop.add(what, partial(self.c._get, self.loop, path, kind=rtype.kind), answered, failed, (ns,))

    def _want_node(self, ns: _Namespace, node: str) -> None:
        if node in self.node_results:
            self._give_node(ns, node, self.node_results[node])
            return
        waiters = self.node_waiters.get(node)
        if waiters is not None:
            waiters.append(ns)
            return
        self.node_waiters[node] = waiters = [ns]

        def answered(result: KubeObject | CallError) -> None:
            self.node_results[node] = result
            for waiting in self.node_waiters.pop(node, ()):
                self._give_node(waiting, node, result)

        self.loop.add(
            f"get node {node}",
            partial(self.c._get, self.loop, f"/api/v1/nodes/{quote(node)}", kind="Node"),
            lambda obj: answered(trim(obj)),
            answered,
            waiters,
        )

    @staticmethod
    def _give_node(ns: _Namespace, node: str, result: KubeObject | CallError) -> None:
        if not isinstance(result, CallError):
            ns.nodes[node] = result
        elif result.status == 404:
            ns.nodes[node] = None
        else:
            ns.gaps.append(Gap(what=f"get node {node}", reason=_reason(result), detail=result.message))

    # -- the volumes of pods their kubelet has not finished (issue 37 §5) -------------------------

    def _want_volumes(self, ns: _Namespace, pod: KubeObject, node: str) -> None:
        """For a deleting pod past its grace period in a terminating namespace: what its volumes need to be
        torn down (an NFS server's Service and pods, the CSI driver's node plugin on its node, the
        PersistentVolumes behind its claims). Read for those pods only, in parallel with the rest: the list of
        PersistentVolumes and the CSINodes go before the calls queued (`_Calls`)."""
        deleted = deletion_time(pod)
        if ns.active or deleted is None or deleted > ns.base.observed_at:
            return
        claims: list[str] = []
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            if not isinstance(volume, dict):
                continue
            nfs, csi = volume.get("nfs"), volume.get("csi")
            if isinstance(nfs, dict):
                self._follow_nfs(str(nfs.get("server") or ""), [ns])
            if isinstance(csi, dict):
                self._want_csi_node(node, [ns])
            claim = volume.get("persistentVolumeClaim")
            if isinstance(claim, dict) and claim.get("claimName"):
                claims.append(str(claim["claimName"]))
            elif isinstance(volume.get("ephemeral"), dict):
                claims.append(f"{meta(pod).get('name')}-{volume.get('name')}")
        if not claims:
            return
        for claim_name in claims:
            ns.claims.setdefault(claim_name, set()).add(node)
        if ns not in self.volume_scope:
            self.volume_scope.append(ns)
        if self.volumes is not None:
            for pv in self.volumes:
                self._follow_volume(pv)
        elif not self.volumes_asked:
            self.volumes_asked = True
            self.loop.add(
                "list persistentvolumes",
                partial(self.c._list, self.loop, "/api/v1/persistentvolumes", kind="PersistentVolumeList"),
                self._on_volumes,
                self._volumes_failed,
                self.volume_scope,
                first=True,  # decided on when the pods answer, often with a CRD-heavy namespace's lists queued
            )

    def _claimed_by(self, pv: KubeObject) -> tuple[list[_Namespace], set[str]]:
        """The namespaces collected whose deleting pods mount the claim bound to `pv`, and those pods' nodes."""
        claim = (pv.get("spec") or {}).get("claimRef") or {}
        name = str(claim.get("name"))
        wanting = [ns for ns in self.namespaces if claim.get("namespace") == ns.name and name in ns.claims]
        return wanting, {node for ns in wanting for node in ns.claims[name]}

    def _volumes_failed(self, error: CallError) -> None:
        """A gap in the namespaces whose deleting pods mount a claim (a server without the API: none)."""
        if error.status == 404:
            return
        for ns in self.namespaces:
            if ns.claims:
                ns.gaps.append(Gap(what="list persistentvolumes", reason=_reason(error), detail=error.message))

    def _on_volumes(self, items: list[KubeObject]) -> None:
        self.volumes = [trim_volume(pv) for pv in items]
        for pv in self.volumes:
            self._follow_volume(pv)

    def _follow_volume(self, pv: KubeObject) -> None:
        wanting, nodes = self._claimed_by(pv)
        if not nodes:
            return
        spec = pv.get("spec") or {}
        if isinstance(spec.get("nfs"), dict):
            self._follow_nfs(str(spec["nfs"].get("server") or ""), wanting)
        if isinstance(spec.get("csi"), dict):
            for node in sorted(nodes):
                self._want_csi_node(node, [ns for ns in wanting if any(node in n for n in ns.claims.values())])

    def _follow_nfs(self, server: str, wanting: Sequence[_Namespace]) -> None:
        service = service_of_address(server)
        if service is not None:
            self._follow_service(*service, for_namespaces=wanting)

    def _want_csi_node(self, node: str, wanting: Sequence[_Namespace]) -> None:
        scope = self.csi_scope.setdefault(node, [])
        for ns in wanting:
            ns.csi_nodes.add(node)
            if ns not in scope:
                scope.append(ns)
        if node in self.csi_nodes_asked:
            return
        self.csi_nodes_asked.add(node)

        def answered(obj: Any) -> None:
            self.csi_nodes[node] = trim_csi_node(obj)

        def failed(error: CallError) -> None:
            if error.status == 404:
                self.csi_nodes[node] = None  # no CSI node plugin ever registered on it
                return
            for ns in self.namespaces:
                if node in ns.csi_nodes:
                    ns.gaps.append(Gap(what=f"get csinode {node}", reason=_reason(error), detail=error.message))

        self.loop.add(
            f"get csinode {node}",
            partial(self.c._get, self.loop, f"/apis/storage.k8s.io/v1/csinodes/{quote(node)}", kind="CSINode"),
            answered,
            failed,
            scope,
            first=True,
        )

    def _volumes_of(self, ns: _Namespace) -> list[KubeObject]:
        return sorted(
            (
                pv
                for pv in self.volumes or ()
                if ((pv.get("spec") or {}).get("claimRef") or {}).get("namespace") == ns.name
                and str(((pv.get("spec") or {}).get("claimRef") or {}).get("name")) in ns.claims
            ),
            key=_namespaced_name,
        )

    # -- cluster-wide context --------------------------------------------------------------------

    def _on_apiservices(self, items: list[KubeObject]) -> None:
        self.apiservices = items
        for item in items:
            service = (item.get("spec") or {}).get("service") or {}
            if service:
                self._follow_service(str(service.get("namespace", "")), str(service.get("name", "")))

    def _on_webhooks(self, kind: str) -> Callable[[list[KubeObject]], None]:
        def handle(items: list[KubeObject]) -> None:
            for item in items:
                item["kind"] = kind
                self.webhooks.setdefault(kind, []).append(item)
                for webhook in item.get("webhooks") or ():
                    service = (webhook.get("clientConfig") or {}).get("service") or {}
                    if service:
                        self._follow_service(str(service.get("namespace", "")), str(service.get("name", "")))

        return handle

    def _on_policies(self, kind: str) -> Callable[[list[KubeObject]], None]:
        def handle(items: list[KubeObject]) -> None:
            for item in items:
                item["kind"] = kind
                self.policies.setdefault(kind, []).append(item)

        return handle

    def _fallback_to_crds(self, group_version: str) -> None:
        """Discovery of a group version failed: list the types its CRDs define anyway.

        The namespace controller cannot (it goes by discovery), but our evidence can: the objects
        of those types are what the failing group would hide.
        """
        if not self.crds_loaded or group_version in self.fallback_done:
            return
        self.fallback_done.add(group_version)
        group, _, version = group_version.rpartition("/")
        types = []
        for crd in self.crds:
            spec = crd.get("spec") or {}
            served = [v.get("name") for v in spec.get("versions") or () if v.get("served", True)]
            if spec.get("group") != group or version not in served or spec.get("scope") != "Namespaced":
                continue
            names = spec.get("names") or {}
            types.append(
                ResourceType(group, version, str(names.get("plural")), str(names.get("kind")), True, ("list",))
            )
        if not types:
            return
        self.resource_types.extend(types)
        for ns in self.namespaces:
            ns.fallback_complete[group_version] = True
            for rtype in types:
                if ns.lists(rtype):
                    self._list_contents(ns, rtype, self._fallback_failed(ns, rtype, group_version))

    def _fallback_failed(self, ns: _Namespace, rtype: ResourceType, group_version: str) -> Callable[[CallError], None]:
        def failed(error: CallError) -> None:
            ns.fallback_complete[group_version] = False
            self._content_failed(ns, rtype)(error)

        return failed

    def _on_crds(self, items: list[KubeObject]) -> None:
        self.crds_loaded = True
        for item in items:
            crd = trim_crd(item)
            self.crds.append(crd)
            conversion = (crd.get("spec") or {}).get("conversion") or {}
            service = (((conversion.get("webhook") or {}).get("clientConfig")) or {}).get("service") or {}
            if conversion.get("strategy") == "Webhook" and service:
                self._follow_service(str(service.get("namespace", "")), str(service.get("name", "")))
        for group_version in list(self.discovery_errors):
            self._fallback_to_crds(group_version)

    def _on_workloads(self, kind: str) -> Callable[[list[KubeObject]], None]:
        def handle(items: list[KubeObject]) -> None:
            self.workloads.setdefault(kind, []).extend(trim_workload(i, kind) for i in items)
            self._workload_list_done()

        return handle

    def _on_service_pods(self, key: tuple[str, str], pods: list[KubeObject]) -> None:
        for pod in pods:
            pod_key = f"{key[0]}/{meta(pod).get('name')}"
            self.backend_pods[pod_key] = pod
            self.pod_services.setdefault(pod_key, set()).add(key)

    def _service_gap(self, key: tuple[str, str], what: str) -> Callable[[CallError], None]:
        """A failed read of a Service's chain: a gap in every namespace whose snapshot holds that Service."""

        def record(error: CallError) -> None:
            for ns in self.namespaces:
                if key in self.shared_services or key in ns.services:
                    ns.gaps.append(Gap(what=what, reason=_reason(error), detail=error.message))

        return record

    def _services_of(self, ns: _Namespace) -> dict[str, Any]:
        """The Services (with their EndpointSlices, Endpoints and pods) a namespace's snapshot holds."""
        keys = self.shared_services | ns.services
        return {
            "services": tuple(self.services[k] for k in sorted(self.services) if k in keys),
            "endpoint_slices": tuple(
                sorted(
                    (
                        s
                        for s in self.slices
                        if (str(meta(s).get("namespace", "")), labels_of(s).get("kubernetes.io/service-name", ""))
                        in keys
                    ),
                    key=_namespaced_name,
                )
            ),
            "endpoints": tuple(
                sorted((e for e in self.endpoints if _namespaced_name(e) in keys), key=_namespaced_name)
            ),
            "backend_pods": tuple(
                self.backend_pods[k] for k in sorted(self.backend_pods) if self.pod_services.get(k, set()) & keys
            ),
        }

    def _workloads_failed(self, what: str) -> Callable[[CallError], None]:
        record = self.gap(what)

        def failed(error: CallError) -> None:
            record(error)
            self._workload_list_done()

        return failed

    def _workload_list_done(self) -> None:
        self.workload_lists_left -= 1
        if not self.workload_lists_left:
            for ns in self.namespaces:
                self._weigh_owners(ns)

    # -- finding finalizers' controllers in the cluster (bot.diagnosis.owners) ---------------------

    def _note_finalizers(self, ns: _Namespace, rtype: ResourceType, items: list[KubeObject]) -> None:
        """The finalizers of watched objects, to weigh whether their controllers are searched for."""
        if self.c.options.owner_search is None or ns.owner_search:
            return
        for item in items:
            if not ns.watched(item):
                continue
            for finalizer in finalizers_of(item):
                if finalizer not in ns.owner_weighed:
                    ns.owner_weighed.add(finalizer)
                    ns.owner_pending.append((finalizer, rtype.group))
        self._weigh_owners(ns)

    def _weigh_owners(self, ns: _Namespace) -> None:
        """Once the workloads are known, start the search if a pending finalizer asks for it."""
        search = self.c.options.owner_search
        if search is None or ns.owner_search or self.workload_lists_left or not ns.owner_pending:
            return
        workloads = tuple(o for _, kind in _WORKLOADS for o in self.workloads.get(kind, ()))
        pending, ns.owner_pending = ns.owner_pending, []
        if any(search(finalizer, group, workloads) for finalizer, group in pending):
            self._search_owners(ns)

    def _search_owners(self, ns: _Namespace) -> None:
        """RBAC (ClusterRoles and their bindings once, the namespace's Roles and RoleBindings) and OLM's
        ClusterServiceVersions, for a namespace with a finalizer whose controller nothing else finds. A failed
        read is a gap of the namespaces that searched (an older server without OLM: nothing to see). They are
        decided on when the first list with such a finalizer answers, often with a thousand lists still queued
        on a CRD-heavy cluster: they go first, so as to run beside those lists, not in a round after them."""
        ns.owner_search = True
        ns.owner_pending = []
        loop = self.loop
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        first = not self.owner_namespaces
        self.owner_namespaces.append(ns)
        scope = self.owner_namespaces  # the late calls are gaps of every namespace that searched

        def gap(what: str, *, optional: bool = False) -> Callable[[CallError], None]:
            def record(error: CallError) -> None:
                if optional and error.status == 404:
                    return
                for searching in scope:
                    searching.gaps.append(Gap(what=what, reason=_reason(error), detail=error.message))

            return record

        def kept(into: list[KubeObject], trimmer: Callable[[KubeObject], KubeObject | None]) -> Callable[..., None]:
            return lambda items: into.extend(t for i in items if (t := trimmer(i)) is not None)

        if first:
            for resource, kind, into, trimmer in (
                ("clusterroles", "ClusterRoleList", self.cluster_roles, trim_role),
                ("clusterrolebindings", "ClusterRoleBindingList", self.cluster_role_bindings, trim_binding),
            ):
                what = f"list {resource} (controller discovery)"
                call = partial(self.c._list, loop, f"{rbac}/{resource}", kind=kind)
                loop.add(what, call, kept(into, trimmer), gap(what), scope, first=True)
            what = "list clusterserviceversions (controller discovery)"
            call = partial(
                self.c._list,
                loop,
                "/apis/operators.coreos.com/v1alpha1/clusterserviceversions",
                {"labelSelector": "!olm.copiedFrom"},  # not the copies OLM makes in every namespace
                kind="ClusterServiceVersionList",
            )
            loop.add(what, call, kept(self.csvs, trim_csv), gap(what, optional=True), scope, first=True)
        for resource, kind, into, trimmer in (
            ("roles", "RoleList", ns.roles, trim_role),
            ("rolebindings", "RoleBindingList", ns.role_bindings, trim_binding),
        ):
            what = f"list {resource} in {ns.name} (controller discovery)"
            call = partial(self.c._list, loop, f"{rbac}/namespaces/{quote(ns.name)}/{resource}", kind=kind)
            loop.add(what, call, kept(into, trimmer), gap(what), (ns,), first=True)

    # -- GitOps owners (bot.diagnosis.gitops) -------------------------------------------------------

    def _want_gitops(self, ns: _Namespace, kinds: set[OwnerKind]) -> None:
        """List, once for the cluster, the owner kinds an object's marks ask for (an Application for Argo CD's
        tracking annotation or instance label, a Kustomization or HelmRelease for Flux's labels). A cluster
        without the CRD answers 404: nothing to see, not a gap; any other failure is a gap of the namespaces
        that asked."""
        for kind in sorted(kinds - ns.gitops_kinds, key=lambda k: k.resource):
            ns.gitops_kinds.add(kind)
            scope = self.gitops_scope.setdefault(kind, [])
            scope.append(ns)
            if kind in self.gitops_failed:
                ns.gaps.append(self.gitops_failed[kind])
            if len(scope) > 1:
                continue  # asked already
            what = f"list {kind.resource}.{kind.group} (GitOps owners)"

            def failed(error: CallError, kind: OwnerKind = kind, what: str = what) -> None:
                if error.status == 404:
                    return
                gap = Gap(what=what, reason=_reason(error), detail=error.message)
                self.gitops_failed[kind] = gap
                for asking in self.gitops_scope[kind]:
                    asking.gaps.append(gap)

            def answered(items: list[KubeObject], kind: OwnerKind = kind) -> None:
                self.gitops_items[kind] = sorted((trim_owner(i) for i in items), key=_namespaced_name)

            call = partial(self.c._list, self.loop, kind.path, kind=f"{kind.kind}List")
            self.loop.add(what, call, answered, failed, scope)

    def _gitops_of(self, ns: _Namespace) -> dict[str, Any]:
        if not ns.gitops_kinds:
            return {}
        kinds = [k for k in OWNER_KINDS if k in ns.gitops_kinds]
        return {
            "gitops_owners": tuple(o for k in kinds for o in self.gitops_items.get(k, ())),
            # the lists answered (a kind asked for and not here: its CRD is not installed, or the read is a gap)
            "gitops_reads": tuple(k.resource for k in kinds if k in self.gitops_items),
        }

    def _owners_of(self, ns: _Namespace) -> dict[str, Any]:
        """What the search read, for a namespace that searched: the roles that grant on the types of its watched
        objects, their bindings, and the ClusterServiceVersions that own those types' CRDs."""
        if not ns.owner_search:
            return {}
        keys = {t.key: t for t in self.resource_types}
        types = {
            (rtype.group, rtype.resource)
            for key, items in ns.contents.items()
            if (rtype := keys.get(key)) is not None and any(ns.watched(o) for o in items)
        }
        roles = [r for r in (*self.cluster_roles, *ns.roles) if _grants_on(r, types)]
        granted = {(str(r.get("kind")), str(meta(r).get("namespace") or ""), str(meta(r).get("name"))) for r in roles}
        bindings = []
        for binding in (*self.cluster_role_bindings, *ns.role_bindings):
            ref = binding.get("roleRef") or {}
            where = str(meta(binding).get("namespace") or "") if ref.get("kind") == "Role" else ""
            if (str(ref.get("kind")), where, str(ref.get("name"))) in granted:
                bindings.append(binding)
        crds = {f"{resource}.{group}" for group, resource in types}
        csvs = [
            c for c in self.csvs if any(o.get("name") in crds for o in c["spec"]["customresourcedefinitions"]["owned"])
        ]
        return {
            "roles": tuple(sorted(roles, key=lambda r: (str(r.get("kind")), *_namespaced_name(r)))),
            "role_bindings": tuple(sorted(bindings, key=lambda b: (str(b.get("kind")), *_namespaced_name(b)))),
            "cluster_service_versions": tuple(sorted(csvs, key=_namespaced_name)),
            "owner_reads": ("olm", "rbac"),
        }

    def _follow_service(self, namespace: str, name: str, *, for_namespaces: Sequence[_Namespace] | None = None) -> None:
        """Service -> EndpointSlices (or Endpoints) and the pods its selector picks. For every namespace
        collected (behind an APIService, a webhook, a conversion), or, `for_namespaces`, for those alone
        (an NFS server their pods' volumes need): the others' snapshots do not hold it, nor its gaps."""
        key = (namespace, name)
        if for_namespaces is None:
            self.shared_services.add(key)
        else:
            for wanting in for_namespaces:
                wanting.services.add(key)
        if not namespace or not name or key in self.requested_services:
            return
        self.requested_services.add(key)
        loop = self.loop
        ns = quote(namespace)
        selector = f"kubernetes.io/service-name={name}"

        def on_service(obj: Any) -> None:
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", "Service")
            self.services[key] = trim(obj)
            pod_selector = (obj.get("spec") or {}).get("selector") or {}
            if pod_selector:
                label_selector = ",".join(f"{k}={v}" for k, v in sorted(pod_selector.items()))
                loop.add(
                    f"list pods of service {namespace}/{name}",
                    lambda: self.c._list(
                        loop, f"/api/v1/namespaces/{ns}/pods", {"labelSelector": label_selector}, kind="PodList"
                    ),
                    partial(self._on_service_pods, key),
                    self._service_gap(key, f"list pods of service {namespace}/{name}"),
                )

        def optional(what: str) -> Callable[[CallError], None]:
            # a missing object or API (old clusters have no EndpointSlices) is evidence, not a gap
            return lambda e: None if e.status == 404 else self._service_gap(key, what)(e)

        loop.add(
            f"get service {namespace}/{name}",
            lambda: self.c._get(loop, f"/api/v1/namespaces/{ns}/services/{quote(name)}", kind="Service"),
            on_service,
            optional(f"get service {namespace}/{name}"),
        )
        loop.add(
            f"list endpointslices of service {namespace}/{name}",
            lambda: self.c._list(
                loop,
                f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                {"labelSelector": selector},
                kind="EndpointSliceList",
            ),
            self.slices.extend,
            optional(f"list endpointslices of service {namespace}/{name}"),
        )
        loop.add(
            f"get endpoints {namespace}/{name}",
            lambda: self.c._get(loop, f"/api/v1/namespaces/{ns}/endpoints/{quote(name)}", kind="Endpoints"),
            lambda obj: self.endpoints.append(trim(obj)),
            optional(f"get endpoints {namespace}/{name}"),
        )


def _namespace_read_gap(namespace: str, first: CallError) -> Gap:
    """The gap a failed read of the namespace leaves once the list of namespaces gave it instead."""
    detail = f"{first.message}; read from the list of namespaces instead"
    return Gap(what=f"get namespace {namespace}", reason=_reason(first), detail=detail)


def _field(node: Any, key: str) -> Any:
    """`node[key]` when `node` is an object, else None (a document's inner parts, as a server sent them)."""
    return node.get(key) if isinstance(node, dict) else None


def _listed(node: Any) -> list[Any]:
    """`node` when it is an array, else nothing."""
    return node if isinstance(node, list) else []


def _kept_events(ns: _Namespace) -> list[KubeObject]:
    """The newest EVENTS_KEPT Events of the namespace, and every one about an object being deleted (in an
    Active namespace: carrying a finalizer)."""
    if not ns.events:
        return []  # (not a walk over every object of a namespace of thousands for nothing)
    deleting = {
        str(meta(o).get("uid") or "") or f"{o.get('kind')}/{meta(o).get('name')}"
        for items in ns.contents.values()
        for o in items
        if ns.watched(o)
    }
    ordered = newest_first(ns.events)
    kept = []
    for i, event in enumerate(ordered):
        seen = event_view(event)
        if i < EVENTS_KEPT or (seen.uid or f"{seen.kind}/{seen.name}") in deleting:
            kept.append(event)
    return kept


def _namespaced_name(obj: KubeObject) -> tuple[str, str]:
    m = meta(obj)
    return (str(m.get("namespace", "")), str(m.get("name", "")))
