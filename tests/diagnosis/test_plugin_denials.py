"""Issue 37 point 4, "any other plugin": an admission plugin's refusal of the namespace controller's deletes,
named and quoted, through the real CLI against the emulator.

The emulator's API server refuses as a compiled-in admission plugin would (`knobs.deny_admission`: worded as
`admission.NewForbidden` words it, `Unknown` for a delete-collection's items), and its namespace controller
writes the refusal into NamespaceDeletionContentFailure as the real one does. The last two tests load a
namespace whose conditions quote other refusals (RBAC's, a webhook's), as the corpus writes its cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._cli import run_nsstuck
from tests.corpus.loading import load
from tests.diagnosis.test_admission_denials import WEBHOOK, _case, _condition, _namespace, _webhook_cluster
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP

ALWAYS_DENY = "admission control is denying all modifications"
SECRET = "s3cr3t-4f9a2b7c1d"
FREEZE = f"deletion is locked by change freeze CHG-4711 (approved with token={SECRET})"


def _stuck(emu: Emulator, namespace: str, objects: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Create the namespace and its objects, delete it, let the namespace controller work; its namespace."""
    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
    for path, body in objects:
        http.post(f"/api/v1/namespaces/{namespace}/{path}", body)
    http.delete(f"/api/v1/namespaces/{namespace}")
    emu.settle()
    emu.clock.advance(60)  # type: ignore[attr-defined]
    emu.settle()
    found: dict[str, Any] = http.get(f"/api/v1/namespaces/{namespace}")
    return found


def _failure(namespace: dict[str, Any]) -> str:
    conditions = (namespace.get("status") or {}).get("conditions") or []
    failure = next(c for c in conditions if c["type"] == "NamespaceDeletionContentFailure")
    assert failure["status"] == "True", conditions
    return str(failure["message"])


def _diagnose(kubeconfig: Path, namespace: str) -> tuple[dict[str, Any], str]:
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report, done.stdout


def test_a_plugin_named_by_its_words_refuses_the_delete_collection(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    kube_emulator.knobs.deny_admission("configmaps", ALWAYS_DENY, namespace="frozen")
    namespace = _stuck(
        kube_emulator,
        "frozen",
        [
            ("configmaps", {"metadata": {"name": "team-settings"}, "data": {"owner": "team-a"}}),
            ("configmaps", {"metadata": {"name": "feature-flags"}, "data": {"beta": "on"}}),
        ],
    )
    # what the real namespace controller writes: the delete-collection's refusal, the name admission gave it
    assert _failure(namespace) == (
        f'Failed to delete all resource types, 1 remaining: configmaps "Unknown" is forbidden: {ALWAYS_DENY}'
    )
    report, _ = _diagnose(kubeconfig_path, "frozen")
    assert report["cause"] == "deletion_error"
    assert report["complete"] is True
    # one finding says it: the generic "fails to delete some content" is not said a second time
    assert [f["cause"] for f in report["findings"]] == ["deletion_error"]
    finding = report["findings"][0]
    assert finding["summary"] == (
        "admission plugin AlwaysDeny refuses the namespace controller's deletes of configmaps, so they stay: "
        f'configmaps "Unknown" is forbidden: {ALWAYS_DENY}'
    )
    named = {(o["kind"], o["name"]) for o in finding["objects"]}
    assert {("ConfigMap", "team-settings"), ("ConfigMap", "feature-flags")} <= named
    assert {kind for kind, _ in named} == {"ConfigMap"}  # "Unknown" is not taken for an object
    evidence = "\n".join(finding["evidence"])
    assert (
        f'the namespace controller\'s condition quotes the denial: configmaps "Unknown" is forbidden: {ALWAYS_DENY}'
        in (evidence)
    )
    assert "refused the namespace controller's delete-collection of configmaps" in evidence
    assert "configmaps/team-settings" in evidence
    assert "its words do not tell which plugin" not in evidence
    # what the denial asks for first, with a dry run of the refused request; never a finalizer removed
    actions = [(r["action"], r["risk"]) for r in finding["remedies"]]
    assert actions[0] == ("investigate", "none")
    first = finding["remedies"][0]
    assert first["description"].startswith("AlwaysDeny refuses every write")
    assert "kubectl delete --raw '/api/v1/namespaces/frozen/configmaps?dryRun=All'" in first["commands"]
    assert actions[1] == ("investigate", "none")
    assert "--enable-admission-plugins" in finding["remedies"][1]["description"]
    assert "remove_finalizer" not in {a for a, _ in actions}
    assert actions[-1][0] == "force_finalize_namespace"


def test_a_plugin_its_words_do_not_name_is_an_admission_plugin_and_its_quote_is_redacted(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    kube_emulator.knobs.deny_admission("persistentvolumeclaims", FREEZE, namespace="ledger")
    claim = {
        "metadata": {"name": "data-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    namespace = _stuck(kube_emulator, "ledger", [("persistentvolumeclaims", claim)])
    assert _failure(namespace) == (
        f'Failed to delete all resource types, 1 remaining: persistentvolumeclaims "Unknown" is forbidden: {FREEZE}'
    )
    report, said = _diagnose(kubeconfig_path, "ledger")
    assert report["cause"] == "deletion_error"
    finding = report["findings"][0]
    assert finding["summary"].startswith(
        "an admission plugin refuses the namespace controller's deletes of persistentvolumeclaims, so they stay: "
        'persistentvolumeclaims "Unknown" is forbidden: deletion is locked by change freeze CHG-4711'
    )
    assert [(o["kind"], o["name"]) for o in finding["objects"]] == [("PersistentVolumeClaim", "data-0")]
    evidence = "\n".join(finding["evidence"])
    assert "its words do not tell which plugin" in evidence
    assert "token=[REDACTED]" in evidence
    # the token the denial quotes is nowhere in the report, the condition's line included
    assert SECRET not in said
    first = finding["remedies"][0]
    assert first["description"].startswith("Do what the denial asks")
    assert first["commands"] == ["kubectl delete --raw '/api/v1/namespaces/ledger/persistentvolumeclaims?dryRun=All'"]


RBAC_REFUSAL = (
    'configmaps "settings" is forbidden: User "system:serviceaccount:kube-system:namespace-controller" cannot '
    'delete resource "configmaps" in API group "" in the namespace "locked"'
)


def test_rbac_refusing_the_namespace_controller_is_not_an_admission_denial(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    cluster = [
        _namespace(
            "locked",
            [
                _condition(
                    "NamespaceDeletionContentFailure",
                    "True",
                    "ContentDeletionFailed",
                    f"Failed to delete all resource types, 1 remaining: {RBAC_REFUSAL}",
                ),
                _condition(
                    "NamespaceContentRemaining",
                    "True",
                    "SomeResourcesRemain",
                    "Some resources are remaining: configmaps. has 1 resource instances",
                ),
            ],
        ),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "locked"}},
    ]
    load(kube_emulator, _case("locked", cluster))
    report, said = _diagnose(kubeconfig_path, "locked")
    assert report["cause"] == "deletion_error"
    assert [f["summary"] for f in report["findings"]] == ["the namespace controller fails to delete some content"]
    assert "admission plugin" not in said


def test_a_webhook_quoting_forbidden_words_stays_the_webhook(kube_emulator: Emulator, tmp_path: Path) -> None:
    """A webhook's denial whose own words read like a plugin's: the webhook's finding, no plugin's."""
    denial = (
        f'admission webhook "{WEBHOOK}" denied the request: configmaps "team-settings" is forbidden: '
        "remove the label platform.example.com/protected first"
    )
    load(kube_emulator, _case("team-c", _webhook_cluster("team-c", denial, alive=True)))
    report, said = _diagnose(kube_emulator.write_kubeconfig(tmp_path / "kubeconfig"), "team-c")
    assert report["cause"] == "webhook_blocks_delete"
    assert [f["cause"] for f in report["findings"]] == ["webhook_blocks_delete"]
    assert "admission plugin" not in said
