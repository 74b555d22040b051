"""Label and field selectors as the API server parses them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # = != in notin exists !exists
    values: tuple[str, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_label_selector(text: str) -> list[Requirement]:
    reqs: list[Requirement] = []
    for raw in _split_top(text or ""):
        part = raw.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)$", part)
        if m:
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append(Requirement(m.group(1), op, (m.group(3),)))
            continue
        m = _SET_RE.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: {part}")
        neg, key, op, vals = m.groups()
        if op:
            if neg:
                raise bad_request(f"unable to parse requirement: {part}")
            values = tuple(v.strip() for v in vals.split(",") if v.strip())
            reqs.append(Requirement(key, op, values))
        else:
            reqs.append(Requirement(key, "!exists" if neg else "exists", ()))
    return reqs


def selector_from_label_selector(sel: dict[str, Any] | None) -> list[Requirement]:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) as requirements."""
    if not sel:
        return []
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()]
    for expr in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}.get(expr.get("operator", ""))
        if op:
            reqs.append(Requirement(expr.get("key", ""), op, tuple(expr.get("values") or ())))
    return reqs


def labels_match(reqs: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    negate: bool
    value: str


# supported field selectors per kind besides metadata.name / metadata.namespace
FIELD_SELECTORS: dict[str, frozenset[str]] = {
    "Pod": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "Namespace": frozenset({"status.phase"}),
    "Node": frozenset({"spec.unschedulable"}),
    "Secret": frozenset({"type"}),
    "Event": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "PersistentVolumeClaim": frozenset({"spec.volumeName"}),
    "Job": frozenset({"status.successful"}),
    "ReplicaSet": frozenset({"status.replicas"}),
    "ReplicationController": frozenset({"status.replicas"}),
    "CertificateSigningRequest": frozenset({"spec.signerName"}),
}


def parse_field_selector(text: str, kind: str, custom: bool) -> list[FieldRequirement]:
    reqs: list[FieldRequirement] = []
    for raw in (text or "").split(","):
        part = raw.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = m.groups()
        if path not in ("metadata.name", "metadata.namespace") and path not in FIELD_SELECTORS.get(kind, frozenset()):
            if custom:
                raise bad_request(f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"')
            raise bad_request(f"field label not supported: {path}")
        reqs.append(FieldRequirement(path, op == "!=", value))
    return reqs


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source" and obj.get("kind") == "Event":
        return str((obj.get("source") or {}).get("component", ""))
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    for r in reqs:
        equal = _field_value(obj, r.path) == r.value
        if equal == r.negate:
            return False
    return True


def raise_if(cond: bool, err: ApiError) -> None:
    if cond:
        raise err
