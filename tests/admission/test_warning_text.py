"""The warnings of the admission answer stay under 120 characters and keep "see `nsstuck precheck NS`",
whatever the length of the names (issue 38 §2: the API server cuts warnings past 4 KiB in all)."""

from __future__ import annotations

import pytest

from bot.domain.findings import Cause, Finding
from bot.domain.refs import ObjectRef
from bot.services.admission import MAX_WARNING, warning


def finding(*names: str, kind: str = "Kiali") -> Finding:
    objects = tuple(ObjectRef(api_version="kiali.io/v1alpha1", kind=kind, name=n, namespace="ns") for n in names)
    return Finding(cause=Cause.FINALIZER_DEADLOCK, blocking=True, summary="held", objects=objects)


def test_a_short_warning_is_whole() -> None:
    assert warning("team-a", finding("kiali")) == (
        "nsstuck: finalizer_deadlock: kiali/kiali would hold it; see `nsstuck precheck team-a`"
    )
    assert warning("team-a", finding("kiali", "other", "third")) == (
        "nsstuck: finalizer_deadlock: kiali/kiali (+2) would hold it; see `nsstuck precheck team-a`"
    )


@pytest.mark.parametrize("namespace", ["a", "n" * 30, "n" * 63])
@pytest.mark.parametrize("name", ["x", "o" * 60, "o" * 253])
def test_long_names_are_shortened_and_the_precheck_hint_kept(namespace: str, name: str) -> None:
    text = warning(namespace, finding(name, "more", kind="VeryLongCustomResourceKindName"))
    assert len(text) <= MAX_WARNING < 120
    assert "finalizer_deadlock: " in text
    full = f"verylongcustomresourcekindname/{name}"
    shown = text.split("finalizer_deadlock: ", 1)[1].split(" (+1)", 1)[0]
    assert shown == full or (shown.endswith("...") and full.startswith(shown[:-3]) and len(shown) >= 6)
    if len(namespace) <= 30:
        assert text.startswith("nsstuck: finalizer_deadlock: ")
        assert text.endswith(f"see `nsstuck precheck {namespace}`")
        assert "(+1)" in text
    else:  # the namespace's name takes the room: the hint without it
        assert text.endswith(("see `nsstuck precheck`", f"see `nsstuck precheck {namespace}`"))
    assert text.isprintable()
