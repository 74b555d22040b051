"""The chart's RBAC is the tables in code: the read-only ClusterRole is READ_PERMISSIONS, the
remediation ClusterRole is PERMISSIONS, nothing writes unless remediation.enabled, and the one
broad write rule narrows to the resources listed in remediation.finalizerResources."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.access import READ_VERBS, Rule, grants
from bot.domain.findings import Action
from bot.kube.permissions import READ_PERMISSIONS
from bot.remediation.permissions import IMPERSONATION, PERMISSIONS, remediation_rules
from tests.chart.conftest import HelmError, Render, find, one

REMEDIATION_ON = {"remediation": {"enabled": True}}


def _rules(role: dict[str, Any]) -> list[Rule]:
    return [Rule.from_policy_rule(r) for r in role.get("rules") or ()]


def _write_grants(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        grant
        for kind in ("ClusterRole", "Role")
        for role in find(docs, kind)
        for grant in grants(_rules(role))
        if grant[0] not in READ_VERBS
    }


def test_remediation_off_grants_no_write_verb(render: Render) -> None:
    docs = render()
    assert not _write_grants(docs)
    assert [r["metadata"]["name"] for r in find(docs, "ClusterRole")] == ["nsstuck-read"]
    assert not find(docs, "Role")
    # and the cluster nsstuck runs in offers no remediation button it could not carry out
    config = one(docs, "ConfigMap")["data"]["nsstuck.yaml"]
    assert "remediation: false" in config


def test_the_read_role_is_the_read_table(render: Render) -> None:
    role = one(render(), "ClusterRole", "nsstuck-read")
    assert grants(_rules(role)) == grants(READ_PERMISSIONS)
    assert {verb for rule in _rules(role) for verb in rule.verbs} == {"get", "list"}


def test_the_remediation_role_is_the_remediation_table(render: Render) -> None:
    docs = render(REMEDIATION_ON)
    role = one(docs, "ClusterRole", "nsstuck-remediate")
    assert grants(_rules(role)) == grants(remediation_rules())
    # the writes, exactly the documented ones (README "RBAC")
    documented = {
        ("patch", "*", "*"),
        ("patch", "", "namespaces"),
        ("update", "", "namespaces/finalize"),
        ("delete", "apiregistration.k8s.io", "apiservices"),
        ("delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("delete", "", "pods"),
    }
    assert _write_grants(docs) == documented
    assert {g for g in grants(remediation_rules()) if g[0] not in READ_VERBS} == documented


def test_every_remedy_is_granted(render: Render) -> None:
    role = one(render(REMEDIATION_ON), "ClusterRole", "nsstuck-remediate")
    rules = _rules(role)
    for action, needed in PERMISSIONS.items():
        assert grants(needed) <= grants(rules), action


def test_roles_are_bound_to_the_service_account(render: Render) -> None:
    docs = render(REMEDIATION_ON)
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    bindings = find(docs, "ClusterRoleBinding")
    assert {b["roleRef"]["name"] for b in bindings} == {"nsstuck-read", "nsstuck-remediate"}
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "platform"}]
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account


def test_finalizer_resources_narrow_the_broad_rule(render: Render) -> None:
    values = {"remediation": {"enabled": True, "finalizerResources": ["kialis.kiali.io", "configmaps", "*.example.io"]}}
    role = one(render(values), "ClusterRole", "nsstuck-remediate")
    broad = Rule(("*",), ("*",), ("get", "patch"))
    expected = (grants(remediation_rules()) - broad.grants()) | {
        (verb, group, resource)
        for verb in ("get", "patch")
        for group, resource in (("kiali.io", "kialis"), ("", "configmaps"), ("example.io", "*"))
    }
    assert grants(_rules(role)) == expected
    assert not any("*" in rule.api_groups for rule in _rules(role))
    assert PERMISSIONS[Action.REMOVE_FINALIZER] == (broad,)  # what the default ["*"] stands for


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"remediation": {"enabled": True, "finalizerResources": []}}, "finalizerResources is empty"),
        ({"remediation": {"enabled": True, "finalizerResources": ["Kialis/kiali"]}}, "is not"),
        (
            {"config": {"clusters": [{"name": "local", "in_cluster": True, "remediation": True}]}},
            "remediation.enabled is false",
        ),
    ],
)
def test_remediation_values_that_are_refused(render: Render, values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError, match=message):
        render(values)


def test_rbac_can_be_left_to_the_operator(render: Render) -> None:
    docs = render({"rbac": {"create": False}, "remediation": {"enabled": True}})
    assert not find(docs, "ClusterRole")
    assert not find(docs, "ClusterRoleBinding")


ACT_AS_APPROVER = {
    "remediation": {
        "enabled": True,
        "actAsApprover": {"enabled": True, "users": ["alice@example.com", "bob@example.com"], "groups": ["sre"]},
    }
}


def test_acting_as_the_approver_grants_impersonation_and_no_write(render: Render) -> None:
    docs = render(ACT_AS_APPROVER)
    assert sorted(r["metadata"]["name"] for r in find(docs, "ClusterRole")) == ["nsstuck-impersonate", "nsstuck-read"]
    role = one(docs, "ClusterRole", "nsstuck-impersonate")
    # what the code sends (Impersonate-User, Impersonate-Group), and nothing more
    assert grants(_rules(role)) == grants(IMPERSONATION)
    # limited by name to the values, never any user or group
    assert [(r["resources"], r["resourceNames"]) for r in role["rules"]] == [
        (["users"], ["alice@example.com", "bob@example.com"]),
        (["groups"], ["sre"]),
    ]
    # nsstuck itself writes nothing: no rule but impersonate beyond the read role
    assert {g for g in _write_grants(docs) if g[0] != "impersonate"} == set()
    assert {b["roleRef"]["name"] for b in find(docs, "ClusterRoleBinding")} == {"nsstuck-read", "nsstuck-impersonate"}
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    for binding in find(docs, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "platform"}]


def test_acting_as_the_approver_without_groups_impersonates_no_group(render: Render) -> None:
    values = {"remediation": {"enabled": True, "actAsApprover": {"enabled": True, "users": ["alice@example.com"]}}}
    role = one(render(values), "ClusterRole", "nsstuck-impersonate")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice@example.com"]}
    ]


@pytest.mark.parametrize(
    ("act", "message"),
    [
        ({"enabled": True, "users": []}, "remediation.actAsApprover.users is empty"),
        ({"enabled": True, "users": ["system:admin"]}, '"system:admin": nsstuck never acts as'),
        ({"enabled": True, "users": ["alice"], "groups": ["system:masters"]}, '"system:masters": nsstuck never'),
        ({"enabled": True, "users": ["alice"], "groups": [""]}, 'remediation.actAsApprover: "": nsstuck never'),
    ],
)
def test_act_as_approver_values_that_are_refused(render: Render, act: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError, match=message):
        render({"remediation": {"enabled": True, "actAsApprover": act}})


def test_act_as_approver_needs_remediation_and_the_chart_mode(render: Render) -> None:
    with pytest.raises(HelmError, match=r"actAsApprover\.enabled needs remediation\.enabled"):
        render({"remediation": {"actAsApprover": {"enabled": True, "users": ["alice"]}}})
    cluster = {"name": "local", "in_cluster": True, "remediation": True, "act_as_approver": True}
    with pytest.raises(HelmError, match=r"remediation\.actAsApprover\.enabled is false"):
        render({"remediation": {"enabled": True}, "config": {"clusters": [cluster]}})
