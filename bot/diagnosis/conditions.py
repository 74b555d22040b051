"""The namespace controller's conditions, parsed into facts.

Facts, not verdicts: clusters before 1.16/1.17 write none, a controller that is down writes nothing,
and some messages mislead (under OrderedNamespaceDeletion "All content successfully removed" can
show while pods with finalizers remain). The rules use these facts as evidence next to what they
see in the snapshot themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.domain.conditions import (
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    DISCOVERY,
    FINALIZERS_REMAINING,
    PARSING,
    finalizer_counts,
    remaining_counts,
)
from bot.domain.controller_logs import redact
from bot.domain.refs import KubeObject

_SERVER_APIS = "unable to retrieve the complete list of server APIs: "
_GV_ERROR = re.compile(r"([a-z0-9.-]*/?v[0-9][a-z0-9]*): ")
_WEBHOOK = re.compile(r'failed calling webhook "([^"]+)"')
_DENIED = re.compile(r'admission webhook "([^"]+)" denied the request')
# k8s.io/apiserver/pkg/admission/plugin/policy/validating (dispatcher.go): the policy's denial, and
# its binding (the message follows `denied request: `)
_POLICY_DENIED = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request")
# admission.NewForbidden (k8s.io/apiserver/pkg/admission/errors.go): `<resource>[.<group>] "<name>" is forbidden:
# <why>`, as every in-tree admission plugin refuses; the name is `Unknown` when the request has none (the items of
# the namespace controller's delete-collection). A plugin's own apierrors.NewForbidden without a name leaves it
# out (`<resource> is forbidden: <why>`). RBAC's refusal is worded the same way but names a user: not admission
_FORBIDDEN = re.compile(r'(?<![\w."/-])([a-z0-9][\w.-]*)(?: "([^"]*)")? is forbidden: ')
_SUBJECT = re.compile(r'[\w.-]+ "[^"]*" is (?:invalid|forbidden): :? ?$')
_RBAC = re.compile(r"^(User|system:serviceaccount:)|\bcannot (delete|deletecollection|list|get|update|patch) resource ")
# the in-tree plugins whose refusal nsstuck knows by its words (plugin/pkg/admission and
# k8s.io/apiserver/pkg/admission/plugin of kubernetes/kubernetes)
_PLUGINS = (
    ("unable to create new content in namespace", "NamespaceLifecycle"),
    ("this namespace may not be deleted", "NamespaceLifecycle"),
    ("cannot set blockOwnerDeletion", "OwnerReferencesPermissionEnforcement"),
    ("admission control is denying all modifications", "AlwaysDeny"),
    ("exceeded quota: ", "ResourceQuota"),
    ("violates PodSecurity ", "PodSecurity"),
    ("can only delete pods with spec.nodeName set to itself", "NodeRestriction"),
)
# one denial quoted, at most this many characters
QUOTE_LIMIT = 300


@dataclass(frozen=True)
class Denial:
    """An admission refusal quoted by the namespace controller's condition: by a webhook, by a
    ValidatingAdmissionPolicy through one of its bindings, or by another admission plugin."""

    kind: str  # webhook | policy | plugin
    name: str  # the webhook's or the policy's name; the plugin's when its words tell it, else ""
    quote: str  # the denial as the condition quotes it, redacted, cut to QUOTE_LIMIT characters
    binding: str = ""  # a policy's binding
    # a plugin's refusal: the resource it names (`configmaps`, `widgets.example.com`) and the object's name as
    # quoted (`Unknown` for a request without one, "" when the refusal names none)
    resource: str = ""
    target: str = ""


# where the next error of an aggregate begins (utilerrors.NewAggregate joins them with ", ")
_NEXT_ERROR = re.compile(
    r', (?=admission webhook "|Internal error occurred|[\w.-]+ "[^"]*" is (?:invalid|forbidden)|'
    r"[\w.-]+ is forbidden: |unexpected items still remain|ValidatingAdmissionPolicy ')"
)


def _end(message: str, start: int) -> int:
    """Where the error of the aggregate that begins at `start` ends."""
    following = _NEXT_ERROR.search(message, start + 1)
    return following.start() if following else len(message)


def _quote(message: str, start: int) -> str:
    """The denial from `start` to the next error of the aggregate (or the end), with anything that looks like a
    credential redacted (a denial may quote what it refused), cut to QUOTE_LIMIT characters."""
    text = redact(message[start : _end(message, start)].rstrip(" ,]"))
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 1] + "\u2026"


def denials(message: str) -> tuple[Denial, ...]:
    """Every admission refusal a condition's message quotes, in order, once each."""
    found: dict[tuple[str, str, str], Denial] = {}
    # the text of the webhooks' and policies' denials: a plugin's words quoted inside one are not a plugin's
    quoted: list[tuple[int, int]] = []
    for match in _DENIED.finditer(message):
        quoted.append((match.start(), _end(message, match.start())))
        found.setdefault(
            ("webhook", match.group(1), ""), Denial("webhook", match.group(1), _quote(message, match.start()))
        )
    for match in _POLICY_DENIED.finditer(message):
        key = ("policy", match.group(1), match.group(2))
        # the API server's error names the object first: `persistentvolumeclaims "x" is invalid: : Validating...`
        subject = _SUBJECT.search(message[: match.start()])
        begin = subject.start() if subject else match.start()
        quoted.append((begin, _end(message, match.start())))
        found.setdefault(key, Denial("policy", match.group(1), _quote(message, begin), match.group(2)))
    for match in _FORBIDDEN.finditer(message):
        if any(start < match.start() < end for start, end in quoted):
            continue
        # this refusal's own words: up to the aggregate's next error, so that a plugin's words or a repeat
        # are not read from the error after it
        rest = message[match.end() :]
        following = _NEXT_ERROR.search(rest)
        why = rest[: following.start()] if following else rest
        if _RBAC.search(why.split(",", 1)[0]) or "denied the request" in why[:200] or "denied request" in why[:200]:
            continue
        plugin = next((name for words, name in _PLUGINS if words in why[:300]), "")
        found.setdefault(
            ("plugin", plugin, f"{match.group(1)} {match.group(2)} {why[:80]}"),
            Denial(
                "plugin",
                plugin,
                _quote(message, match.start()),
                resource=match.group(1),
                target=match.group(2) or "",
            ),
        )
    return tuple(found.values())


@dataclass(frozen=True)
class ConditionFacts:
    present: bool = False
    conditions: tuple[dict[str, Any], ...] = ()
    # group version -> error text, from DiscoveryFailure
    discovery_failures: dict[str, str] = field(default_factory=dict)
    discovery_message: str | None = None
    parsing_failure: str | None = None
    content_failure: str | None = None
    # "kialis.kiali.io" / "pods." -> count
    remaining: dict[str, int] = field(default_factory=dict)
    finalizers_remaining: dict[str, int] = field(default_factory=dict)
    failing_webhooks: tuple[str, ...] = ()
    denying_webhooks: tuple[str, ...] = ()
    # admission refusals quoted by any True condition (webhooks, policies, other plugins)
    denials: tuple[Denial, ...] = ()

    def line(self, kind: str) -> str | None:
        """`namespace condition <type>: <message>` for the evidence, when that condition is True."""
        for cond in self.conditions:
            if cond.get("type") == kind and cond.get("status") == "True":
                return f"namespace condition {kind} ({cond.get('reason')}): {redact(str(cond.get('message')))}"
        return None


def _true(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    for cond in conditions:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def split_group_errors(message: str) -> dict[str, str]:
    """`... server APIs: a/v1: err1, b/v1: err2` -> {"a/v1": "err1", "b/v1": "err2"}."""
    index = message.find(_SERVER_APIS)
    if index < 0:
        return {}
    text = message[index + len(_SERVER_APIS) :]
    starts = list(_GV_ERROR.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(starts):
        if i and text[match.start() - 2 : match.start()] != ", ":
            continue
        end = len(text)
        for later in starts[i + 1 :]:
            if text[later.start() - 2 : later.start()] == ", ":
                end = later.start() - 2
                break
        out[match.group(1)] = text[match.end() : end].strip()
    return out


def parse_conditions(namespace: KubeObject | None) -> ConditionFacts:
    if namespace is None:
        return ConditionFacts()
    raw = [c for c in (namespace.get("status") or {}).get("conditions") or () if isinstance(c, dict)]
    if not raw:
        return ConditionFacts()
    discovery = _true(raw, DISCOVERY)
    parsing = _true(raw, PARSING)
    content = _true(raw, CONTENT_FAILURE)
    remaining = _true(raw, CONTENT_REMAINING)
    finalizers = _true(raw, FINALIZERS_REMAINING)
    content_message = str(content.get("message") or "") if content else ""
    return ConditionFacts(
        present=True,
        conditions=tuple(raw),
        discovery_failures=split_group_errors(str(discovery.get("message") or "")) if discovery else {},
        discovery_message=str(discovery.get("message")) if discovery else None,
        parsing_failure=str(parsing.get("message")) if parsing else None,
        content_failure=content_message or None,
        remaining=remaining_counts(str(remaining.get("message"))) if remaining else {},
        finalizers_remaining=finalizer_counts(str(finalizers.get("message"))) if finalizers else {},
        failing_webhooks=tuple(dict.fromkeys(_WEBHOOK.findall(content_message))),
        denying_webhooks=tuple(dict.fromkeys(_DENIED.findall(content_message))),
        denials=tuple(
            dict.fromkeys(d for c in raw if c.get("status") == "True" for d in denials(str(c.get("message") or "")))
        ),
    )
