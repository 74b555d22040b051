"""The namespace controller's condition types and the words of its messages, read in one place for
the collector (which trusts a condition only when it reads in full) and the rules (which take what
they can from it). Pure.

The message formats are those of the namespace controller (pkg/controller/namespace/deletion,
namespaced_resources_deleter.go): "Some resources are remaining: kialis.kiali.io has 1 resource
instances, pods. has 2 resource instances" and "Some content in the namespace has finalizers
remaining: kiali.io/finalizer in 1 resource instances".
"""

from __future__ import annotations

import re

DISCOVERY = "NamespaceDeletionDiscoveryFailure"
PARSING = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

REMAINING_PREFIX = "Some resources are remaining: "
# what the rules read from any message: `<resource.group> has <n> resource instances`
_REMAINING = re.compile(r"([^\s,]+) has (\d+) resource instances")
_FINALIZER_COUNT = re.compile(r"([^\s,]+) in (\d+) resource instances")
# what the collector accepts as one item of a message it trusts in full
_REMAINING_ITEM = re.compile(r"([a-z0-9][a-z0-9-]*)\.([a-z0-9.-]*) has [0-9]+ resource instances")


def remaining_counts(message: str) -> dict[str, int]:
    """`kialis.kiali.io` / `pods.` -> how many objects of that type remain, as far as it can be read."""
    return {m.group(1): int(m.group(2)) for m in _REMAINING.finditer(message)}


def finalizer_counts(message: str) -> dict[str, int]:
    """Finalizer -> how many objects still carry it (NamespaceFinalizersRemaining)."""
    return {m.group(1): int(m.group(2)) for m in _FINALIZER_COUNT.finditer(message)}


def remaining_types_exactly(message: str) -> frozenset[str] | None:
    """The types a NamespaceContentRemaining message names, when every item of it reads as one
    (`resource.group has N resource instances`); None for a message not read in full."""
    if not message.startswith(REMAINING_PREFIX):
        return None
    types: set[str] = set()
    for item in message.removeprefix(REMAINING_PREFIX).split(", "):
        match = _REMAINING_ITEM.fullmatch(item)
        if match is None:
            return None
        types.add(f"{match.group(1)}.{match.group(2)}")
    return frozenset(types)
