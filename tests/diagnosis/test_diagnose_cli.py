"""`nsstuck diagnose` as a user runs it: against the emulator, with the real console entry point."""

from __future__ import annotations

import gc
import io
import json
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from bot.cli import main
from bot.diagnosis.conditions import parse_conditions, split_group_errors
from bot.services import diagnosing
from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator


def _namespace(emu: Emulator, name: str, *, delete: bool) -> None:
    from tests.fakes.kubeapi.controllers._http import KubeHTTP

    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": name}})
    http.post(
        f"/api/v1/namespaces/{name}/configmaps",
        {"metadata": {"name": "mymap", "finalizers": ["example.com/keep"]}},
    )
    if delete:
        http.delete(f"/api/v1/namespaces/{name}")
        emu.settle()
        emu.clock.advance(60)  # type: ignore[attr-defined]
        emu.settle()


def test_json_report_of_a_stuck_namespace(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    result = run_nsstuck("diagnose", "ddd", "--kubeconfig", str(kubeconfig_path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "nsstuck.diagnosis/v1"
    assert report["cluster"] == "emulator"  # the kubeconfig's current context
    assert report["state"] == "terminating"
    assert report["complete"] is True
    finding = report["findings"][0]
    assert finding["cause"] == "orphaned_finalizer"
    assert finding["objects"][0]["name"] == "mymap"
    assert finding["objects"][0]["finalizers"] == ["example.com/keep"]
    # nothing shows whether example.com's controller runs (issue 22 §1): finding it comes first
    assert finding["controller"]["state"] == "unknown"
    assert finding["remedies"][0]["action"] == "restore_controller"
    removal = finding["remedies"][1]
    assert removal["action"] == "remove_finalizer"
    assert removal["requires_approval"] is True
    assert '"op":"test"' in removal["commands"][0]
    assert finding["remedies"][-1]["action"] == "force_finalize_namespace"


@pytest.mark.timing
def test_a_list_whose_answer_trickles_is_a_gap_at_the_timeout(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    """The configmaps' answer never ends (a byte every half second, so no read times out): the command
    still ends at its --timeout, the list a gap, and nothing offered on what it could not see."""
    _namespace(kube_emulator, "ddd", delete=True)
    kube_emulator.knobs.trickle(r"^GET /api/v1/namespaces/ddd/configmaps$", interval=0.5)
    started = time.monotonic()
    result = run_nsstuck("diagnose", "ddd", "--kubeconfig", str(kubeconfig_path), "--json", "--timeout", "3")
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["complete"] is False
    gaps = {gap["what"]: gap for gap in report["gaps"]}
    assert gaps["list configmaps in ddd"]["reason"] == "timeout", report["gaps"]
    assert "force_finalize_namespace" not in {r["action"] for f in report["findings"] for r in f["remedies"]}
    # 3 s of collection, a quarter of a second for calls still running, the interpreter's start and end
    # (it waited as long as the server trickled before)
    assert elapsed < 3 + 4, elapsed


def test_text_report_leads_with_the_verdict(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    result = run_nsstuck("diagnose", "ddd", "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 0, result.stderr
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith("emulator/ddd: Terminating for ")
    assert "stuck: orphaned_finalizer" in first_line
    assert "$ kubectl patch configmaps mymap -n ddd --type=json" in result.stdout


def test_active_and_missing_namespaces(kube_emulator: Emulator, kubeconfig_path: Path) -> None:
    _namespace(kube_emulator, "alive", delete=False)
    active = json.loads(run_nsstuck("diagnose", "alive", "--kubeconfig", str(kubeconfig_path), "--json").stdout)
    assert active["state"] == "active"
    assert active["findings"] == []
    missing = run_nsstuck("diagnose", "nope", "--kubeconfig", str(kubeconfig_path), "--json")
    assert missing.returncode == 0
    assert json.loads(missing.stdout)["state"] == "not_found"


def test_unreachable_cluster_is_exit_3_and_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: very-secret-token-123}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    result = run_nsstuck("diagnose", "x", "--kubeconfig", str(kubeconfig), "--timeout", "5")
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nsstuck: cluster 'gone' (http://127.0.0.1:1) is unreachable: cannot connect")
    assert "very-secret-token-123" not in result.stderr + result.stdout


def test_wrong_credentials_are_exit_3(kube_emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kc", token="not-a-known-token")
    result = run_nsstuck("diagnose", "default", "--kubeconfig", str(kubeconfig))
    assert result.returncode == 3
    assert "refuses our credentials" in result.stderr
    assert "not-a-known-token" not in result.stderr


def test_invalid_namespace_name_is_a_usage_error(kubeconfig_path: Path) -> None:
    result = run_nsstuck("diagnose", "Bad_Name", "--kubeconfig", str(kubeconfig_path))
    assert result.returncode == 2
    assert "is not a valid namespace name" in result.stderr


def test_split_group_errors_keeps_commas_inside_messages() -> None:
    message = (
        "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: "
        "custom.metrics.k8s.io/v1beta1: stale GroupVersion discovery: custom.metrics.k8s.io/v1beta1, "
        "metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
    )
    assert split_group_errors(message) == {
        "custom.metrics.k8s.io/v1beta1": "stale GroupVersion discovery: custom.metrics.k8s.io/v1beta1",
        "metrics.k8s.io/v1beta1": "the server is currently unable to handle the request",
    }


def test_parse_conditions_reads_counts_and_webhooks() -> None:
    def true(kind: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": "True", "reason": reason, "message": message}

    remaining = "kialis.kiali.io has 1 resource instances, pods. has 5 resource instances"
    webhook = 'Internal error occurred: failed calling webhook "v.example.com": failed to call webhook'
    namespace = {
        "status": {
            "conditions": [
                true("NamespaceContentRemaining", "SomeResourcesRemain", f"Some resources are remaining: {remaining}"),
                true(
                    "NamespaceFinalizersRemaining",
                    "SomeFinalizersRemain",
                    "Some content in the namespace has finalizers remaining: "
                    "kiali.io/finalizer in 1 resource instances",
                ),
                true(
                    "NamespaceDeletionContentFailure",
                    "ContentDeletionFailed",
                    f"Failed to delete all resource types, 1 remaining: {webhook}",
                ),
            ]
        }
    }
    facts = parse_conditions(namespace)
    assert facts.remaining == {"kialis.kiali.io": 1, "pods.": 5}
    assert facts.finalizers_remaining == {"kiali.io/finalizer": 1}
    assert facts.failing_webhooks == ("v.example.com",)
    assert parse_conditions({"status": {}}).present is False


def test_a_registered_cluster_is_selected_by_name(kube_emulator: Emulator, tmp_path: Path) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod-ctx")
    config = tmp_path / "nsstuck.yaml"
    config.write_text("clusters:\n  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n    context: prod-ctx\n")
    result = run_nsstuck("diagnose", "ddd", "--cluster", "prod-eu", "--json", env={"NSSTUCK_CONFIG": str(config)})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["cluster"] == "prod-eu"
    assert report["findings"][0]["cause"] == "orphaned_finalizer"


def test_the_garbage_collector_is_paused_for_a_diagnosis_and_given_back(
    kube_emulator: Emulator, kubeconfig_path: Path
) -> None:
    """`nsstuck diagnose` pauses the cyclic garbage collector while it diagnoses (its passes over the decoded
    objects cost CPU for nothing), and an in-process caller of `main` gets it back as it was."""
    _namespace(kube_emulator, "ddd", delete=True)
    seen: list[bool] = []
    original = diagnosing.diagnose_namespace

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    out, err = io.StringIO(), io.StringIO()
    assert gc.isenabled()
    with patch.object(diagnosing, "diagnose_namespace", watched):
        assert main(["diagnose", "ddd", "--kubeconfig", str(kubeconfig_path), "--json"], out=out, err=err) == 0
    assert seen == [False]
    assert gc.isenabled()
    assert json.loads(out.getvalue())["state"] == "terminating"
