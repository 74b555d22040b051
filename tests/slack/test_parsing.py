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


@pytest.mark.parametrize("words", ["{} ddd", "history {}", "history {} ddd", "{}"])
def test_a_cluster_of_another_channel_is_answered_as_one_nobody_registered(words: str) -> None:
    """Issue 36: naming a cluster kept to other channels gets, word for word, the answer a name that was
    never registered gets, so the refusal does not confirm that the cluster exists."""
    registered = ["prod-eu", "vault-prod", "staging"]
    here = ["staging"]  # the channel's view: vault-prod is kept to another channel
    hidden = parse(words.format("vault-prod"), registered, here)
    made_up = parse(words.format("vault-pqrs"), registered, here)
    assert isinstance(hidden, Invalid)
    assert isinstance(made_up, Invalid)
    assert hidden.message.replace("vault-prod", "NAME") == made_up.message.replace("vault-pqrs", "NAME")
    assert "prod-eu" not in hidden.message
    # from a channel that may use it, the same words are a command (or, alone, asked for their namespace)
    allowed = parse(words.format("vault-prod"), registered, ["vault-prod", "staging"])
    assert not isinstance(allowed, Invalid) or allowed.message.startswith("Which namespace on `vault-prod`?")
