"""`-o json` writes what `json.dumps(data, indent=2)` would, and a newline (bot/cli.py has orjson write it,
faster than the standard library's indenting encoder, and the standard library what orjson would write
otherwise)."""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bot.cli
from bot.cli import _plain, _write_json
from bot.domain.findings import (
    Action,
    Cause,
    Controller,
    ControllerState,
    Diagnosis,
    Finding,
    Gap,
    NamespaceState,
    Remedy,
    Risk,
)
from bot.domain.refs import ObjectRef


class Colour(StrEnum):
    RED = "red"
    BLUE = "blü"


class Size(IntEnum):
    BIG = 10


class Items(list[Any]):
    pass


class Ratio(float):
    pass


CASES: list[Any] = [
    {},
    [],
    "plain",
    {"nested": {"list": [1, 2.5, -3, 1e300, float("inf"), float("-inf")], "empty": {}, "none": []}},
    {"unicode": "naïve – ✓ 🎉", "escapes": 'quote " backslash \\ tab \t newline \n \x00'},
    {"flags": [True, False, None], "tuple": (1, "two"), "zero": 0, "big": 2**80},
    {7: "int key", 2.5: "float key", True: "bool key", None: "none key", "s": "str key"},
    [[[[{"deep": [[], {}]}]]]],
    # subclasses are written as their base types are (an enum's value, an ordered mapping, a list type)
    {Colour.RED: [Colour.BLUE, Size.BIG], "od": OrderedDict([("b", 1), ("a", Colour.RED)]), "l": Items([1, "x", {}])},
    {"ratio": Ratio(0.5), "items": Items([]), "od": OrderedDict()},
]


@pytest.mark.parametrize("data", CASES)
def test_the_text_is_json_dumps_with_indent_2(data: Any) -> None:
    out = io.StringIO()
    _write_json(out, data)
    assert out.getvalue() == json.dumps(data, indent=2) + "\n"


def test_nan_and_large_documents_written_in_pieces() -> None:
    data = {
        "items": [{"name": f"w-{n:05d}", "finalizers": ["x.io/y"], "n": n, "nan": float("nan")} for n in range(5000)]
    }
    out = io.StringIO()
    _write_json(out, data)
    assert out.getvalue() == json.dumps(data, indent=2) + "\n"


def test_what_json_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError):
        _write_json(io.StringIO(), {"when": object()})
    with pytest.raises(TypeError):
        _write_json(io.StringIO(), {("a", "b"): 1})


# every character, lone surrogates and DEL included (what orjson leaves as it is, the standard library escapes)
TEXT = st.text(st.characters(codec=None, categories=None)) | st.sampled_from(["\x7f", "\ud800", "\U0010ffff", "é\x00"])
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=30,
)
# what orjson would write otherwise, or refuses: floats, ints past 64 bits, keys that are not str
ODD = st.recursive(
    st.floats() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.integers() | st.floats() | TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_any_plain_document_is_json_dumps_with_indent_2(data: Any) -> None:
    out = io.StringIO()
    _write_json(out, data)
    assert out.getvalue() == json.dumps(data, indent=2) + "\n"


@settings(max_examples=300, deadline=None)
@given(ODD)
def test_any_other_document_is_json_dumps_with_indent_2(data: Any) -> None:
    out = io.StringIO()
    _write_json(out, data)
    assert out.getvalue() == json.dumps(data, indent=2) + "\n"


def _report() -> Diagnosis:
    ref = ObjectRef("kiali.io/v1alpha1", "Kiali", "kiali-ü", "istio-system", resource="kialis")
    finding = Finding(
        cause=Cause.ORPHANED_FINALIZER,
        blocking=True,
        summary="1 Kiali object keeps finalizer kiali.io/finalizer; no running controller handles it",
        objects=(ref,),
        evidence=("no Deployment in the cluster serves group kiali.io – “gone”",),
        remedies=(
            Remedy(Action.REMOVE_FINALIZER, Risk.MEDIUM, f"Remove kiali.io/finalizer from {ref.display}", (ref,)),
        ),
        controller=Controller(ControllerState.DEAD, ("no Lease",)),
    )
    return Diagnosis(
        cluster="prod-eu",
        namespace="istio-system",
        observed_at=datetime(2026, 11, 21, 10, 0, tzinfo=UTC),
        state=NamespaceState.TERMINATING,
        terminating_for_seconds=5400,
        complete=False,
        gaps=(Gap("list kialis.kiali.io/v1alpha1 in istio-system", "timeout"),),
        findings=(finding,),
    )


def test_a_report_is_written_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report is made of the plain types only, so orjson writes it (the standard library is not asked)."""
    data = _report().to_json()
    assert _plain(data)
    expected = json.dumps(data, indent=2) + "\n"

    def refused(*_: Any, **__: Any) -> str:
        raise AssertionError("the standard library was asked to write a report")

    monkeypatch.setattr(bot.cli.json, "dumps", refused)
    out = io.StringIO()
    _write_json(out, data)
    assert out.getvalue() == expected


@pytest.mark.parametrize("data", [{"items": [{"name": "w-1", "n": 1}]}, {"unicode": "naïve 🎉", "del": "\x7f"}])
def test_written_to_standard_output_in_order_with_what_is_written_around_it(data: Any) -> None:
    """A stream with a binary buffer (standard output) gets ASCII text as bytes, after what was written before."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    out.write("before\n")
    _write_json(out, data)
    out.write("after\n")
    out.flush()
    assert raw.getvalue() == ("before\n" + json.dumps(data, indent=2) + "\n" + "after\n").encode()


def test_a_stream_that_does_not_write_ascii_as_it_is_gets_text() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-16")
    _write_json(out, {"a": [1, "b"]})
    out.flush()
    assert raw.getvalue().decode("utf-16") == json.dumps({"a": [1, "b"]}, indent=2) + "\n"
