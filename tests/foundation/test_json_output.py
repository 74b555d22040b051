"""`-o json` writes what `json.dumps(data, indent=2)` would, and a newline (bot/cli.py writes it itself,
piece by piece, faster than the standard library's indenting encoder)."""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from enum import IntEnum, StrEnum
from typing import Any

import pytest

from bot.cli import _write_json


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
