"""The secrets sweeps' search (`occurring`) finds exactly what searching every text for every needle
finds: it is what decides that nothing leaked, so a needle it missed would make every sweep vacuous."""

from __future__ import annotations

import random
import secrets

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reliability.test_secrets_sweep import GRAM, _windows, occurring


def _naive(needles: list[str], texts: list[str]) -> set[str]:
    return {n for n in needles if any(n in t for t in texts)}


ALPHABET = "ab01-+/="  # few letters: pieces of needles recur everywhere, the index's worst case


@settings(max_examples=300, deadline=None)
@given(
    needles=st.lists(st.text(ALPHABET, min_size=8, max_size=60), min_size=1, max_size=12),
    texts=st.lists(st.text(ALPHABET, max_size=300), max_size=5),
    planted=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 4), st.integers(0, 300)), max_size=6),
)
def test_the_same_as_searching_each_text_for_each_needle(
    needles: list[str], texts: list[str], planted: list[tuple[int, int, int]]
) -> None:
    texts = list(texts) or [""]
    for which, into, where in planted:  # needles put into the texts, anywhere, ends and joins included
        needle, t = needles[which % len(needles)], into % len(texts)
        at = min(where, len(texts[t]))
        texts[t] = texts[t][:at] + needle + texts[t][at:]
    assert occurring(needles, texts) == _naive(needles, texts)


@pytest.mark.parametrize("offset", range(2 * GRAM + 1))
def test_a_long_needle_is_found_at_every_offset(offset: int) -> None:
    key = secrets.token_hex(64)
    needles = _windows(key)
    text = "x" * offset + key[12 : 12 + 2 * GRAM] + "y" * 7  # exactly one window, anywhere
    assert occurring(needles, [text]) == _naive(needles, [text])
    assert occurring(needles, [text])


def test_a_needle_is_not_found_across_two_texts() -> None:
    needle = secrets.token_hex(20)
    texts = [needle[:17], needle[17:]]
    assert occurring([needle], texts) == set()
    assert occurring([needle], ["".join(texts)]) == {needle}


def test_many_needles_in_a_large_text() -> None:
    rng = random.Random(7)
    keys = [secrets.token_hex(200) for _ in range(20)]
    needles = [w for key in keys for w in _windows(key)] + [key[:12] for key in keys]
    text = "".join(rng.choice("0123456789abcdef\n ") for _ in range(200_000))
    leaked = rng.sample(needles, 15)
    texts = [text[:50_000] + leaked[0], *(text[i * 1000 : i * 1000 + 900] + n for i, n in enumerate(leaked[1:])), text]
    assert occurring(needles, texts) == _naive(needles, texts)
