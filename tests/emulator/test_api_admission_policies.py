"""ValidatingAdmissionPolicies and their bindings (admissionregistration.k8s.io/v1, cluster-scoped, GA in 1.30):
served as the real API server serves them, read back alike over HTTP and by the real kubectl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.emulator._api_support import Raw, admin, emu, kubectl, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

GROUP = "/apis/admissionregistration.k8s.io/v1"

POLICY: dict[str, Any] = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "pvc-backup-policy"},
    "spec": {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "example.com/v1", "kind": "BackupPolicy"},
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["UPDATE", "DELETE"],
                    "resources": ["persistentvolumeclaims"],
                }
            ]
        },
        "validations": [{"expression": "has(params.spec)", "message": "no backup policy"}],
    },
}
BINDING: dict[str, Any] = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "pvc-backup-binding"},
    "spec": {
        "policyName": "pvc-backup-policy",
        "validationActions": ["Deny"],
        "paramRef": {"name": "backup", "parameterNotFoundAction": "Deny"},
    },
}


def test_policies_and_bindings_are_served_cluster_scoped(user: Raw) -> None:
    document = user.get(GROUP).json
    served = {r["name"]: r for r in document["resources"]}
    for plural, kind in (
        ("validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
        ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
    ):
        assert served[plural]["kind"] == kind
        assert served[plural]["namespaced"] is False
        assert "list" in served[plural]["verbs"]
    assert "validatingadmissionpolicies/status" in served
    assert user.post(f"{GROUP}/validatingadmissionpolicies", POLICY).status == 201
    assert user.post(f"{GROUP}/validatingadmissionpolicybindings", BINDING).status == 201
    listed = user.get(f"{GROUP}/validatingadmissionpolicybindings").json
    assert listed["kind"] == "ValidatingAdmissionPolicyBindingList"
    assert [i["spec"]["policyName"] for i in listed["items"]] == ["pvc-backup-policy"]
    # cluster-scoped: no namespaced path serves them
    assert user.get(f"{GROUP}/namespaces/default/validatingadmissionpolicies").status == 404


def test_an_older_server_does_not_serve_them(emu: Emulator, user: Raw) -> None:
    emu.options["server_version"] = "1.29.5"
    served = {r["name"] for r in user.get(GROUP).json["resources"]}
    assert "validatingadmissionpolicies" not in served
    assert user.get(f"{GROUP}/validatingadmissionpolicies").status == 404


@pytest.mark.kubectl
def test_kubectl_applies_and_reads_them_as_the_api_does(emu: Emulator, user: Raw, tmp_path: Path) -> None:
    kc = emu.write_kubeconfig(tmp_path / "kubeconfig")
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(yaml.safe_dump_all([POLICY, BINDING]))
    out = kubectl(kc, "apply", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "validatingadmissionpolicy.admissionregistration.k8s.io/pvc-backup-policy created",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/pvc-backup-binding created",
    ]
    out = kubectl(kc, "get", "validatingadmissionpolicybindings", "-o", "yaml")
    assert out.returncode == 0, out.stderr
    via_kubectl = yaml.safe_load(out.stdout)["items"]
    via_http = user.get(f"{GROUP}/validatingadmissionpolicybindings").json["items"]
    assert [i["metadata"]["uid"] for i in via_kubectl] == [i["metadata"]["uid"] for i in via_http]
    assert via_kubectl[0]["spec"]["paramRef"] == BINDING["spec"]["paramRef"]
    out = kubectl(kc, "get", "validatingadmissionpolicy", "pvc-backup-policy", "--no-headers")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "pvc-backup-policy"
    out = kubectl(kc, "api-resources", "--api-group=admissionregistration.k8s.io", "--no-headers")
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()}
    assert rows["validatingadmissionpolicies"][-2:] == ["false", "ValidatingAdmissionPolicy"]
    assert rows["validatingadmissionpolicybindings"][-2:] == ["false", "ValidatingAdmissionPolicyBinding"]
