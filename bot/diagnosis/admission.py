"""Which admission webhooks a write meets, matched the way the API server matches them.

k8s.io/apiserver/pkg/admission/plugin/webhook: predicates/rules (operations, groups, versions,
resources and subresources, scope), generic/webhook.go (matchPolicy Equivalent, the exempt
admission configuration objects), predicates/namespace and predicates/object (the selectors).
`matchConditions` are CEL: nsstuck cannot evaluate them, so a webhook that has them is assumed to
match, and the match says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.diagnosis.reading import matches_selector

UPDATE = "UPDATE"
DELETE = "DELETE"

# generic/webhook.go: these objects are never sent to webhooks, so that a broken webhook can always be removed
EXEMPT = frozenset(
    ("admissionregistration.k8s.io", resource)
    for resource in (
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    )
)


@dataclass(frozen=True)
class Write:
    """One request nsstuck would send, as admission sees it. A JSON patch is an UPDATE; a delete
    (and each object of a deletecollection) a DELETE. Reads never go through admission."""

    operation: str
    group: str
    version: str
    resource: str
    subresource: str = ""
    # the request's namespace: "" for a cluster-scoped object (a namespace's own requests carry its name)
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    # the versions in which the same resource is served, for matchPolicy Equivalent; () when unknown
    # (then a rule on any version of the same group and resource is taken to match)
    served_versions: tuple[str, ...] = ()

    @property
    def is_namespace(self) -> bool:
        return self.group == "" and self.resource == "namespaces"

    @property
    def cluster_scoped(self) -> bool:
        return self.is_namespace or not self.namespace

    @property
    def shown(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.operation} of {resource}" + (f".{self.group}" if self.group else "")


def _split(resource: str) -> tuple[str, str]:
    main, _, sub = resource.partition("/")
    return main, sub


def _resource_matches(rule: Mapping[str, Any], write: Write) -> bool:
    """rules.go: `*` is every resource and no subresource, `*/*` every subresource too, `pods/*`
    pods and all its subresources, `*/status` every status subresource, `pods/status` only that."""
    for entry in rule.get("resources") or ():
        res, sub = _split(str(entry))
        if res in ("*", write.resource) and sub in ("*", write.subresource):
            return True
    return False


def _scope_matches(rule: Mapping[str, Any], write: Write) -> bool:
    scope = rule.get("scope") or "*"
    if scope == "Namespaced":
        return not write.cluster_scoped
    if scope == "Cluster":
        return write.cluster_scoped
    return True


def rule_matches(rule: Mapping[str, Any], write: Write, *, version: str | None = None) -> bool:
    """One RuleWithOperations against the write, in `version` (the write's own by default)."""
    operations = rule.get("operations") or ()
    if "*" not in operations and write.operation not in operations:
        return False
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and write.group not in groups:
        return False
    versions = rule.get("apiVersions") or ()
    wanted = write.version if version is None else version
    if "*" not in versions and wanted not in versions:
        return False
    return _resource_matches(rule, write) and _scope_matches(rule, write)


def _rules_match(webhook: Mapping[str, Any], write: Write) -> str | None:
    """None when no rule matches; otherwise "" or a note on how (matchPolicy Equivalent)."""
    rules = list(webhook.get("rules") or ())
    if any(rule_matches(rule, write) for rule in rules):
        return ""
    if (webhook.get("matchPolicy") or "Equivalent") != "Equivalent":
        return None
    # the API server converts the request to each other version in which the resource is served
    for rule in rules:
        versions = [str(v) for v in rule.get("apiVersions") or () if v != write.version]
        candidates = [v for v in versions if not write.served_versions or v in write.served_versions]
        for version in candidates:
            if rule_matches(rule, write, version=version):
                return f"matchPolicy Equivalent: its rule on {version} matches the same resource"
    return None


def _namespace_selector_matches(webhook: Mapping[str, Any], write: Write) -> bool:
    # predicates/namespace: a cluster-scoped request other than a namespace's own is never exempted
    if write.cluster_scoped and not write.is_namespace:
        return True
    labels = write.labels if write.is_namespace else write.namespace_labels
    return matches_selector(labels, webhook.get("namespaceSelector"))


@dataclass(frozen=True)
class Match:
    """A webhook that the write is sent to."""

    webhook: str
    notes: tuple[str, ...] = ()


def webhook_matches(webhook: Mapping[str, Any], write: Write) -> Match | None:
    """Whether the API server sends `write` to `webhook` (of a Validating- or MutatingWebhookConfiguration)."""
    if (write.group, write.resource) in EXEMPT:
        return None
    how = _rules_match(webhook, write)
    if how is None:
        return None
    if not _namespace_selector_matches(webhook, write):
        return None
    if not matches_selector(write.labels, webhook.get("objectSelector")):
        return None
    notes = [how] if how else []
    if webhook.get("matchConditions"):
        names = ", ".join(str(c.get("name", "?")) for c in webhook.get("matchConditions") or ())
        notes.append(f"its matchConditions ({names}) are CEL that nsstuck cannot evaluate: assumed to match")
    return Match(webhook=str(webhook.get("name", "")), notes=tuple(notes))
