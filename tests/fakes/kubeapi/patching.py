"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a strategic merge patch good enough for
the objects nsstuck and kubectl touch."""

from __future__ import annotations

import copy
import json
from typing import Any


class PatchError(Exception):
    """The patch cannot be applied (the server answers 422 or 400)."""


# -- JSON merge patch -----------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- JSON patch -----------------------------------------------------------------------------------
def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON Pointer: {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _walk(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for tok in tokens:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"doc is missing path: {path!r}: missing value")
            cur = cur[tok]
        elif isinstance(cur, list):
            try:
                idx = int(tok)
            except ValueError as exc:
                raise PatchError(f"doc is missing path: {path!r}") from exc
            if idx < 0 or idx >= len(cur):
                raise PatchError(f"doc is missing path: {path!r}: missing value")
            cur = cur[idx]
        else:
            raise PatchError(f"doc is missing path: {path!r}: missing value")
    return cur


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    tokens = _split(path)
    if not tokens:
        return copy.deepcopy(value)
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            if replace:
                raise PatchError(f"replace operation does not apply: doc is missing path: {path}")
            parent.append(copy.deepcopy(value))
        else:
            try:
                idx = int(last)
            except ValueError as exc:
                raise PatchError(f"invalid index {last!r}") from exc
            if replace:
                if idx < 0 or idx >= len(parent):
                    raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
                parent[idx] = copy.deepcopy(value)
            else:
                if idx < 0 or idx > len(parent):
                    raise PatchError(f"add operation does not apply: doc is missing path: {path!r}: missing value")
                parent.insert(idx, copy.deepcopy(value))
    else:
        raise PatchError(f"doc is missing path: {path!r}: missing value")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _split(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing path: {path!r}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError as exc:
            raise PatchError(f"invalid index {last!r}") from exc
        if idx < 0 or idx >= len(parent):
            raise PatchError(f"remove operation does not apply: doc is missing path: {path!r}: missing value")
        return doc, parent.pop(idx)
    raise PatchError(f"remove operation does not apply: doc is missing path: {path!r}: missing value")


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("Unexpected kind: missing op")
        kind = op["op"]
        path = op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, op.get("value"), replace=True)
        elif kind == "move":
            doc, value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = copy.deepcopy(_walk(doc, _split(op.get("from", "")), op.get("from", "")))
            doc = _add(doc, path, value)
        elif kind == "test":
            actual = _walk(doc, _split(path), path)
            if json.dumps(actual, sort_keys=True) != json.dumps(op.get("value"), sort_keys=True):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


# -- strategic merge patch ------------------------------------------------------------------------
# patchMergeKey of the list fields that merge (the rest are replaced, as for an atomic list).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "envFrom": "",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "tolerations": "",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "subsets": "",
    "taints": "",
}
# primitive lists that merge as sets
SET_LISTS: frozenset[str] = frozenset({"finalizers"})
# lists of maps that merge by key only inside a given parent (e.g. Service ports are keyed by "port")
PARENT_KEYS: dict[tuple[str, str], str] = {("spec", "ports"): "port"}


def _merge_key(parent: str, field: str) -> str | None:
    if (parent, field) in PARENT_KEYS:
        return PARENT_KEYS[(parent, field)]
    key = MERGE_KEYS.get(field)
    return key or None


def strategic_merge_patch(target: Any, patch: Any, parent: str = "", kind: str = "") -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    # directives first
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [x for x in result[field] if x not in value]
        elif key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = strategic_merge_patch(current, value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(current, value, parent, key)
        else:
            result[key] = copy.deepcopy(value)
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            field = key.split("/", 1)[1]
            result[field] = _reorder(result.get(field), value, _merge_key(parent, field))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _reorder(current: Any, order: Any, key: str | None) -> Any:
    if not isinstance(current, list) or not isinstance(order, list):
        return current

    def ident(item: Any) -> Any:
        if key and isinstance(item, dict):
            return json.dumps(item.get(key))
        return json.dumps(item, sort_keys=True)

    wanted = [ident(x) for x in order]
    return sorted(current, key=lambda it: wanted.index(ident(it)) if ident(it) in wanted else len(wanted))


def _merge_list(current: Any, value: list[Any], parent: str, field: str) -> list[Any]:
    if field in SET_LISTS:
        base = list(current) if isinstance(current, list) else []
        directives = [v for v in value if isinstance(v, dict) and "$patch" in v]
        if any(d.get("$patch") == "replace" for d in directives):
            return [v for v in value if not isinstance(v, dict)]
        for item in value:
            if not isinstance(item, dict) and item not in base:
                base.append(item)
        return base
    key = _merge_key(parent, field)
    if key is None or not all(isinstance(v, dict) for v in value):
        return [copy.deepcopy(v) for v in value if not (isinstance(v, dict) and "$patch" in v and len(v) == 1)]
    if any(v.get("$patch") == "replace" for v in value):
        return [copy.deepcopy(v) for v in value if v.get("$patch") != "replace"]
    base = [copy.deepcopy(x) for x in current] if isinstance(current, list) else []
    for item in value:
        ident = item.get(key)
        idx = next((i for i, x in enumerate(base) if isinstance(x, dict) and x.get(key) == ident), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                base.pop(idx)
            continue
        if idx is None:
            base.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            merged = strategic_merge_patch(base[idx], item, field)
            base[idx] = merged
    return base
