"""`diagnose_as: requester` and `requesters:` in the config file (issue 39, part 1): a malformed block is
a clear config error (exit 2 from `nsstuck config check`, one line); `clusters check` asks for the
SubjectAccessReview permission on such a cluster only; the emulator answers a SubjectAccessReview for a
given user and groups from its RBAC objects, RoleBindings in the namespace included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.settings import load_config
from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import Api

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _config(tmp_path: Path, kubeconfig: str, cluster: str = "", top: str = "") -> Path:
    path = tmp_path / "nsstuck.yaml"
    path.write_text(f"clusters:\n  - name: prod-eu\n    kubeconfig: {kubeconfig}\n{cluster}{top}")
    return path


def test_a_requester_cluster_and_its_mapping_load(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "k",
        "    diagnose_as: requester\n",
        "requesters:\n  - {slack: U0AAAAAAA, user: alice, groups: [tenants-a]}\n"
        "  - {email: bob@example.com, user: bob}\n",
    )
    (tmp_path / "k").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    config = load_config(path)
    assert config.clusters[0].as_requester
    alice = config.requester(slack="U0AAAAAAA")
    assert alice is not None
    assert alice.groups == ("tenants-a",)
    bob = config.requester(email="Bob@Example.com")
    assert bob is not None
    assert (bob.user, bob.groups) == ("bob", ())
    assert not load_config(_config(tmp_path, "k")).clusters[0].as_requester  # off by default


@pytest.mark.parametrize(
    ("cluster", "top", "message"),
    [
        ("    diagnose_as: tenant\n", "", "diagnose_as"),
        ("", "requesters:\n  - {slack: C0123ABCD, user: alice}\n", "'C0123ABCD' is not a Slack user ID"),
        ("", "requesters:\n  - {slack: U0AAAAAAA, user: system:admin}\n", "nsstuck never acts as a system: identity"),
        ("", "requesters:\n  - {slack: U0AAAAAAA, user: alice, groups: [system:masters]}\n", "groups[0]"),
        ("", "requesters:\n  - {slack: U0AAAAAAA, user: alice, role: admin}\n", "role"),
        ("", "requesters:\n  - {user: alice}\n", "exactly one of slack:"),
        ("", "requesters:\n  - {slack: U0AAAAAAA, email: a@example.com, user: alice}\n", "exactly one of slack:"),
        ("", "requesters:\n  - {email: alice, user: alice}\n", "'alice' is not an e-mail address"),
    ],
)
def test_a_malformed_requester_block_is_a_config_error(tmp_path: Path, cluster: str, top: str, message: str) -> None:
    path = _config(tmp_path, str(tmp_path / "kubeconfig"), cluster, top)
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    done = run_nsstuck("config", "check", "--config", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _grant(api: Api, name: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]], *, ns: str = "") -> None:
    group = "rbac.authorization.k8s.io"
    where = f"{RBAC}/namespaces/{ns}" if ns else RBAC
    role_kind, binding_kind = ("Role", "RoleBinding") if ns else ("ClusterRole", "ClusterRoleBinding")
    api.http.post(
        f"{where}/{role_kind.lower()}s",
        {"apiVersion": f"{group}/v1", "kind": role_kind, "metadata": {"name": name}, "rules": rules},
    )
    binding = {
        "apiVersion": f"{group}/v1",
        "kind": binding_kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": group, "kind": role_kind, "name": name},
        "subjects": subjects,
    }
    api.http.post(f"{where}/{binding_kind.lower()}s", binding)


def _review(api: Api, user: str, groups: list[str], namespace: str) -> bool:
    attributes = {"verb": "get", "resource": "namespaces", "name": namespace, "namespace": namespace}
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }
    return bool(api.http.post(REVIEWS, body)["status"]["allowed"])


def test_the_emulator_answers_a_subject_access_review_from_its_rbac(kube_emulator: Emulator) -> None:
    api = Api(kube_emulator)
    kube_emulator.enable_rbac()
    for ns in ("team-a", "team-b"):
        api.namespace(ns)
    get = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
    _grant(api, "see-own", get, [{"kind": "Group", "name": "tenants-a"}], ns="team-a")
    _grant(api, "platform", get, [{"kind": "User", "name": "bob"}])
    # a RoleBinding in the namespace counts for the namespace itself, for the group it names only
    assert _review(api, "alice", ["tenants-a"], "team-a") is True
    assert _review(api, "alice", ["tenants-a"], "team-b") is False
    assert _review(api, "alice", [], "team-a") is False
    assert _review(api, "bob", [], "team-b") is True


def test_clusters_check_asks_for_the_review_permission_only_where_requester_is_on(
    tmp_path: Path, kube_emulator: Emulator
) -> None:
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    plain = run_nsstuck("clusters", "check", "--config", str(_config(tmp_path, "prod.kubeconfig")), "-o", "json")
    assert "subjectaccessreviews" not in plain.stdout, plain.stdout
    config = _config(tmp_path, "prod.kubeconfig", "    diagnose_as: requester\n    remediation: false\n")
    kube_emulator.knobs.forbid("subjectaccessreviews", group="authorization.k8s.io", verbs=("create",))
    done = run_nsstuck("clusters", "check", "--config", str(config))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "create subjectaccessreviews.authorization.k8s.io" in done.stdout, done.stdout
