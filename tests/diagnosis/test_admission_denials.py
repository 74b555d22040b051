"""Issue 37 point 4: the namespace controller's refusals named, through the real CLI against the emulator.

Each cluster is written into the Kubernetes emulator the way the corpus writes its cases
(tests/corpus/loading.py: objects created, deletions made at their time, the namespace's conditions
through /status), then `nsstuck diagnose --json` runs against it over HTTP.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tests._cli import run_nsstuck
from tests.corpus.loading import Case, load
from tests.fakes.kubeapi import Emulator
from tests.foundation.test_clusters_check import grant, read_rules

OBSERVED = "2026-11-20T12:00:00Z"
DELETED = "2026-11-20T09:00:00Z"
POLICY_DENIAL = (
    "persistentvolumeclaims \"data-0\" is invalid: : ValidatingAdmissionPolicy 'pvc-backup-policy' with binding "
    "'pvc-backup-binding' denied request: failed to configure binding: no params found for policy binding with "
    "`Deny` parameterNotFoundAction"
)


def _namespace(name: str, conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "deletionTimestamp": DELETED},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": conditions},
    }


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": DELETED}


def _case(namespace: str, cluster: list[dict[str, Any]]) -> Case:
    return Case(
        id=namespace,
        source="https://github.com/kubernetes/kubernetes/issues/129883",
        summary="",
        resolution="",
        namespace=namespace,
        observed_at=datetime.fromisoformat(OBSERVED.replace("Z", "+00:00")),
        cluster=tuple(cluster),
        invented=(),
        cause="webhook_blocks_delete",
        blocking=(),
    )


def _policy_cluster() -> list[dict[str, Any]]:
    return [
        _namespace(
            "backups",
            [
                _condition(
                    "NamespaceDeletionDiscoveryFailure",
                    "False",
                    "ResourcesDiscovered",
                    "All resources successfully discovered",
                ),
                _condition(
                    "NamespaceDeletionGroupVersionParsingFailure",
                    "False",
                    "ParsedGroupVersions",
                    "All legacy kube types successfully parsed",
                ),
                _condition(
                    "NamespaceDeletionContentFailure",
                    "True",
                    "ContentDeletionFailed",
                    f"Failed to delete all resource types, 1 remaining: {POLICY_DENIAL}",
                ),
                _condition(
                    "NamespaceContentRemaining",
                    "True",
                    "SomeResourcesRemain",
                    "Some resources are remaining: persistentvolumeclaims. has 1 resource instances",
                ),
                _condition(
                    "NamespaceFinalizersRemaining",
                    "True",
                    "SomeFinalizersRemain",
                    "Some content in the namespace has finalizers remaining: example.com/backup in 1 resource "
                    "instances, kubernetes.io/pvc-protection in 1 resource instances",
                ),
            ],
        ),
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "data-0",
                "namespace": "backups",
                "finalizers": ["example.com/backup", "kubernetes.io/pvc-protection"],
                "deletionTimestamp": DELETED,
            },
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        {
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
                "validations": [{"expression": "params.spec.retain || !has(object.metadata.deletionTimestamp)"}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "pvc-backup-binding"},
            "spec": {
                "policyName": "pvc-backup-policy",
                "validationActions": ["Deny"],
                "paramRef": {"name": "backup", "parameterNotFoundAction": "Deny"},
            },
        },
    ]


def _diagnose(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_policy_denial_names_the_policy_its_binding_and_the_claim(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    load(kube_emulator, _case("backups", _policy_cluster()))
    report = _diagnose(kubeconfig_path, "backups")
    assert report["cause"] == "webhook_blocks_delete"
    assert report["complete"] is True
    finding = report["findings"][0]
    assert finding["summary"].startswith(
        "ValidatingAdmissionPolicy pvc-backup-policy (binding pvc-backup-binding) denies the namespace's deletion"
    )
    named = [(o["kind"], o["name"]) for o in finding["objects"]]
    assert named == [
        ("ValidatingAdmissionPolicy", "pvc-backup-policy"),
        ("ValidatingAdmissionPolicyBinding", "pvc-backup-binding"),
        ("PersistentVolumeClaim", "data-0"),
    ]
    evidence = "\n".join(finding["evidence"])
    assert POLICY_DENIAL in evidence
    assert "its validations are CEL that nsstuck does not evaluate" in evidence
    assert "finds no parameter object" in evidence
    assert "in the namespace of each request (here: this namespace)" in evidence
    assert "matched by the policy's rules for DELETE and UPDATE" in evidence
    actions = [(r["action"], r["risk"]) for r in finding["remedies"]]
    assert actions[0] == ("investigate", "none")
    assert ("investigate", "high") in actions  # deleting the binding comes later, by hand
    assert actions[-1][0] == "force_finalize_namespace"
    # the generic deletion error is not said a second time
    assert "deletion_error" not in [f["cause"] for f in report["findings"]]


def test_a_forbidden_policy_list_is_a_named_gap(kube_emulator: Emulator, tmp_path: Path) -> None:
    load(kube_emulator, _case("backups", _policy_cluster()))
    kube_emulator.enable_rbac()
    token = kube_emulator.add_token("system:serviceaccount:nsstuck:nsstuck")
    rules = read_rules(without=("admissionregistration.k8s.io", "validatingadmissionpolicies"))
    # the broad `list` on every type would allow the list too: the role names the types it lists instead
    rules = [r for r in rules if r.get("resources") != ["*"] or "list" not in r.get("verbs", [])]
    rules.append({"apiGroups": [""], "resources": ["persistentvolumeclaims", "pods"], "verbs": ["list"]})
    grant(kube_emulator, "nsstuck-read", rules)
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "sa.kubeconfig", token=token)
    report = _diagnose(kubeconfig, "backups")
    gaps = {g["what"]: g["reason"] for g in report["gaps"]}
    assert gaps["list validatingadmissionpolicies"] == "forbidden"
    assert report["complete"] is False
    finding = report["findings"][0]
    assert finding["cause"] == "webhook_blocks_delete"
    assert any("could not be read (list validatingadmissionpolicies: forbidden" in e for e in finding["evidence"])
    offered = {r["action"] for f in report["findings"] for r in f["remedies"]}
    assert "force_finalize_namespace" not in offered
