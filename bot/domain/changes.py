"""Changes to a cluster, as data: the exact API call a remedy amounts to, and what came of it.

An Operation is built from the live object right before it runs (so that a JSON patch `test` or a
resourceVersion precondition names what was just checked), and carries the kubectl command that
does the same by hand. The kube layer executes Operations; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from bot.domain.refs import ObjectRef


def object_path(ref: ObjectRef, subresource: str | None = None) -> str:
    """The API path of one object: `/api/v1/namespaces/ns/pods/p`, `/apis/g/v/kinds/n/finalize`."""
    plural = ref.plural
    base = f"/apis/{ref.api_version}" if ref.group else f"/api/{ref.api_version or 'v1'}"
    scope = f"/namespaces/{quote(ref.namespace, safe='')}" if ref.namespace else ""
    path = f"{base}{scope}/{plural}/{quote(ref.name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


@dataclass(frozen=True)
class Operation:
    """One API call that changes one object, guarded by preconditions on what was checked."""

    method: str  # PATCH | PUT | DELETE
    path: str
    target: ObjectRef  # the object as it was checked (uid and resourceVersion included)
    summary: str  # in plain words: "remove kiali.io/finalizer from kialis.kiali.io/kiali"
    kubectl: str  # the same change by hand
    body: Any = None
    content_type: str = "application/json"

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "target": self.target.to_json(),
            "summary": self.summary,
            "kubectl": self.kubectl,
            "body": self.body,
            "content_type": self.content_type,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Operation:
        return cls(
            method=str(data["method"]),
            path=str(data["path"]),
            target=ObjectRef.from_json(data["target"]),
            summary=str(data["summary"]),
            kubectl=str(data["kubectl"]),
            body=data.get("body"),
            content_type=str(data.get("content_type") or "application/json"),
        )


class Verdict(StrEnum):
    """How the API server answered an Operation."""

    OK = "ok"
    CONFLICT = "conflict"  # a precondition failed: the object changed since it was checked
    GONE = "gone"  # the object no longer exists
    DENIED = "denied"  # admission (a webhook, a policy) or validation refused it
    FORBIDDEN = "forbidden"  # our credentials may not do this
    UNREACHABLE = "unreachable"  # no answer: the change may or may not have happened
    ERROR = "error"  # any other refusal


@dataclass(frozen=True)
class CallResult:
    """The answer to one Operation (dry run or real)."""

    verdict: Verdict
    message: str  # the API server's own words (secrets scrubbed), or "" when OK
    status: int | None = None  # the HTTP status, when there was one
    object: dict[str, Any] | None = None  # the object the server returned (after the change)

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.OK

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict.value, "message": self.message, "status": self.status}
        if self.object is not None:
            meta = self.object.get("metadata") or {}
            out["resourceVersion"] = meta.get("resourceVersion")
        return out
