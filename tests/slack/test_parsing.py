"""The /nsstuck text parser: every kind of bad input gets a short message, nothing else."""

from __future__ import annotations

import pytest

from bot.slack.parsing import Diagnose, Help, History, Invalid, ListClusters, parse

CLUSTERS = ["prod-eu", "staging"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prod-eu istio-system", Diagnose("prod-eu", "istio-system")),
        ("  prod-eu   payload-svc ", Diagnose("prod-eu", "payload-svc")),
        ("clusters", ListClusters()),
        ("help", Help()),
        ("HELP", Help()),
        ("history", History()),
        ("history prod-eu", History("prod-eu")),
        ("history prod-eu kube-x", History("prod-eu", "kube-x")),
    ],
)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse(text, CLUSTERS) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "Tell me what to look at"),
        ("prod-ue istio-system", "Unknown cluster `prod-ue`. Did you mean `prod-eu`?"),
        ("nowhere ns", "Registered clusters: `prod-eu`, `staging`."),
        ("prod-eu Istio_System", "`Istio_System` is not a valid namespace name"),
        ("prod-eu", "Which namespace on `prod-eu`?"),
        ("clustrs", "did you mean `/nsstuck clusters`?"),
        ("diagnose", "Missing the namespace (or an unknown command `diagnose`)"),
        ("prod-eu a b", "Too many words"),
        ("clusters extra", "takes no arguments"),
        ("history prod-ue", "Did you mean `prod-eu`?"),
        ("x" * 600, "too long"),
    ],
)
def test_bad_input_gets_a_short_message(text: str, fragment: str) -> None:
    result = parse(text, CLUSTERS)
    assert isinstance(result, Invalid)
    assert fragment in result.message
    assert len(result.message) < 400


def test_user_text_cannot_ping_or_link() -> None:
    result = parse("<!channel> ns", CLUSTERS)
    assert isinstance(result, Invalid)
    assert "<!channel>" not in result.message
    assert "&lt;!channel&gt;" in result.message
