"""The object store: one lock, a global resourceVersion counter and a bounded event log for watches."""

from __future__ import annotations

import bisect
import json
import random
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

TYPE_META = ("apiVersion", "kind")
META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


OMIT_EMPTY = frozenset(
    {"labels", "annotations", "finalizers", "ownerReferences", "managedFields", "generateName", "namespace"}
)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def canonical(obj: dict[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata (keys in Go struct order), then the rest in their order."""
    out: dict[str, Any] = {}
    for k in TYPE_META:
        if k in obj:
            out[k] = obj[k]
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        # ObjectMeta's maps and lists are omitempty: an emptied one disappears, as in Go
        meta = {k: v for k, v in meta.items() if not (k in OMIT_EMPTY and not v)}
        m = {k: meta[k] for k in META_ORDER if k in meta}
        for k, v in meta.items():
            if k not in m:
                m[k] = v
        out["metadata"] = m
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    return out


@dataclass
class Entry:
    """A stored object. ``obj`` must never be mutated after storing; ``raw`` is its JSON."""

    obj: dict[str, Any]
    raw: bytes
    _item_raw: bytes | None = None

    def item_raw(self, strip_type_meta: bool) -> bytes:
        """The JSON of the object as a list item (built-in lists carry no apiVersion/kind per item)."""
        if not strip_type_meta:
            return self.raw
        if self._item_raw is None:
            self._item_raw = dumps({k: v for k, v in self.obj.items() if k not in TYPE_META})
        return self._item_raw

    def copy(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.raw)
        return out


@dataclass
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    key: tuple[str, str]
    namespace: str
    name: str
    entry: Entry


@dataclass
class Store:
    seed: int = 0
    max_events: int = 20000
    lock: threading.RLock = field(default_factory=threading.RLock)
    rv: int = 1000
    data: dict[tuple[str, str], dict[tuple[str, str], Entry]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    event_rvs: list[int] = field(default_factory=list)
    first_rv: int = 1000
    closed: bool = False

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)
        self.rng = random.Random(self.seed)

    # -- identity helpers (call with the lock held) ----------------------------------------------
    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def random_suffix(self, n: int = 5) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    # -- reads ----------------------------------------------------------------------------------
    def get(self, key: tuple[str, str], namespace: str, name: str) -> Entry | None:
        bucket = self.data.get(key)
        return bucket.get((namespace, name)) if bucket else None

    def items(self, key: tuple[str, str], namespace: str | None = None) -> list[Entry]:
        bucket = self.data.get(key)
        if not bucket:
            return []
        keys = sorted(bucket) if namespace is None else sorted(k for k in bucket if k[0] == namespace)
        return [bucket[k] for k in keys]

    def count_in_namespace(self, namespace: str) -> int:
        return sum(1 for b in self.data.values() for k in b if k[0] == namespace)

    # -- writes (call with the lock held) ---------------------------------------------------------
    def _emit(self, etype: str, key: tuple[str, str], *, namespace: str, name: str, entry: Entry, rv: int) -> None:
        self.events.append(Event(rv, etype, key, namespace, name, entry))
        self.event_rvs.append(rv)
        if len(self.events) > self.max_events:
            drop = len(self.events) - self.max_events // 2
            self.events = self.events[drop:]
            self.event_rvs = self.event_rvs[drop:]
            self.first_rv = self.event_rvs[0]
        self.cond.notify_all()

    def put(self, key: tuple[str, str], obj: dict[str, Any], *, created: bool) -> Entry:
        """Store ``obj`` (already prepared); bumps and sets its resourceVersion."""
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        obj = canonical(obj)
        entry = Entry(obj, dumps(obj))
        namespace = meta.get("namespace", "") or ""
        self.data.setdefault(key, {})[(namespace, meta["name"])] = entry
        self._emit(
            "ADDED" if created else "MODIFIED", key, namespace=namespace, name=meta["name"], entry=entry, rv=self.rv
        )
        return entry

    def remove(self, key: tuple[str, str], namespace: str, name: str) -> Entry | None:
        bucket = self.data.get(key)
        if not bucket or (namespace, name) not in bucket:
            return None
        old = bucket.pop((namespace, name))
        self.rv += 1
        last = old.copy()
        last["metadata"]["resourceVersion"] = str(self.rv)
        entry = Entry(last, dumps(last))
        self._emit("DELETED", key, namespace=namespace, name=name, entry=entry, rv=self.rv)
        return entry

    def drop_bucket(self, key: tuple[str, str]) -> None:
        self.data.pop(key, None)

    # -- watch ------------------------------------------------------------------------------------
    def events_after(self, rv: int) -> list[Event]:
        idx = bisect.bisect_right(self.event_rvs, rv)
        return self.events[idx:]

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.cond.notify_all()
