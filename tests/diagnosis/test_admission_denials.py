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

import pytest

from tests._cli import run_nsstuck
from tests.approvals._flow import remediation_bot
from tests.corpus.loading import Case, load
from tests.diagnosis.test_alive_not_finishing import _ask
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import apply_scenario_once
from tests.fakes.slackapi import SlackEmulator
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


# --- a webhook that denies, alive or dead; a known release defect -------------------------------------

WEBHOOK = "guard.platform.example.com"
WEBHOOK_DENIAL = (
    f'admission webhook "{WEBHOOK}" denied the request: configmap "team-settings" is protected: '
    "remove the label platform.example.com/protected first"
)
WEBHOOK_DOWN = (
    f'Internal error occurred: failed calling webhook "{WEBHOOK}": failed to call webhook: Post '
    '"https://guard.platform-guard.svc:443/validate?timeout=5s": no endpoints available for service "guard"'
)


def _webhook_cluster(namespace: str, message: str, *, alive: bool) -> list[dict[str, Any]]:
    """A namespace whose content deletion the namespace controller says failed with `message`, and the
    webhook that intercepts DELETE of configmaps, served by platform-guard/guard: Ready when `alive`, else
    its one pod crash-looping and its endpoint not ready."""
    backend: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": OBSERVED}
                ]
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "platform-guard"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "guard", "namespace": "platform-guard"},
            "spec": {"selector": {"app": "guard"}, "ports": [{"port": 443, "targetPort": 8443}]},
        },
    ]
    ready = "True" if alive else "False"
    running: dict[str, Any] = (
        {"running": {"startedAt": DELETED}}
        if alive
        else {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}}
    )
    backend += [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "guard", "namespace": "platform-guard", "labels": {"app": "guard"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "guard"}},
                "template": {
                    "metadata": {"labels": {"app": "guard"}},
                    "spec": {"containers": [{"name": "guard", "image": "example/guard:1.4"}]},
                },
            },
            "status": {
                "replicas": 1,
                "readyReplicas": 1 if alive else 0,
                "availableReplicas": 1 if alive else 0,
                "updatedReplicas": 1,
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "guard-7d9f8-abcde", "namespace": "platform-guard", "labels": {"app": "guard"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "guard", "image": "example/guard:1.4"}]},
            "status": {
                "phase": "Running",
                "podIP": "10.244.1.17",
                "conditions": [{"type": "Ready", "status": ready}],
                "containerStatuses": [
                    {"name": "guard", "ready": alive, "restartCount": 0 if alive else 41, "state": running}
                ],
            },
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "guard-x7k2p",
                "namespace": "platform-guard",
                "labels": {"kubernetes.io/service-name": "guard"},
            },
            "addressType": "IPv4",
            "ports": [{"port": 8443, "protocol": "TCP"}],
            "endpoints": [
                {
                    "addresses": ["10.244.1.17"],
                    "conditions": {"ready": alive},
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "platform-guard", "name": "guard-7d9f8-abcde"},
                }
            ],
        },
    ]
    return [
        *backend,
        _namespace(
            namespace,
            [
                _condition(
                    "NamespaceDeletionContentFailure",
                    "True",
                    "ContentDeletionFailed",
                    f"Failed to delete all resource types, 1 remaining: {message}",
                ),
                _condition(
                    "NamespaceContentRemaining",
                    "True",
                    "SomeResourcesRemain",
                    "Some resources are remaining: configmaps. has 1 resource instances",
                ),
            ],
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "team-settings",
                "namespace": namespace,
                "labels": {"platform.example.com/protected": "true"},
            },
            "data": {"owner": "team-a"},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "platform-guard"},
            "webhooks": [
                {
                    "name": WEBHOOK,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "clientConfig": {
                        "service": {"name": "guard", "namespace": "platform-guard", "path": "/validate", "port": 443}
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["DELETE"],
                            "resources": ["configmaps"],
                            "scope": "Namespaced",
                        }
                    ],
                }
            ],
        },
    ]


def test_a_live_webhook_that_denies_is_told_apart_from_a_dead_one(kube_emulator: Emulator, tmp_path: Path) -> None:
    load(kube_emulator, _case("team-a", _webhook_cluster("team-a", WEBHOOK_DENIAL, alive=True)))
    denying = _diagnose(kube_emulator.write_kubeconfig(tmp_path / "live.kubeconfig"), "team-a")
    assert denying["cause"] == "webhook_blocks_delete"
    finding = denying["findings"][0]
    assert finding["summary"].startswith(f"webhook {WEBHOOK} (ValidatingWebhookConfiguration platform-guard) denies")
    assert "its backend answers and refuses" in finding["summary"]
    assert WEBHOOK_DENIAL in "\n".join(finding["evidence"])
    # change what it refuses first; deleting its configuration comes later, at a higher risk
    actions = [r["action"] for r in finding["remedies"]]
    assert actions[0] == "investigate"
    assert finding["remedies"][0]["description"].startswith(f"Change what {WEBHOOK} refuses")
    assert actions.index("delete_webhook_configuration") > 0
    delete = next(r for r in finding["remedies"] if r["action"] == "delete_webhook_configuration")
    assert "it answers, so change its policy first" in json.dumps(delete)


def test_a_dead_webhook_is_restored_first(tmp_path: Path) -> None:
    with Emulator(clock=FakeClock(datetime.fromisoformat(DELETED.replace("Z", "+00:00"))), seed=0) as emu:
        load(emu, _case("team-b", _webhook_cluster("team-b", WEBHOOK_DOWN, alive=False)))
        dead = _diagnose(emu.write_kubeconfig(tmp_path / "dead.kubeconfig"), "team-b")
    assert dead["cause"] == "webhook_blocks_delete"
    finding = dead["findings"][0]
    assert "fails closed and its backend guard in platform-guard cannot answer" in finding["summary"]
    assert "(its backend was uninstalled)" not in finding["summary"]  # installed, crash-looping
    assert "answers and refuses" not in json.dumps(finding)
    assert finding["remedies"][0]["action"] == "restore_backend"
    assert finding["remedies"][0]["description"].startswith("Restore the webhook's backend guard in platform-guard")


def _cli_report(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_release_defect_is_named_on_an_affected_release_and_not_on_the_fixed_one(tmp_path: Path) -> None:
    with Emulator(clock=FakeClock(datetime.fromisoformat(OBSERVED.replace("Z", "+00:00"))), seed=0) as emu:
        apply_scenario_once(emu, "aggregator-stale-defect")
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        # 1.28.1: kubernetes/kubernetes#119662, named with its evidence; the upgrade that fixes it comes first
        affected = _cli_report(kubeconfig, "game-servers")
        # the same cluster on 1.28.2 with the same Stale listing (its last fetch failed): not the defect
        emu.options.update(server_version="1.28.2", aggregated_discovery_defect=True)
        fixed = _cli_report(kubeconfig, "game-servers")
    assert affected["cause"] == "aggregated_discovery_defect"
    finding = affected["findings"][0]
    assert "kubernetes/kubernetes#119662" in finding["summary"]
    assert "the API server's version (/version): v1.28.1" in finding["evidence"]
    assert finding["remedies"][0]["action"] == "restore_backend"
    assert finding["remedies"][0]["description"].startswith("Upgrade the control plane to 1.28.2 or later")
    assert fixed["cause"] == "discovery_failure"
    assert "aggregated_discovery_defect" not in [f["cause"] for f in fixed["findings"]]
    said = json.dumps(fixed["findings"][0])
    assert "carries the fix of kubernetes/kubernetes#119662, so this is not that defect" in said
    assert not any(r["description"].startswith("Upgrade the control plane") for r in fixed["findings"][0]["remedies"])


def test_on_the_fixed_aggregator_the_namespace_is_gone(tmp_path: Path) -> None:
    with Emulator(clock=FakeClock(datetime.fromisoformat(OBSERVED.replace("Z", "+00:00"))), seed=0) as emu:
        apply_scenario_once(emu, "aggregator-stale-fixed")
        report = _cli_report(emu.write_kubeconfig(tmp_path / "kubeconfig"), "game-servers")
    assert report["state"] == "not_found"
    assert report["findings"] == []


@pytest.mark.slow
def test_the_bot_names_the_policy_denial_in_its_verdict_and_thread(
    kube_emulator: Emulator, slack_emulator: SlackEmulator, tmp_path: Path
) -> None:
    load(kube_emulator, _case("backups", _policy_cluster()))
    with remediation_bot(slack_emulator, kube_emulator, tmp_path) as flow:
        line, thread = _ask(flow, "backups")
    assert "`webhook_blocks_delete`" in line
    assert "ValidatingAdmissionPolicy pvc-backup-policy (binding pvc-backup-binding)" in line
    # the thread quotes the denial and says what nsstuck did not evaluate; changing the policy comes first
    assert "no params found for policy binding with `Deny` parameterNotFoundAction" in thread
    assert "CEL that nsstuck does not evaluate" in thread
    assert "persistentvolumeclaims/data-0" in thread
