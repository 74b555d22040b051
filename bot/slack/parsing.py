"""The `/nsstuck` command line: text in, a command or a short usage error out. Pure."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from bot.domain.refs import NAMESPACE_NAME, ClusterName
from bot.slack.text import clip, code

SUBCOMMANDS = ("clusters", "history", "help")
MAX_TEXT = 500
MAX_ECHO = 24  # characters of the caller's own words quoted back in a message

# every form of the command, with what it does: the help and the usage line are both made from it
FORMS = (
    (
        "/nsstuck <cluster> <namespace>",
        "diagnose it; the verdict goes to this channel, the evidence and the remedies (safest first) to its "
        "thread (for an Active namespace: what deleting it now would meet)",
    ),
    ("/nsstuck clusters", "the clusters you can name here, each checked (reachable, identity, permissions)"),
    ("/nsstuck history [<cluster> [<namespace>]]", "past incidents"),
    ("/nsstuck help", "this message"),
)
HELP = "*nsstuck* finds out why a namespace is stuck in Terminating.\n" + "\n".join(
    f"• `{form}`: {what}" for form, what in FORMS
)
USAGE = (
    f"Usage: `{FORMS[0][0]}` to diagnose a namespace stuck in Terminating, "
    + ", ".join(f"`{form}`" for form, _ in FORMS[1:])
    + "."
)


@dataclass(frozen=True)
class Diagnose:
    cluster: ClusterName
    namespace: str


@dataclass(frozen=True)
class ListClusters:
    pass


@dataclass(frozen=True)
class History:
    cluster: ClusterName | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Invalid:
    """Bad input: the message to show the caller, and nothing else happens."""

    message: str


Command = Diagnose | ListClusters | History | Help | Invalid


def _shown(word: str) -> str:
    """The caller's word as inline code, cut short and with control characters made visible, so that
    a message quoting it stays short and readable whatever was typed."""
    printable = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in word[: MAX_ECHO + 1])
    return code(clip(printable, MAX_ECHO))


def _closest(word: str, choices: list[str]) -> str | None:
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def parse(text: str, clusters: Sequence[str], visible: Sequence[str] | None = None) -> Command:
    """Parse the text after `/nsstuck`. `clusters` are the registered names; `visible` those the asking
    channel may use (default: all), the only ones an unknown name's message lists or suggests."""
    if len(text) > MAX_TEXT:
        return Invalid(f"That is too long for a command. {USAGE}")
    words = text.split()
    if not words:
        return Invalid(f"Tell me what to look at. {USAGE}")
    first = words[0].lower()
    if first in ("help", "-h", "--help"):
        return Help()
    if first == "clusters":
        return ListClusters() if len(words) == 1 else Invalid("`/nsstuck clusters` takes no arguments.")
    if first == "history":
        if len(words) > 3:
            return Invalid("Usage: `/nsstuck history [<cluster> [<namespace>]]`.")
        cluster = words[1] if len(words) > 1 else None
        namespace = words[2] if len(words) > 2 else None
        problem = _check_cluster(cluster, clusters, visible) if cluster else None
        if problem is None and namespace is not None:
            problem = _check_namespace(namespace)
        return Invalid(problem) if problem else History(ClusterName(cluster) if cluster else None, namespace)
    if len(words) == 1:
        if words[0] in (clusters if visible is None else visible):
            return Invalid(f"Which namespace on {code(words[0])}? Usage: `/nsstuck {words[0]} <namespace>`.")
        typo = _closest(first, list(SUBCOMMANDS))
        if typo:
            return Invalid(f"Unknown command {_shown(words[0])}: did you mean `/nsstuck {typo}`? {USAGE}")
        return Invalid(f"Missing the namespace (or an unknown command {_shown(words[0])}). {USAGE}")
    if len(words) > 2:
        return Invalid(f"Too many words. {USAGE}")
    cluster, namespace = words
    problem = _check_cluster(cluster, clusters, visible) or _check_namespace(namespace)
    return Invalid(problem) if problem else Diagnose(ClusterName(cluster), namespace)


def _check_cluster(name: str, clusters: Sequence[str], visible: Sequence[str] | None) -> str | None:
    """None if `name` may be used here. A cluster kept to other channels gets the very message a name
    nobody registered gets, so that the answer does not confirm that it exists (issue 36)."""
    if name in (clusters if visible is None else visible):
        return None
    if visible is None:
        listing = ", ".join(f"`{c}`" for c in clusters) if clusters else "none are registered"
        shown = f"Registered clusters: {listing}"
    else:  # a channel's view: the clusters kept to other channels are neither listed nor suggested
        listing = ", ".join(f"`{c}`" for c in visible)
        shown = f"Clusters you can name here: {listing}" if visible else "No cluster may be used from this channel"
    suggestion = _closest(name, list(clusters if visible is None else visible))
    hint = f" Did you mean `{suggestion}`?" if suggestion else ""
    return f"Unknown cluster {_shown(name)}.{hint} {shown}."


def _check_namespace(name: str) -> str | None:
    if NAMESPACE_NAME.match(name):
        return None
    return (
        f"{_shown(name)} is not a valid namespace name: at most 63 lower-case letters, digits and '-', "
        "starting and ending with a letter or digit."
    )
