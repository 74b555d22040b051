"""bot/diagnosis/conditions.py on its own: the namespace controller's messages parsed into facts.

The scenarios reach the common messages; these are the ones they do not: refusals by in-tree admission
plugins (and RBAC's, which are not admission), a discovery message whose error text names a group version
itself, a message that is not a discovery failure, and no namespace at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.diagnosis.conditions import ConditionFacts, Denial, denials, parse_conditions, split_group_errors

_LIFECYCLE = 'pods "web-0" is forbidden: unable to create new content in namespace shop because it is being terminated'


def test_a_namespace_lifecycle_refusal_is_a_plugin_denial_named_by_its_words() -> None:
    message = f"Failed to delete all resource types, 1 remaining: {_LIFECYCLE}"
    assert denials(message) == (Denial("plugin", "NamespaceLifecycle", _LIFECYCLE, resource="pods", target="web-0"),)


def test_a_refusal_in_words_nsstuck_does_not_know_is_an_unnamed_plugin_denial_cut_at_the_next_error() -> None:
    unknown = 'configmaps "settings" is forbidden: the tenancy check refuses it: owner team-a, requested by team-b'
    message = f"{unknown}, {_LIFECYCLE}"
    found = denials(message)
    assert [(d.kind, d.name) for d in found] == [("plugin", ""), ("plugin", "NamespaceLifecycle")]
    # the first quote ends where the aggregate's next error begins
    assert found[0].quote == unknown
    assert found[1].quote == _LIFECYCLE


@pytest.mark.parametrize(
    "message",
    [
        # RBAC's own refusal names a user: not admission
        'pods "web-0" is forbidden: User "system:serviceaccount:kube-system:namespace-controller" cannot delete '
        'resource "pods" in API group "" in the namespace "shop"',
        'secrets "s" is forbidden: cannot deletecollection resource "secrets" in API group ""',
    ],
)
def test_an_rbac_refusal_is_not_an_admission_denial(message: str) -> None:
    assert denials(message) == ()


def test_a_forbidden_that_quotes_a_webhook_is_the_webhook_denial_only() -> None:
    message = 'pods "web-0" is forbidden: admission webhook "guard.example.com" denied the request: protected'
    found = denials(message)
    assert [(d.kind, d.name) for d in found] == [("webhook", "guard.example.com")]


def test_one_refusal_repeated_is_quoted_once() -> None:
    message = f"{_LIFECYCLE}, {_LIFECYCLE}"
    assert len(denials(message)) == 1


def test_a_long_plugin_denial_is_cut_to_the_quote_limit() -> None:
    message = 'pods "p" is forbidden: cannot set blockOwnerDeletion ' + "x" * 400
    (denial,) = denials(message)
    assert denial.name == "OwnerReferencesPermissionEnforcement"
    assert len(denial.quote) == 300
    assert denial.quote.endswith("\u2026")


def test_a_message_that_is_not_a_discovery_failure_splits_into_nothing() -> None:
    assert split_group_errors("Discovery failed for some groups, 1 failing: something else entirely") == {}


def test_a_group_version_named_inside_an_error_text_is_part_of_that_error() -> None:
    message = (
        "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: "
        "a.example.io/v1: conversion failed: decoding b.example.io/v2: bad data, "
        "metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
    )
    assert split_group_errors(message) == {
        "a.example.io/v1": "conversion failed: decoding b.example.io/v2: bad data",
        "metrics.k8s.io/v1beta1": "the server is currently unable to handle the request",
    }


def test_no_namespace_object_has_no_facts() -> None:
    facts = parse_conditions(None)
    assert facts == ConditionFacts()
    assert facts.present is False
    assert facts.line("NamespaceDeletionContentFailure") is None


def _namespace(conditions: list[Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}, "status": {"conditions": conditions}}


def test_a_plugin_refusal_in_a_true_condition_is_among_the_facts_and_a_false_ones_is_not() -> None:
    true = {
        "type": "NamespaceDeletionContentFailure",
        "status": "True",
        "reason": "ContentDeletionFailed",
        "message": f"Failed to delete all resource types, 1 remaining: {_LIFECYCLE}",
    }
    false = {
        "type": "NamespaceDeletionGroupVersionParsingFailure",
        "status": "False",
        "reason": "ParsedGroupVersions",
        "message": 'configmaps "c" is forbidden: exceeded quota: compute',
    }
    facts = parse_conditions(_namespace([true, false, "not a condition"]))
    assert facts.present is True
    assert len(facts.conditions) == 2
    assert facts.denials == (Denial("plugin", "NamespaceLifecycle", _LIFECYCLE, resource="pods", target="web-0"),)
    assert facts.failing_webhooks == ()
    assert facts.parsing_failure is None
    assert facts.line("NamespaceDeletionContentFailure") == (
        f"namespace condition NamespaceDeletionContentFailure (ContentDeletionFailed): {true['message']}"
    )
