"""bot/diagnosis/policies.py on snapshots built from dicts: a ValidatingAdmissionPolicy's denial, quoted by
the namespace controller's condition, with the policy and binding shapes the emulator's case does not have.

(tests/diagnosis/test_admission_denials.py has the case of kubernetes/kubernetes#129883 end to end: a
binding whose parameter went first, with validations.)
"""

from __future__ import annotations

from typing import Any

from bot.diagnosis import policies
from bot.diagnosis.context import Context
from bot.domain.findings import Action, Cause, Finding
from bot.domain.refs import ClusterName
from bot.domain.snapshot import NamespaceSnapshot, ResourceType
from tests.diagnosis.test_rules import CONFIGMAPS, NOW, _configmap, _namespace

SECRETS = ResourceType("", "v1", "secrets", "Secret", True, ("list", "delete"))
DENIAL = (
    "ValidatingAdmissionPolicy 'keep-config' with binding 'keep-config-prod' denied request: "
    "configuration is kept while the team label is set"
)


def _condition() -> dict[str, str]:
    return {
        "type": "NamespaceDeletionContentFailure",
        "status": "True",
        "reason": "ContentDeletionFailed",
        "message": f'Failed to delete all resource types, 1 remaining: configmaps "app" is forbidden: {DENIAL}',
    }


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "keep-config"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["configmaps"]}
                ]
            },
            **spec,
        },
    }


def _binding(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "keep-config-prod"},
        "spec": {"policyName": "keep-config", "validationActions": ["Deny"], **spec},
    }


def _finding(*admission: dict[str, Any], contents: dict[str, Any] | None = None) -> Finding:
    snapshot = NamespaceSnapshot(
        cluster=ClusterName("c"),
        namespace="ns",
        observed_at=NOW,
        namespace_object=_namespace([_condition()]),
        resource_types=(CONFIGMAPS, SECRETS),
        contents=contents
        if contents is not None
        else {"configmaps": (_configmap("app"),), "secrets": (_configmap("token") | {"kind": "Secret"},)},
        admission_policies=admission,
    )
    (finding,) = policies.findings(Context(snapshot))
    return finding


def test_a_binding_that_narrows_by_namespace_takes_only_what_the_policys_rules_match() -> None:
    selector = {"matchLabels": {"team": "a"}}
    finding = _finding(
        _policy(matchConditions=[{"name": "not-system", "expression": "true"}]),
        _binding(matchResources={"namespaceSelector": selector}),
    )
    assert finding.cause is Cause.WEBHOOK_BLOCKS_DELETE
    assert finding.summary == (
        f"ValidatingAdmissionPolicy keep-config (binding keep-config-prod) denies the namespace's deletion: "
        f"the API server refuses ({'configmaps ' + chr(34) + 'app' + chr(34) + ' is forbidden: ' + DENIAL})"
    )
    # the policy's rules take the configmap's DELETE, not the secret's
    assert [(o.kind, o.name) for o in finding.objects] == [
        ("ValidatingAdmissionPolicy", "keep-config"),
        ("ValidatingAdmissionPolicyBinding", "keep-config-prod"),
        ("ConfigMap", "app"),
    ]
    evidence = "\n".join(finding.evidence)
    assert "its matchConditions (not-system) are CEL that nsstuck does not evaluate" in evidence
    assert "its validations are CEL" not in evidence
    assert "paramRef" not in evidence
    assert f"its matchResources.namespaceSelector: {selector}" in finding.evidence
    assert (
        "left in the namespace, matched by the policy's rules for DELETE (as far as its match rules go): " in evidence
    )
    assert [r.action for r in finding.remedies] == [Action.INVESTIGATE, Action.INVESTIGATE]
    assert finding.remedies[1].commands == ("kubectl delete validatingadmissionpolicybinding keep-config-prod",)


def test_a_binding_whose_namespace_selector_leaves_this_namespace_out_takes_nothing() -> None:
    finding = _finding(_policy(), _binding(matchResources={"namespaceSelector": {"matchLabels": {"team": "b"}}}))
    assert [o.kind for o in finding.objects] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert (
        "no object left in the namespace is matched by the policy's resource rules as nsstuck reads them"
        in finding.evidence
    )


def test_a_binding_gone_from_the_cluster_is_said_and_not_offered_for_deletion() -> None:
    finding = _finding(_policy())
    assert "ValidatingAdmissionPolicyBinding keep-config-prod is not in the cluster now" in finding.evidence
    # without the binding, the policy's own rules say what is taken
    assert [(o.kind, o.name) for o in finding.objects] == [
        ("ValidatingAdmissionPolicy", "keep-config"),
        ("ConfigMap", "app"),
    ]
    assert [r.action for r in finding.remedies] == [Action.INVESTIGATE]
    assert not any("delete validatingadmissionpolicybinding" in c for r in finding.remedies for c in r.commands)


def test_a_binding_with_a_parameter_that_is_found_is_not_said_to_refuse_for_want_of_it() -> None:
    finding = _finding(
        _policy(paramKind={"apiVersion": "example.com/v1", "kind": "KeepRules"}),
        _binding(paramRef={"selector": {"matchLabels": {"env": "prod"}}, "namespace": "policy-params"}),
    )
    assert (
        "its paramRef: KeepRules selected by {'matchLabels': {'env': 'prod'}} in policy-params, "
        "parameterNotFoundAction Deny"
    ) in finding.evidence
    assert not any("finds no parameter object" in e for e in finding.evidence)
