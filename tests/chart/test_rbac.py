"""The chart's RBAC is the tables in code: the read-only ClusterRole is READ_PERMISSIONS, the
remediation ClusterRole is PERMISSIONS, nothing writes unless remediation.enabled, and finalizers are
removed only from the resources of the finalizer catalogue plus those remediation.finalizerResources
adds: never `*`, never a subresource."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.domain.access import READ_VERBS, Rule, grants
from bot.domain.findings import Action
from bot.kube.permissions import READ_PERMISSIONS, REQUESTER_REVIEWS
from bot.remediation.kinds.remove_finalizer import catalogue_rules
from bot.remediation.permissions import IMPERSONATION, PERMISSIONS, extra_finalizer_rules, remediation_rules
from tests.chart.conftest import HelmError, Render, find, one

REMEDIATION_ON = {"remediation": {"enabled": True}}
FINALIZER_RESOURCES = Path(__file__).resolve().parents[2] / "helm" / "nsstuck" / "files" / "finalizer-resources.yaml"


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
    # the writes, exactly the documented ones (docs/rbac.md): patch on the catalogue's resources...
    catalogue = {("patch", group, resource) for group, resource in catalogue_resources()}
    documented = catalogue | {
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


def catalogue_resources() -> set[tuple[str, str]]:
    """The (group, resource) pairs the catalogue's finalizers sit on, but for cluster-scoped ones and
    the namespace itself (remove_namespace_finalizer's), which hold no namespace."""
    return {(group, resource) for rule in catalogue_rules() for group in rule.api_groups for resource in rule.resources}


def test_the_finalizer_rules_are_the_catalogues_with_no_wildcard_and_no_subresource(render: Render) -> None:
    role = one(render(REMEDIATION_ON), "ClusterRole", "nsstuck-remediate")
    for rule in _rules(role):
        assert "*" not in rule.api_groups, rule
        assert "*" not in rule.verbs, rule
        assert not any("*" in r or "/" in r for r in rule.resources if r != "namespaces/finalize"), rule
    assert {(g, r) for verb, g, r in grants(_rules(role)) if verb == "patch"} >= catalogue_resources()
    # the catalogue's resources, less what holds no namespace
    assert ("kiali.io", "kialis") in catalogue_resources()
    assert ("argoproj.io", "applications") in catalogue_resources()
    assert ("", "nodes") not in catalogue_resources()
    assert ("", "namespaces") not in catalogue_resources()
    assert grants(PERMISSIONS[Action.REMOVE_FINALIZER]) == {
        (verb, g, r) for verb in ("get", "patch") for g, r in catalogue_resources()
    }


def test_the_chart_file_of_finalizer_resources_is_the_catalogues() -> None:
    listed = yaml.safe_load(FINALIZER_RESOURCES.read_text())["resources"]
    expected = sorted(f"{r}.{g}" if g else r for g, r in catalogue_resources())
    assert listed == expected, "run `.venv/bin/python scripts/finalizer-resources` and commit the file"


def test_finalizer_resources_add_to_the_catalogues(render: Render) -> None:
    values = {"remediation": {"enabled": True, "finalizerResources": ["widgets.example.com", "limitranges"]}}
    docs = render(values)
    role = one(docs, "ClusterRole", "nsstuck-remediate")
    added = {(verb, g, r) for verb in ("get", "patch") for g, r in (("example.com", "widgets"), ("", "limitranges"))}
    assert grants(_rules(role)) == grants(remediation_rules()) | added
    assert grants(_rules(role)) == grants(remediation_rules()) | grants(
        extra_finalizer_rules(["widgets.example.com", "limitranges"])
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"remediation": {"enabled": True, "finalizerResources": ["Kialis/kiali"]}}, "is not RESOURCE"),
        ({"remediation": {"enabled": True, "finalizerResources": ["*"]}}, "never \\*"),
        ({"remediation": {"enabled": True, "finalizerResources": ["*.example.io"]}}, "never \\*"),
        ({"remediation": {"enabled": True, "finalizerResources": ["pods/ephemeralcontainers"]}}, "is not RESOURCE"),
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


def test_requester_reviews_are_granted_only_when_the_values_ask(render: Render) -> None:
    assert not [r for r in find(render(), "ClusterRole") if "requester" in r["metadata"]["name"]]
    docs = render({"rbac": {"requesterReviews": True}})
    role = one(docs, "ClusterRole", "nsstuck-requester-reviews")
    assert grants(_rules(role)) == grants(REQUESTER_REVIEWS)
    assert "nsstuck-requester-reviews" in {b["roleRef"]["name"] for b in find(docs, "ClusterRoleBinding")}
