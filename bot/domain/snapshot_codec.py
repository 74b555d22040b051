"""How a snapshot is kept in the database: its JSON, zlib-compressed."""

from __future__ import annotations

import json
import zlib

from bot.domain.snapshot import NamespaceSnapshot


def compress_snapshot(snapshot: NamespaceSnapshot) -> bytes:
    return zlib.compress(json.dumps(snapshot.to_json(), separators=(",", ":"), default=str).encode(), 6)


def decompress_snapshot(data: bytes) -> NamespaceSnapshot:
    return NamespaceSnapshot.from_json(json.loads(zlib.decompress(data)))
