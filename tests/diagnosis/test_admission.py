"""The matching of nsstuck's own writes against admission webhooks (bot/diagnosis/admission.py),
one test per rule of k8s.io/apiserver's webhook predicates."""

from __future__ import annotations

from typing import Any

import pytest

from bot.diagnosis.admission import DELETE, UPDATE, Write, webhook_matches


def hook(*rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "w.example.com", "rules": list(rules), **extra}


def rule(ops: list[str], groups: list[str], versions: list[str], resources: list[str], **extra: Any) -> dict[str, Any]:
    return {"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources, **extra}


KIALI_PATCH = Write(UPDATE, "kiali.io", "v1alpha1", "kialis", namespace="obs", labels={"app": "kiali"})
POD_DELETE = Write(DELETE, "", "v1", "pods", namespace="obs", labels={"app": "web"}, namespace_labels={"team": "a"})
FINALIZE = Write(UPDATE, "", "v1", "namespaces", "finalize", namespace="obs", labels={"team": "a"})


@pytest.mark.parametrize(
    ("ops", "write", "matches"),
    [
        (["UPDATE"], KIALI_PATCH, True),
        (["*"], KIALI_PATCH, True),
        (["DELETE"], KIALI_PATCH, False),  # a JSON patch is an UPDATE
        (["CREATE", "UPDATE"], KIALI_PATCH, True),
        (["DELETE"], POD_DELETE, True),
        (["UPDATE"], POD_DELETE, False),
    ],
)
def test_operations(ops: list[str], write: Write, matches: bool) -> None:
    r = rule(ops, ["*"], ["*"], ["*"])
    assert (webhook_matches(hook(r), write) is not None) is matches


def test_groups_versions_and_resources() -> None:
    assert webhook_matches(hook(rule(["*"], ["kiali.io"], ["v1alpha1"], ["kialis"])), KIALI_PATCH)
    assert webhook_matches(hook(rule(["*"], ["apps"], ["*"], ["*"])), KIALI_PATCH) is None
    assert webhook_matches(hook(rule(["*"], ["kiali.io"], ["*"], ["configmaps"])), KIALI_PATCH) is None


def test_match_policy_equivalent_matches_another_served_version() -> None:
    write = Write(UPDATE, "kiali.io", "v1alpha1", "kialis", namespace="obs", served_versions=("v1alpha1", "v1"))
    on_v1 = rule(["UPDATE"], ["kiali.io"], ["v1"], ["kialis"])
    match = webhook_matches(hook(on_v1), write)  # Equivalent is the default
    assert match is not None
    assert "matchPolicy Equivalent" in match.notes[0]
    assert webhook_matches(hook(on_v1, matchPolicy="Exact"), write) is None
    # a version the resource is not served in is no equivalent
    on_v2 = rule(["UPDATE"], ["kiali.io"], ["v2"], ["kialis"])
    assert webhook_matches(hook(on_v2), write) is None


@pytest.mark.parametrize(
    ("resources", "write", "matches"),
    [
        (["*"], KIALI_PATCH, True),
        (["*"], FINALIZE, False),  # `*` is no subresource
        (["*/*"], FINALIZE, True),
        (["*/*"], KIALI_PATCH, True),
        (["namespaces"], FINALIZE, False),
        (["namespaces/finalize"], FINALIZE, True),
        (["namespaces/status"], FINALIZE, False),
        (["*/finalize"], FINALIZE, True),
        (["namespaces/*"], FINALIZE, True),
        (["namespaces/*"], Write(UPDATE, "", "v1", "namespaces", namespace="obs"), True),
        (["pods/status"], POD_DELETE, False),
    ],
)
def test_resources_and_subresources(resources: list[str], write: Write, matches: bool) -> None:
    r = rule(["*"], ["*"], ["*"], resources)
    assert (webhook_matches(hook(r), write) is not None) is matches


def test_scope() -> None:
    namespaced = rule(["*"], ["*"], ["*"], ["*/*"], scope="Namespaced")
    cluster = rule(["*"], ["*"], ["*"], ["*/*"], scope="Cluster")
    assert webhook_matches(hook(namespaced), POD_DELETE)
    assert webhook_matches(hook(cluster), POD_DELETE) is None
    # a namespace (and its /finalize) is cluster-scoped, though its requests carry its name
    assert webhook_matches(hook(cluster), FINALIZE)
    assert webhook_matches(hook(namespaced), FINALIZE) is None


def test_namespace_selector() -> None:
    everything = rule(["*"], ["*"], ["*"], ["*/*"])
    assert webhook_matches(hook(everything, namespaceSelector={"matchLabels": {"team": "a"}}), POD_DELETE)
    assert webhook_matches(hook(everything, namespaceSelector={"matchLabels": {"team": "b"}}), POD_DELETE) is None
    # a namespace's own requests: its own labels
    assert webhook_matches(hook(everything, namespaceSelector={"matchLabels": {"team": "a"}}), FINALIZE)
    # a cluster-scoped object other than a namespace is never exempted by the namespace selector
    apiservice = Write(DELETE, "apiregistration.k8s.io", "v1", "apiservices")
    assert webhook_matches(hook(everything, namespaceSelector={"matchLabels": {"team": "b"}}), apiservice)


def test_object_selector() -> None:
    everything = rule(["*"], ["*"], ["*"], ["*"])
    expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["kiali"]}]}
    assert webhook_matches(hook(everything, objectSelector=expr), KIALI_PATCH)
    assert webhook_matches(hook(everything, objectSelector={"matchLabels": {"app": "other"}}), KIALI_PATCH) is None


def test_match_conditions_are_assumed_to_match_and_said_so() -> None:
    conditioned = hook(rule(["*"], ["*"], ["*"], ["*"]), matchConditions=[{"name": "not-system", "expression": "true"}])
    match = webhook_matches(conditioned, KIALI_PATCH)
    assert match is not None
    assert any("not-system" in n and "assumed to match" in n for n in match.notes)


@pytest.mark.parametrize("resource", ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"])
def test_webhook_configurations_are_never_sent_to_webhooks(resource: str) -> None:
    write = Write(DELETE, "admissionregistration.k8s.io", "v1", resource)
    assert webhook_matches(hook(rule(["*"], ["*"], ["*"], ["*/*"])), write) is None
