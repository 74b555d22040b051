"""Every answer judged before it is believed: the one rule for the shape of what an API server sends back.

A 200 says nothing about its body. A proxy in between, an aggregated API half up or an apiserver under
load can answer a list with an empty body, `{}`, `null`, an array or a string; a discovery document
without its groups; an object without its metadata. Read as they come, the empty ones looked like "no
objects" (so `precheck` said "nothing would hold it" of a namespace holding an orphaned custom resource)
and the others crashed the collection (`AttributeError`). client-go's metadata client, which the
namespace controller lists with, refuses such answers ("0-length response", a missing `kind`), so the
namespace controller's own list would fail too: to us they are a gap like any failed call, never "no
objects".

`judge` is applied by `bot.kube.transport.Transport` to every GET it reads, on both of its paths (its
own `Reader` and the kubernetes client), before any caller sees the document. What a GET must answer
(its `Shape`) follows from its path, as the API server routes it, unless the caller says:

- a list (`/api/v1/namespaces/NS/pods`): a JSON object whose `kind` ends in `List` (the expected kind,
  when the caller gives one), with an `items` array of objects, each with `metadata` and a `name`, no
  two with the same namespace and name;
- an object (`/api/v1/namespaces/NS`): a JSON object with `metadata`, named as asked, of the expected
  kind when the caller gives one and it says one;
- a discovery document: `/api` an `APIVersions` with its `versions`, `/apis` an `APIGroupList` with its
  `groups` (each named, once), `/api/v1` and `/apis/GROUP/VERSION` an `APIResourceList` with its
  `resources` (each named, once); `/api` and
  `/apis` answered as aggregated discovery (the Content-Type says so) an `APIGroupDiscoveryList` with
  its `items`;
- anything else (`/version`, a group's own document, a subresource): a JSON object.

Anything else is `Malformed`, whose text names the answer and the request: "the API server answered 200
with an empty body for GET /apis/example.com/v1/namespaces/x/widgets".
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any
from urllib.parse import unquote


class Shape(StrEnum):
    """What a GET's answer must be."""

    LIST = "list"
    OBJECT = "object"
    VERSIONS = "APIVersions"  # /api, legacy discovery
    GROUPS = "APIGroupList"  # /apis, legacy discovery
    RESOURCES = "APIResourceList"  # /api/v1, /apis/GROUP/VERSION
    AGGREGATED = "APIGroupDiscoveryList"  # /api and /apis, aggregated discovery
    DOCUMENT = "document"  # any JSON object (/version, /apis/GROUP, a subresource)


# the array each discovery document must hold, and what each of its entries must name
_DISCOVERY_ARRAYS = {
    Shape.VERSIONS: ("versions", None),
    Shape.GROUPS: ("groups", "name"),
    Shape.RESOURCES: ("resources", "name"),
    Shape.AGGREGATED: ("items", None),
}


# the kind, or the kinds, an answer may be (a list asked for as metadata only may come as the type's own
# list from an aggregated API that ignores the Accept header, as client-go's metadata client takes it)
Kinds = str | tuple[str, ...] | None


def _kinds(kind: Kinds) -> tuple[str, ...]:
    return (kind,) if isinstance(kind, str) else tuple(kind or ())


class Malformed(Exception):
    """An answer in a shape it cannot have; its text says what came, for which request."""


def shape_of(path: str, content_type: str = "") -> tuple[Shape, str | None]:
    """The shape the answer to a GET of `path` must have, and the object's name when it is one object.
    `content_type`: the answer's, which says whether /api and /apis came as aggregated discovery."""
    segments = [s for s in path.split("?", 1)[0].split("/") if s]
    if not segments or segments[0] not in ("api", "apis"):
        return Shape.DOCUMENT, None
    aggregated = "as=APIGroupDiscoveryList" in content_type.replace(" ", "")
    if len(segments) == 1:
        if aggregated:
            return Shape.AGGREGATED, None
        return (Shape.VERSIONS if segments[0] == "api" else Shape.GROUPS), None
    root = 2 if segments[0] == "api" else 3  # /api/VERSION/..., /apis/GROUP/VERSION/...
    if len(segments) < root:
        return Shape.DOCUMENT, None  # /apis/GROUP: the group's own document
    rest = segments[root:]
    if not rest:
        return Shape.RESOURCES, None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]  # /namespaces/NS/RESOURCE...: a namespaced resource
    if len(rest) == 1:
        return Shape.LIST, None
    if len(rest) == 2:
        return Shape.OBJECT, unquote(rest[1])
    return Shape.DOCUMENT, None  # a subresource


def judge(
    raw: bytes | bytearray | None,
    *,
    path: str,
    status: int = 200,
    content_type: str = "",
    shape: Shape | None = None,
    kind: Kinds = None,
) -> Any:
    """The JSON document of the answer to GET `path`, once it has the shape it must have (`shape`, by
    default from the path: `shape_of`); `kind`: the kind (or kinds) a list or an object must be, when
    known. Raises Malformed."""
    name: str | None = None
    if shape is None:
        shape, name = shape_of(path, content_type)
    request = f"GET {path}"

    def malformed(what: str) -> Malformed:
        return Malformed(f"the API server answered {status} with {what} for {request}")

    if not raw or raw.isspace():
        raise malformed("an empty body")
    try:
        doc = json.loads(raw)
    except ValueError:
        raise malformed("a body that is not JSON (cut short or garbled)") from None
    if not isinstance(doc, dict):
        raise malformed(_not_an_object(doc))
    sent_kind = doc.get("kind")
    if shape is Shape.LIST:
        _judge_list(doc, sent_kind, _kinds(kind), malformed)
    elif shape is Shape.OBJECT:
        _judge_object(doc, sent_kind, _kinds(kind), name, malformed)
    elif shape in _DISCOVERY_ARRAYS:
        if sent_kind != shape.value:
            raise malformed(f"{_kind_said(sent_kind)} where a discovery document {shape.value} was expected")
        key, named = _DISCOVERY_ARRAYS[shape]
        entries = doc.get(key)
        if not isinstance(entries, list):
            raise malformed(f"an {shape.value} without a `{key}` array")
        names: set[str] = set()
        for entry in entries:
            if shape is Shape.VERSIONS and not isinstance(entry, str):
                raise malformed("an APIVersions whose `versions` are not all strings")
            if shape is not Shape.VERSIONS and not isinstance(entry, dict):
                raise malformed(f"an {shape.value} whose `{key}` are not all objects")
            if named and not (isinstance(entry.get(named), str) and entry[named]):
                raise malformed(f"an {shape.value} with an entry of `{key}` without a {named}")
            if named:
                if entry[named] in names:
                    raise malformed(f"an {shape.value} that holds {str(entry[named])[:80]} twice in `{key}`")
                names.add(entry[named])
    return doc


def _judge_list(doc: dict[str, Any], sent_kind: Any, kinds: tuple[str, ...], malformed: Any) -> None:
    if not isinstance(sent_kind, str) or not sent_kind.endswith("List") or (kinds and sent_kind not in kinds):
        expected = " or ".join(kinds) or "a kind ending in List"
        raise malformed(f"{_kind_said(sent_kind)} where a list ({expected}) was expected")
    items = doc.get("items")
    if not isinstance(items, list):
        raise malformed(f"a {sent_kind} without an `items` array")
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(items):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
            raise malformed(f"a {sent_kind} whose item {index} has no metadata with a name")
        key = (str(metadata.get("namespace") or ""), metadata["name"])
        if key in seen:
            shown = "/".join(k for k in key if k)
            raise malformed(f"a {sent_kind} that holds {shown} twice")
        seen.add(key)


def _judge_object(
    doc: dict[str, Any], sent_kind: Any, kinds: tuple[str, ...], name: str | None, malformed: Any
) -> None:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise malformed("an object without metadata")
    if kinds and sent_kind is not None and sent_kind not in kinds:
        raise malformed(f"{_kind_said(sent_kind)} where a {' or '.join(kinds)} was expected")
    if name is not None and metadata.get("name") != name:
        raise malformed(f"an object named {str(metadata.get('name'))[:80]!r} where {name!r} was asked for")


def _not_an_object(doc: Any) -> str:
    if doc is None:
        return "null"
    if isinstance(doc, list):
        return "a JSON array, not an object"
    if isinstance(doc, str):
        return "a JSON string, not an object"
    return f"a JSON {'boolean' if isinstance(doc, bool) else 'number'}, not an object"


def _kind_said(kind: Any) -> str:
    if kind is None:
        return "no kind"
    return f"kind {str(kind)[:80]!r}"
