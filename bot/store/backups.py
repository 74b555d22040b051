"""Backups: each object exactly as it was read right before nsstuck changed it.

A Secret or a ConfigMap is read as metadata only (its values are never sent to nsstuck), so its backup
keeps its metadata (finalizers, labels, annotations, owner references), never its data; `add` drops
any value such an object carries all the same (`bot.domain.values`). Backups taken before that may hold
data: they are left as they are (rewriting them would break their sha256 and the audit trail's record
of it), and `nsstuck backup show` never prints their values.

Rows are append-only (triggers of migration 0003 refuse UPDATE and DELETE). Each keeps the sha256
of its object's canonical JSON, so a stored object that was edited afterwards is recognised
(`object_sha256(backup.object) != backup.sha256`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.domain.values import without_values
from bot.store.models import Backup, utcnow
from bot.store.records import BackupRecord, record_of

# metadata the API server sets, which `kubectl create` refuses or ignores
SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def canonical_json(obj: Any) -> str:
    """The form the sha256 is taken over: sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def object_sha256(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def recreatable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a Kubernetes object that `kubectl create -f` accepts: what the server sets is gone.

    Drops the server-set metadata above and `status`; keeps everything a person wrote (labels,
    annotations, finalizers, owner references, spec, data). The argument is left untouched.
    """
    result = copy.deepcopy(dict(obj))
    result.pop("status", None)
    metadata = result.get("metadata")
    if isinstance(metadata, dict):
        for key in SERVER_SET_METADATA:
            metadata.pop(key, None)
    return result


class BackupRepository:
    """Adds and reads backups inside the caller's session (never commits)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(
        self, request_id: int, cluster: str, obj: Mapping[str, Any], *, taken_at: datetime | None = None
    ) -> BackupRecord:
        """Keep `obj` (a Kubernetes object as JSON) for request `request_id`.

        The object needs apiVersion, kind and metadata.name; what is stored is its JSON form (the
        sha256 is over exactly that), so the database gives back what was hashed; of a Secret or a
        ConfigMap, without its values.
        """
        plain: dict[str, Any] = without_values(json.loads(json.dumps(obj)))
        metadata = plain.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        api_version, kind, name = plain.get("apiVersion"), plain.get("kind"), metadata.get("name")
        if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
            raise ValueError("a backup needs the object's apiVersion and kind")
        if not (isinstance(name, str) and name):
            raise ValueError("a backup needs the object's metadata.name")
        backup = Backup(
            request_id=request_id,
            cluster=cluster,
            api_version=api_version,
            kind=kind,
            namespace=_str_or_none(metadata.get("namespace")),
            name=name,
            uid=_str_or_none(metadata.get("uid")),
            resource_version=_str_or_none(metadata.get("resourceVersion")),
            taken_at=taken_at or utcnow(),
            object=plain,
            sha256=object_sha256(plain),
        )
        self._session.add(backup)
        self._session.flush()
        return record_of(BackupRecord, backup)

    def get(self, backup_id: int) -> BackupRecord | None:
        backup = self._session.get(Backup, backup_id)
        return None if backup is None else record_of(BackupRecord, backup)

    def for_request(self, request_id: int) -> list[BackupRecord]:
        query = select(Backup).where(Backup.request_id == request_id).order_by(Backup.id)
        return [record_of(BackupRecord, backup) for backup in self._session.scalars(query)]

    def fingerprints(self, *, page_size: int = 200) -> Iterator[tuple[int, str, str]]:
        """(id, stored sha256, sha256 of the stored object) of every backup, a page at a time."""
        after = 0
        while True:
            query = select(Backup.id, Backup.object, Backup.sha256).where(Backup.id > after).order_by(Backup.id)
            rows = self._session.execute(query.limit(page_size)).all()
            for row in rows:
                yield int(row.id), str(row.sha256), object_sha256(row.object)
            if len(rows) < page_size:
                return
            after = int(rows[-1].id)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
