"""What a person of a `diagnose_as: requester` cluster is shown of a report (docs/tenants.md).

The diagnosis reads the whole cluster with nsstuck's own role, because the evidence that holds a
namespace (APIServices, webhooks, nodes, another namespace's controller) is cluster-wide; the report
recorded is that whole one, nsstuck's own. The person is shown a copy in which every namespace they may
not `get` goes unnamed: each mention of its name in any text becomes "another namespace", and an object
that lives in it keeps only its kind (and what the finding says of its health), never its name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

from bot.domain.findings import Diagnosis
from bot.domain.values import strings_in

HIDDEN = "(another namespace)"
HIDDEN_NAME = "(not shown)"
# a namespace name is a DNS label: a mention is one not touched by another label character on either side
_EDGE = "a-z0-9-"


def named_in(text: str, names: Iterable[str]) -> set[str]:
    """The names of `names` that `text` mentions as a whole label."""
    return {name for name in names if name and _pattern([name]).search(text)}


def _pattern(names: Collection[str]) -> re.Pattern[str]:
    # the longest first, so that `team-b-extra` is not cut into `team-b` and `-extra`
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(f"(?<![{_EDGE}])(?:{alternatives})(?![{_EDGE}])")


def mentioned(diagnosis: Diagnosis, names: Iterable[str]) -> set[str]:
    """The namespaces among `names`, other than the diagnosed one, that the report names anywhere (an
    object's namespace, or a word in any of its texts)."""
    others = {n for n in names if n and n != diagnosis.namespace}
    found: set[str] = set()
    for value in strings_in(diagnosis.to_json()):
        found |= named_in(value, others - found)
    return found


def shown_to(diagnosis: Diagnosis, hidden: Collection[str]) -> Diagnosis:
    """A copy of `diagnosis` that names none of the namespaces `hidden` (never the diagnosed one)."""
    hidden = {n for n in hidden if n and n != diagnosis.namespace}
    if not hidden:
        return diagnosis
    pattern = _pattern(hidden)
    return Diagnosis.from_json(_scrub(diagnosis.to_json(), hidden, pattern))


def _scrub(value: Any, hidden: set[str], pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(HIDDEN, value)
    if isinstance(value, list):
        return [_scrub(item, hidden, pattern) for item in value]
    if isinstance(value, dict):
        elsewhere = value.get("namespace") in hidden
        out = {key: _scrub(item, hidden, pattern) for key, item in value.items()}
        if elsewhere and "name" in out:
            out["name"] = HIDDEN_NAME  # an object of a namespace they may not see: its kind only
        return out
    return value
