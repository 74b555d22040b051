"""Small helpers shared by the controllers: time stamps, object accessors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]


def now_of(emu: Any) -> datetime:
    """The emulator's current time (tz-aware UTC), truncated to whole seconds like metav1.Time."""
    value = emu.clock.now()
    if not isinstance(value, datetime):  # pragma: no cover - defensive
        raise TypeError(f"emu.clock.now() returned {value!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


def rfc3339(value: datetime) -> str:
    """metav1.Time's JSON form: second precision, Z suffix."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """Parse an RFC 3339 time stamp as the API server writes it (None for missing or bad input)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def meta(obj: JSON) -> JSON:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name_of(obj: JSON) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: JSON) -> str:
    return str(meta(obj).get("namespace") or "")


def finalizers_of(obj: JSON) -> list[str]:
    return [str(f) for f in meta(obj).get("finalizers") or []]


def is_deleting(obj: JSON) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def owner_refs(obj: JSON) -> list[JSON]:
    return [ref for ref in meta(obj).get("ownerReferences") or [] if isinstance(ref, dict)]


def get_path(obj: JSON, *keys: str) -> Any:
    """obj[k1][k2]... or None when any step is missing."""
    current: Any = obj
    for key in keys:
        if not isinstance(current, dict):
            return None
        current = current.get(key)
    return current


def condition(conditions: object, ctype: str) -> JSON | None:
    if not isinstance(conditions, list):
        return None
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def split_api_version(api_version: str) -> tuple[str, str]:
    """'apps/v1' -> ('apps', 'v1'); 'v1' -> ('', 'v1')."""
    if "/" in api_version:
        group, _, version = api_version.partition("/")
        return group, version
    return "", api_version


def option(emu: Any, name: str, default: Any) -> Any:
    """An emulator option: ``emu.options[name]``, else the attribute ``emu.<name>``, else ``default``."""
    options = getattr(emu, "options", None)
    if isinstance(options, dict) and name in options:
        return options[name]
    return getattr(emu, name, default)
