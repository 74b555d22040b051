"""How a diagnosis is kept in the database: the report as JSON text, the snapshot's JSON zlib-compressed.

Both are made where the diagnosis was made (a worker process of `nsstuck serve`), so that the process
that records them writes them as they are and never decodes a snapshot.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from bot.domain.findings import Diagnosis
from bot.domain.snapshot import NamespaceSnapshot


class StoredJson(str):
    """A JSON document already encoded, written by the store as it is (the store's JSON columns take it
    in place of a value to encode)."""


def encode_report(diagnosis: Diagnosis) -> StoredJson:
    return StoredJson(json.dumps(diagnosis.to_json(), separators=(",", ":"), ensure_ascii=False))


def with_keys(report: StoredJson, extra: dict[str, Any]) -> StoredJson:
    """The encoded report with `extra`'s keys added at its end, without decoding it (a report is one JSON
    object: its text ends in `}`)."""
    if not extra:
        return report
    body = json.dumps(extra, separators=(",", ":"), ensure_ascii=False)[1:]
    head = report.rstrip()
    if not head.endswith("}"):
        raise ValueError("a report is one JSON object")
    glue = "" if head.endswith("{}") else ","
    return StoredJson(head[:-1] + glue + body)


def decode_report(data: str | dict[str, Any]) -> Diagnosis:
    return Diagnosis.from_json(json.loads(data) if isinstance(data, str) else data)


def compress_snapshot(snapshot: NamespaceSnapshot) -> bytes:
    return zlib.compress(json.dumps(snapshot.to_json(), separators=(",", ":"), default=str).encode(), 6)


def decompress_snapshot(data: bytes) -> NamespaceSnapshot:
    return NamespaceSnapshot.from_json(json.loads(zlib.decompress(data)))
