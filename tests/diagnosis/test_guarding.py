"""Remedies checked against admission (bot/diagnosis/guarding.py), on snapshots built from dicts:
the paths the widget scenarios do not reach (/finalize, URL webhooks, matchConditions)."""

from __future__ import annotations

from typing import Any

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Diagnosis, Remedy
from tests.diagnosis.test_rules import _configmap, _snapshot


def _config(rule: dict[str, Any], *, url: bool = False, **extra: Any) -> dict[str, Any]:
    client = (
        {"url": "https://guard.example.com/validate"} if url else {"service": {"namespace": "guard", "name": "gone"}}
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "guard"},
        "webhooks": [{"name": "guard.example.com", "rules": [rule], "clientConfig": client, **extra}],
    }


def _diagnosis(config: dict[str, Any]) -> Diagnosis:
    held = _configmap("held", finalizers=["example.com/cleanup"])
    return diagnose(_snapshot(contents={"configmaps": (held,)}, webhook_configurations=(config,)))


def _remedies(diagnosis: Diagnosis) -> list[Remedy]:
    return [r for f in diagnosis.findings for r in f.remedies]


def _one(diagnosis: Diagnosis, action: Action) -> Remedy:
    [remedy] = [r for r in _remedies(diagnosis) if r.action is action]
    return remedy


FINALIZE = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces/finalize"]}


def test_a_webhook_on_namespaces_finalize_blocks_force_finalize_only() -> None:
    diagnosis = _diagnosis(_config(FINALIZE))
    force = _one(diagnosis, Action.FORCE_FINALIZE_NAMESPACE)
    assert [(b.configuration, b.webhook) for b in force.blocked_by] == [("guard", "guard.example.com")]
    assert _one(diagnosis, Action.REMOVE_FINALIZER).blocked_by == ()
    [finding] = [f for f in diagnosis.findings if force in f.remedies]
    actions = [r.action for r in finding.remedies]
    assert actions.index(Action.DELETE_WEBHOOK_CONFIGURATION) < actions.index(Action.FORCE_FINALIZE_NAMESPACE)
    assert any("intercepts UPDATE of namespaces/finalize" in e for e in finding.evidence)
    assert any(o.kind == "ValidatingWebhookConfiguration" and o.name == "guard" for o in finding.objects)
    assert _one(diagnosis, Action.DELETE_WEBHOOK_CONFIGURATION).blocked_by == ()
    assert Diagnosis.from_json(diagnosis.to_json()) == diagnosis


def test_a_rule_on_namespaces_is_not_one_on_its_finalize_subresource() -> None:
    rule = {**FINALIZE, "resources": ["namespaces"]}
    assert all(not r.blocked_by for r in _remedies(_diagnosis(_config(rule))))


def test_match_conditions_are_assumed_to_match_and_the_evidence_says_so() -> None:
    rule = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    diagnosis = _diagnosis(_config(rule, matchConditions=[{"name": "skip-system", "expression": "true"}]))
    assert _one(diagnosis, Action.REMOVE_FINALIZER).blocked_by
    evidence = [e for f in diagnosis.findings for e in f.evidence]
    assert any("skip-system" in e and "assumed to match" in e for e in evidence)


def test_a_url_webhook_is_said_but_blocks_nothing() -> None:
    rule = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}
    diagnosis = _diagnosis(_config(rule, url=True))
    assert all(not r.blocked_by for r in _remedies(diagnosis))
    evidence = [e for f in diagnosis.findings for e in f.evidence]
    assert any("https://guard.example.com/validate; nsstuck cannot check whether it answers" in e for e in evidence)


def test_failure_policy_ignore_blocks_nothing() -> None:
    rule = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}
    assert all(not r.blocked_by for r in _remedies(_diagnosis(_config(rule, failurePolicy="Ignore"))))
