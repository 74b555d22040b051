"""Just enough of the Kubernetes protobuf encoding to read what ``kubectl create namespace|configmap|
secret|serviceaccount`` and ``kubectl auth can-i|whoami`` send (kubectl's typed clients post
``application/vnd.kubernetes.protobuf``).

The envelope is the 4-byte magic ``k8s\\0`` followed by a ``runtime.Unknown`` message whose ``raw``
field holds the object; the field numbers below are those of ``k8s.io/api/core/v1/generated.proto``
and ``k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto``. Other kinds are refused with 415.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"

# field number -> (json name, type, repeated); type is "string" | "bytes" | "int" | "bool" | "time"
#                  | dict (a nested message schema) | ("map", value type)
Schema = dict[int, tuple[str, Any, bool]]

TIME: Schema = {1: ("seconds", "int", False), 2: ("nanos", "int", False)}
OWNER_REF: Schema = {
    1: ("kind", "string", False),
    3: ("name", "string", False),
    4: ("uid", "string", False),
    5: ("apiVersion", "string", False),
    6: ("controller", "bool", False),
    7: ("blockOwnerDeletion", "bool", False),
}
OBJECT_META: Schema = {
    1: ("name", "string", False),
    2: ("generateName", "string", False),
    3: ("namespace", "string", False),
    5: ("uid", "string", False),
    6: ("resourceVersion", "string", False),
    7: ("generation", "int", False),
    8: ("creationTimestamp", "time", False),
    9: ("deletionTimestamp", "time", False),
    10: ("deletionGracePeriodSeconds", "int", False),
    11: ("labels", ("map", "string"), False),
    12: ("annotations", ("map", "string"), False),
    13: ("ownerReferences", OWNER_REF, True),
    14: ("finalizers", "string", True),
}
OBJECT_REF: Schema = {
    1: ("kind", "string", False),
    2: ("namespace", "string", False),
    3: ("name", "string", False),
    4: ("uid", "string", False),
    5: ("apiVersion", "string", False),
    6: ("resourceVersion", "string", False),
    7: ("fieldPath", "string", False),
}
SCHEMAS: dict[str, Schema] = {
    "Namespace": {
        1: ("metadata", OBJECT_META, False),
        2: ("spec", {1: ("finalizers", "string", True)}, False),
        3: ("status", {1: ("phase", "string", False)}, False),
    },
    "ConfigMap": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", ("map", "string"), False),
        3: ("binaryData", ("map", "bytes"), False),
        4: ("immutable", "bool", False),
    },
    "Secret": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", ("map", "bytes"), False),
        3: ("type", "string", False),
        4: ("stringData", ("map", "string"), False),
        5: ("immutable", "bool", False),
    },
    "ServiceAccount": {
        1: ("metadata", OBJECT_META, False),
        2: ("secrets", OBJECT_REF, True),
        3: ("imagePullSecrets", {1: ("name", "string", False)}, True),
        4: ("automountServiceAccountToken", "bool", False),
    },
    "SelfSubjectAccessReview": {
        1: ("metadata", OBJECT_META, False),
        2: (
            "spec",
            {
                1: (
                    "resourceAttributes",
                    {
                        1: ("namespace", "string", False),
                        2: ("verb", "string", False),
                        3: ("group", "string", False),
                        4: ("version", "string", False),
                        5: ("resource", "string", False),
                        6: ("subresource", "string", False),
                        7: ("name", "string", False),
                    },
                    False,
                ),
                2: ("nonResourceAttributes", {1: ("path", "string", False), 2: ("verb", "string", False)}, False),
            },
            False,
        ),
    },
    "SelfSubjectReview": {1: ("metadata", OBJECT_META, False)},
    "SelfSubjectRulesReview": {
        1: ("metadata", OBJECT_META, False),
        2: ("spec", {1: ("namespace", "string", False)}, False),
    },
}
UNKNOWN: Schema = {
    1: ("typeMeta", {1: ("apiVersion", "string", False), 2: ("kind", "string", False)}, False),
    2: ("raw", "rawbytes", False),
    3: ("contentEncoding", "string", False),
    4: ("contentType", "string", False),
}


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        num, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((num, wire, value))
    return out


def _scalar(kind: Any, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "rawbytes":
        return bytes(value)
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "bool":
        return bool(value)
    if kind == "time":
        t = decode_message(bytes(value), TIME)
        return datetime.fromtimestamp(int(t.get("seconds", 0)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(kind, dict):
        return decode_message(bytes(value), kind)
    raise ProtobufError(f"unknown field type {kind!r}")


def decode_message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for num, _wire, value in _fields(data):
        spec = schema.get(num)
        if spec is None:
            continue
        name, kind, repeated = spec
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = decode_message(bytes(value), {1: ("k", "string", False), 2: ("v", kind[1], False)})
            out.setdefault(name, {})[entry.get("k", "")] = entry.get("v", "")
        elif repeated:
            out.setdefault(name, []).append(_scalar(kind, value))
        else:
            decoded = _scalar(kind, value)
            if decoded == "" or (kind == "int" and decoded == 0 and name == "generation"):
                continue  # proto3 writes empty strings; JSON omits them
            out[name] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf-encoded object as its JSON form; raises ProtobufError for kinds not covered here."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic")
    unknown = decode_message(body[len(MAGIC) :], UNKNOWN)
    type_meta = unknown.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    schema = SCHEMAS.get(kind)
    if schema is None:
        raise ProtobufError(f"no protobuf schema for kind {kind!r}")
    obj = {"apiVersion": type_meta.get("apiVersion", "v1"), "kind": kind}
    obj.update(decode_message(unknown.get("raw") or b"", schema))
    return obj
