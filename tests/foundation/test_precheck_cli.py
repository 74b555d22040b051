"""`nsstuck precheck` (issue 27) against the emulator: every exit code of the contract (0 nothing would
hold the deletion, 4 it would get stuck, 5 the evidence is incomplete, 3 unreachable, 2 usage or a
namespace already being deleted), -o text|json|yaml, a last line on stderr for each non-zero exit, and
nothing written to the cluster.

The first run of each exit code's test (0, 4, 2, 3, and the cluster found through $KUBECONFIG) is the
installed console script in a process of its own, as a pipeline runs it; the other runs are the same
command in this process (`tests/_cli.py`), which says and exits the same, without a second of CPU for
each interpreter's start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests._cli import run_nsstuck
from tests._python import assert_no_resource_warning
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import apply_scenario
from tests.foundation.test_config import REPO

SCRIPT = shutil.which("nsstuck", path=str(Path(sys.executable).parent))


def precheck(*args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`nsstuck precheck ...` without $KUBECONFIG: in this process, or with `process` the console script,
    as a pipeline runs it (its ResourceWarnings made errors)."""
    if not process:
        with pytest.MonkeyPatch.context() as env:
            env.delenv("KUBECONFIG", raising=False)
            done = run_nsstuck("precheck", *args)
        assert "Traceback" not in done.stderr
        return done
    assert SCRIPT is not None, "the nsstuck console script is not installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG"))}
    env["PYTHONWARNINGS"] = "error::ResourceWarning"
    done = subprocess.run(
        [SCRIPT, "precheck", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False
    )
    assert_no_resource_warning(done.stderr, "nsstuck precheck " + " ".join(args))
    assert "Traceback" not in done.stderr
    return done


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path]]:
    """The healthy-active scenario (metrics-server up, namespace shop with an ordinary app), on a clock at
    the present: the console script reads the real clock (kube-controller-manager's Lease is fresh)."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        http = KubeHTTP(emu.url, emu.admin_token)
        # preview-123: a ConfigMap keeps a finalizer nothing removes (`kubernetes` means something only on a
        # Namespace's spec.finalizers)
        http.post("/api/v1/namespaces", {"metadata": {"name": "preview-123"}})
        http.post(
            "/api/v1/namespaces/preview-123/configmaps",
            {"metadata": {"name": "leftover", "finalizers": ["kubernetes"]}},
        )
        # gone-456: being deleted already (the same leftover holds it)
        http.post("/api/v1/namespaces", {"metadata": {"name": "gone-456"}})
        http.post("/api/v1/namespaces/gone-456/configmaps", {"metadata": {"name": "x", "finalizers": ["kubernetes"]}})
        http.delete("/api/v1/namespaces/gone-456")
        emu.settle()
        yield emu, emu.write_kubeconfig(tmp_path_factory.mktemp("precheck") / "kubeconfig")


def test_exit_0_when_nothing_would_hold_the_deletion(cluster: tuple[Emulator, Path]) -> None:
    emu, kubeconfig = cluster
    emu.journal.clear()
    done = precheck("shop", "--kubeconfig", str(kubeconfig), process=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "emulator/shop: namespace is Active; deleting it now: nothing would hold it\n"
    assert done.stderr == ""
    # it changes nothing: every request was a read
    assert emu.journal.entries()
    assert [r for r in emu.journal.lines() if not r.startswith("GET ")] == []
    report = json.loads(precheck("shop", "--kubeconfig", str(kubeconfig), "-o", "json").stdout)
    assert report["schema"] == "nsstuck.diagnosis/v1"
    assert report["state"] == "active"
    assert report["findings"] == []
    assert report["prediction"] == {"would_block": False, "complete": True, "gaps": [], "findings": []}


def test_exit_4_when_it_would_get_stuck_with_the_reasons(cluster: tuple[Emulator, Path]) -> None:
    _, kubeconfig = cluster
    done = precheck("preview-123", "--kubeconfig", str(kubeconfig), process=True)
    assert done.returncode == 4, done.stderr
    assert done.stdout.startswith(
        "emulator/preview-123: namespace is Active; deleting it now would get stuck: orphaned_finalizer: "
    )
    assert "configmaps/leftover" in done.stdout
    assert "Before the delete: Remove kubernetes from configmaps/leftover" in done.stdout
    assert (
        done.stderr.splitlines()[-1] == "nsstuck: deleting preview-123 on emulator would get stuck: orphaned_finalizer"
    )
    as_json = precheck("preview-123", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert as_json.returncode == 4
    prediction = json.loads(as_json.stdout)["prediction"]
    assert prediction["would_block"] is True
    assert prediction["complete"] is True
    finding = prediction["findings"][0]
    assert finding["cause"] == "orphaned_finalizer"
    assert finding["blocking"] is True
    assert finding["controller"]["state"] == "dead"
    assert [r["action"] for r in finding["remedies"]] == ["prepare"]
    assert finding["remedies"][0]["requires_approval"] is False
    # the change the step stands for, which the admission webhook's thread files once the delete is seen
    assert finding["remedies"][0]["prepares"] == "remove_finalizer"
    as_yaml = precheck("preview-123", "--kubeconfig", str(kubeconfig), "-o", "yaml")
    assert as_yaml.returncode == 4
    assert yaml.safe_load(as_yaml.stdout)["prediction"] == prediction


def test_exit_5_when_the_evidence_is_incomplete(cluster: tuple[Emulator, Path]) -> None:
    emu, kubeconfig = cluster
    emu.knobs.forbid("secrets", verbs=("list",), namespace="shop")
    try:
        done = precheck("shop", "--kubeconfig", str(kubeconfig), "-o", "json")
    finally:
        emu.knobs.clear()
    assert done.returncode == 5, done.stderr
    prediction = json.loads(done.stdout)["prediction"]
    assert prediction["would_block"] is False
    assert prediction["complete"] is False
    assert [g["what"] for g in prediction["gaps"]] == ["list secrets in shop"]
    assert done.stderr.splitlines()[-1] == (
        "nsstuck: shop on emulator: the evidence is incomplete (1 gap(s)), so it cannot be said that nothing would "
        "hold the deletion"
    )


def test_exit_2_for_usage_a_missing_or_terminating_namespace(cluster: tuple[Emulator, Path]) -> None:
    _, kubeconfig = cluster
    terminating = precheck("gone-456", "--kubeconfig", str(kubeconfig), process=True)
    assert terminating.returncode == 2
    assert terminating.stdout == ""
    assert terminating.stderr == (
        "nsstuck: namespace gone-456 on emulator is already being deleted: use `nsstuck diagnose gone-456`\n"
    )
    missing = precheck("nope", "--kubeconfig", str(kubeconfig))
    assert missing.returncode == 2
    assert missing.stderr == "nsstuck: namespace nope not found on emulator: nothing to delete\n"
    assert precheck("Bad_Name", "--kubeconfig", str(kubeconfig)).returncode == 2
    assert precheck("kube-system", "--kubeconfig", str(kubeconfig)).returncode == 2
    assert precheck("shop", "--kubeconfig", str(kubeconfig), "-o", "xml").returncode == 2
    assert precheck().returncode == 2


def test_exit_3_when_the_cluster_is_unreachable(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: secret-token-42}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    done = precheck("preview-123", "--kubeconfig", str(gone), "--timeout", "3", process=True)
    assert done.returncode == 3, done.stderr
    assert "is unreachable" in done.stderr
    assert "secret-token-42" not in done.stderr


def test_the_cluster_is_found_as_kubectl_finds_it(cluster: tuple[Emulator, Path]) -> None:
    """$KUBECONFIG and --context, as for diagnose; --cluster names a registered one."""
    _, kubeconfig = cluster
    assert SCRIPT is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    env["KUBECONFIG"] = str(kubeconfig)
    done = subprocess.run(
        [SCRIPT, "precheck", "shop", "--context", "emulator"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    config = kubeconfig.parent / "nsstuck.yaml"
    config.write_text(f"clusters:\n  - name: staging\n    kubeconfig: {kubeconfig}\n")
    done = run_nsstuck(
        "precheck",
        "preview-123",
        "--cluster",
        "staging",
        env={"KUBECONFIG": str(kubeconfig), "NSSTUCK_CONFIG": str(config)},
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout.startswith("staging/preview-123: namespace is Active; deleting it now would get stuck")


def test_help_and_completion_know_precheck() -> None:
    shown = run_nsstuck("--help").stdout
    assert "precheck" in shown
    own = run_nsstuck("precheck", "--help").stdout
    for words in ("--kubeconfig", "--context", "--cluster", "-o", "4 it would get stuck", "5 the evidence"):
        assert words in own
    script = run_nsstuck("completion", "bash").stdout
    program = (
        f"{script}\nCOMP_WORDS=(nsstuck p)\nCOMP_CWORD=1\n_nsstuck\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "COMP_WORDS=(nsstuck precheck ns -o '')\nCOMP_CWORD=4\n_nsstuck\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["precheck", "text", "json", "yaml"]


def test_the_read_role_is_all_it_needs(tmp_path: Path) -> None:
    """With the API server's RBAC on and nsstuck's service account given exactly the chart's read role
    (READ_PERMISSIONS), precheck reads all it needs (a gap would make it exit 5 instead of 4): the objects
    that carry a finalizer read whole (never a Secret or a ConfigMap), the nodes of the pods; and clusters
    check finds that role complete."""
    from tests.foundation.test_clusters_check import SA, grant, read_rules

    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")  # shop: an app whose pods run on node-2
        api = KubeHTTP(emu.url, emu.admin_token)
        crd_rules = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
        api.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "metadata": {"name": "kialis.kiali.io"},
                "spec": {
                    "group": "kiali.io",
                    "names": {"plural": "kialis", "singular": "kiali", "kind": "Kiali", "listKind": "KialiList"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": crd_rules}],
                },
            },
        )
        emu.settle()
        api.post(
            "/apis/kiali.io/v1alpha1/namespaces/shop/kialis",
            {"metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]}, "spec": {}},
        )
        # a Secret and a ConfigMap that carry the same finalizer: listed as metadata, never read whole
        held = {"name": "held", "finalizers": ["kiali.io/finalizer"]}
        api.post("/api/v1/namespaces/shop/secrets", {"metadata": held, "data": {"token": "c2VjcmV0"}})
        api.post("/api/v1/namespaces/shop/configmaps", {"metadata": held, "data": {"key": "value"}})
        emu.enable_rbac()
        grant(emu, "nsstuck-read", read_rules())
        kubeconfig = emu.write_kubeconfig(tmp_path / "sa.kubeconfig", token=emu.add_token(SA), context="prod-eu")
        emu.journal.clear()
        done = precheck("shop", "--kubeconfig", str(kubeconfig), "-o", "json")
        assert done.returncode == 4, done.stderr
        prediction = json.loads(done.stdout)["prediction"]
        assert prediction["complete"] is True, prediction["gaps"]
        assert [f["cause"] for f in prediction["findings"]] == ["orphaned_finalizer"]  # the Kiali operator is gone
        assert "GET /apis/kiali.io/v1alpha1/namespaces/shop/kialis/kiali" in emu.journal.lines()
        assert "GET /api/v1/nodes/node-2" in emu.journal.lines()
        assert not [r for r in emu.journal.lines() if r.endswith(("/secrets/held", "/configmaps/held"))]
        named = {o["name"] for f in prediction["findings"] for o in f["objects"]}
        assert named == {"kiali", "held"}
        assert [r for r in emu.journal.lines() if not r.startswith("GET ")] == []
        config = tmp_path / "nsstuck.yaml"
        config.write_text(f"clusters:\n  - name: prod-eu\n    kubeconfig: {kubeconfig}\n    remediation: false\n")
        checked = run_nsstuck("clusters", "check", "--config", str(config))
        assert checked.returncode == 0, checked.stdout + checked.stderr
