"""A connection that acts as someone else: every request carries Impersonate-User and one
Impersonate-Group header per group (the generated client keeps one value per header name, so they
are added where urllib3 sends them). Against the emulator's impersonation filter and RBAC."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.domain.refs import ClusterName, ObjectRef
from bot.errors import NsstuckError
from bot.kube.connecting import ClusterTarget, Impersonation, connect
from bot.kube.patching import Patcher
from bot.kube.transport import Transport
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import Api

SA = "system:serviceaccount:nsstuck:nsstuck"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _grant(api: Api, name: str, rules: list[dict[str, object]], subjects: list[dict[str, str]]) -> None:
    group = "rbac.authorization.k8s.io"
    role = {"apiVersion": f"{group}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
    api.http.post(f"{RBAC}/clusterroles", role)
    binding = {
        "apiVersion": f"{group}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    }
    api.http.post(f"{RBAC}/clusterrolebindings", binding)


def test_every_request_carries_the_identity_and_each_group(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    api = Api(kube_emulator)
    api.ensure_namespace("team")
    kube_emulator.enable_rbac()
    _grant(
        api,
        "impersonator",
        [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]},
            {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["sre", "ops"]},
        ],
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    _grant(
        api,
        "ops-read",
        [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}],
        [{"kind": "Group", "name": "ops"}],
    )
    target = ClusterTarget(name=ClusterName("emulator"), kubeconfig=kubeconfig_path)
    connection = connect(target, impersonate=Impersonation("alice", ("sre", "ops")))
    try:
        patcher = Patcher(Transport(connection, call_timeout=10))
        kube_emulator.journal.clear()
        namespace = ObjectRef(api_version="v1", kind="Namespace", name="team", resource="namespaces")
        assert patcher.read(namespace) is not None  # allowed through the second group only
        [entry] = kube_emulator.journal.entries(admin=True)
        assert (entry.user, entry.groups, entry.impersonated_by) == (
            "alice",
            ("sre", "ops", "system:authenticated"),
            SA,
        )
    finally:
        connection.close()
    # a user nsstuck may not impersonate: the cluster's refusal, in its words
    connection = connect(target, impersonate=Impersonation("mallory"))
    try:
        with pytest.raises(NsstuckError, match='users "mallory" is forbidden: User "system:serviceaccount'):
            Patcher(Transport(connection, call_timeout=10)).read(namespace)
    finally:
        connection.close()
