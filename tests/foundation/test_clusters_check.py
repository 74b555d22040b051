"""`nsstuck clusters check` (issue 24 §1): through the console script, against the Kubernetes emulator
with its RBAC authorizer on, nsstuck's service account given exactly the roles the chart renders (or
less). Reachability, version, identity, aggregated discovery, each permission by SelfSubjectAccessReview,
the exit codes 0, 1 and 3, the table and -o json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.kube.permissions import READ_PERMISSIONS
from bot.remediation.permissions import remediation_rules
from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import Api

SA = "system:serviceaccount:nsstuck:nsstuck"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
SA_SUBJECT = [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}]


def grant(emu: Emulator, name: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]] = SA_SUBJECT) -> None:
    api = Api(emu)
    group = "rbac.authorization.k8s.io"
    api.http.post(
        f"{RBAC}/clusterroles",
        {"apiVersion": f"{group}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules},
    )
    api.http.post(
        f"{RBAC}/clusterrolebindings",
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        },
    )


def read_rules(*, without: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The read role as the chart renders it (every rule of READ_PERMISSIONS), optionally minus one
    (group, resource) of its narrow rules."""
    rules = []
    for rule in READ_PERMISSIONS:
        policy = rule.to_policy_rule()
        if without and policy.get("apiGroups") == [without[0]] and without[1] in policy.get("resources", []):
            policy["resources"] = [r for r in policy["resources"] if r != without[1]]
            if not policy["resources"]:
                continue
        rules.append(policy)
    return rules


@pytest.fixture
def rbac_cluster(kube_emulator: Emulator, tmp_path: Path) -> tuple[Emulator, Path]:
    kube_emulator.enable_rbac()
    token = kube_emulator.add_token(SA)
    return kube_emulator, kube_emulator.write_kubeconfig(tmp_path / "sa.kubeconfig", token=token, context="prod-eu")


def config(tmp_path: Path, kubeconfig: Path, extra: str = "", name: str = "prod-eu") -> Path:
    path = tmp_path / "nsstuck.yaml"
    path.write_text(f"clusters:\n  - name: {name}\n    kubeconfig: {kubeconfig}\n    remediation: false\n{extra}")
    return path


def test_a_cluster_with_the_read_role_is_all_good(rbac_cluster: tuple[Emulator, Path], tmp_path: Path) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", read_rules())
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["schema"] == "nsstuck.clusters/v1"
    assert report["ok"] is True
    (cluster,) = report["clusters"]
    assert cluster["cluster"] == "prod-eu"
    assert cluster["reachable"] is True
    assert cluster["identity"] == SA
    assert cluster["server_version"].startswith("v")
    assert cluster["aggregated_discovery"] is False
    assert cluster["roles"] == ["read"]
    assert cluster["missing"] == []
    # the wildcard rows were asked per served namespaced type: far more than the table's rows
    assert cluster["checked"] > 40
    asked = [e for e in emu.journal.entries(admin=True) if e.path.endswith("selfsubjectaccessreviews")]
    assert len(asked) == cluster["checked"]
    # and the table for people says the same
    text = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)))
    assert text.returncode == 0
    header, row = text.stdout.splitlines()[:2]
    assert header.split() == ["CLUSTER", "REACHABLE", "VERSION", "IDENTITY", "AGGREGATED", "PERMISSIONS"]
    assert row.split()[:2] == ["prod-eu", "yes"]
    assert SA in row


def narrow_read_rules(emu: Emulator, *, without: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The read role narrowed as an operator may: list and get named type by type, every namespaced
    type the emulator serves (never get on Secrets and ConfigMaps), in place of the `*` rows."""
    admin = Api(emu)
    narrow = [r for r in read_rules(without=without) if r.get("resources") != ["*"]]
    groups = admin.http.get("/apis")["groups"]
    paths = [("", "/api/v1")] + [(g["name"], f"/apis/{g['name']}/{g['preferredVersion']['version']}") for g in groups]
    for group, path in paths:
        types = [r for r in admin.http.get(path)["resources"] if "/" not in r["name"] and r["namespaced"]]
        lists = [r["name"] for r in types if "list" in r["verbs"]]
        gets = [r["name"] for r in types if "get" in r["verbs"] and r["name"] not in ("secrets", "configmaps")]
        if lists:
            narrow.append({"apiGroups": [group], "resources": lists, "verbs": ["list"]})
        if gets:
            narrow.append({"apiGroups": [group], "resources": gets, "verbs": ["get"]})
    return narrow


def test_a_role_narrowed_to_the_served_types_misses_nothing(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu))
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["clusters"][0]["missing"] == []


def test_one_served_type_left_out_of_a_narrowed_role_is_named(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    emu, kubeconfig = rbac_cluster
    rules = narrow_read_rules(emu)
    for rule in rules:
        if rule.get("apiGroups") == ["apps"] and rule["verbs"] == ["get"]:
            rule["resources"] = [r for r in rule["resources"] if r != "replicasets"]
    grant(emu, "nsstuck-read", rules)
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    assert done.returncode == 1, done.stdout
    assert [m["permission"] for m in json.loads(done.stdout)["clusters"][0]["missing"]] == ["get replicasets.apps"]


def test_a_missing_permission_is_named_and_exits_1(rbac_cluster: tuple[Emulator, Path], tmp_path: Path) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu, without=("apiregistration.k8s.io", "apiservices")))
    path = config(tmp_path, kubeconfig)
    done = run_nsstuck("clusters", "check", "--config", str(path), "--json")
    assert done.returncode == 1, done.stderr
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert [m["permission"] for m in cluster["missing"]] == ["list apiservices.apiregistration.k8s.io"]
    assert cluster["missing"][0]["role"] == "read"
    text = run_nsstuck("clusters", "check", "--config", str(path))
    assert text.returncode == 1
    assert "prod-eu: missing (read): list apiservices.apiregistration.k8s.io" in text.stdout
    as_yaml = run_nsstuck("clusters", "check", "--config", str(path), "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == json.loads(done.stdout)


def test_the_reads_that_find_a_controller_are_checked(rbac_cluster: tuple[Emulator, Path], tmp_path: Path) -> None:
    """Issue 37 §3: the RBAC and OLM lists that find a finalizer's controller are part of the read role."""
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu, without=("operators.coreos.com", "clusterserviceversions")))
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    assert done.returncode == 1, done.stdout
    missing = [m["permission"] for m in json.loads(done.stdout)["clusters"][0]["missing"]]
    assert missing == ["list clusterserviceversions.operators.coreos.com"]


def test_the_remediation_role_is_checked_where_remediation_is_on(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", read_rules())
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        f"clusters:\n  - name: prod-eu\n    kubeconfig: {kubeconfig}\n    approvers: [U0AAAAAAA]\n"
        "    finalizer_resources: [widgets.example.com]\n"
    )
    done = run_nsstuck("clusters", "check", "--config", str(path), "-o", "json")
    assert done.returncode == 1
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["roles"] == ["read", "remediation"]
    missing = {m["permission"] for m in cluster["missing"]}
    assert "patch widgets.example.com" in missing
    assert "update namespaces/finalize" in missing
    # the chart's remediation role, plus the cluster's own finalizer_resources: all granted
    grant(emu, "nsstuck-remediation", [r.to_policy_rule() for r in remediation_rules()])
    grant(emu, "nsstuck-widgets", [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "patch"]}])
    done = run_nsstuck("clusters", "check", "--config", str(path), "-o", "json")
    assert done.returncode == 0, done.stdout


def test_impersonation_is_checked_where_act_as_approver_is_on(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", read_rules())
    grant(
        emu,
        "nsstuck-impersonate",
        [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob@example.com"]}],
    )
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        f"clusters:\n  - name: prod-eu\n    kubeconfig: {kubeconfig}\n    approvers: [U0AAAAAAA]\n"
        "    act_as_approver: true\n    impersonation:\n      users:\n"
        "        U0AAAAAAA: {user: bob@example.com, groups: [sre]}\n"
    )
    done = run_nsstuck("clusters", "check", "--config", str(path), "-o", "json")
    assert done.returncode == 1, done.stdout
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["roles"] == ["read", "impersonation"]  # it writes nothing as itself: no remediation role
    assert [m["permission"] for m in cluster["missing"]] == ["impersonate groups sre"]


def test_an_unreachable_cluster_exits_3_over_a_missing_permission(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu, without=("", "nodes")))
    gone = tmp_path / "gone.kubeconfig"
    gone.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "gone", "user": {"token": "abc"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
                "current-context": "gone",
            }
        )
    )
    path = config(tmp_path, kubeconfig, extra=f"  - name: gone\n    kubeconfig: {gone}\n")
    done = run_nsstuck("clusters", "check", "--config", str(path), "-o", "json")
    assert done.returncode == 3, done.stderr
    assert done.stderr == "nsstuck: unreachable: gone; permissions missing on prod-eu (1)\n"
    report = json.loads(done.stdout)
    by_name = {c["cluster"]: c for c in report["clusters"]}
    assert by_name["gone"]["reachable"] is False
    assert "127.0.0.1:9" in by_name["gone"]["reason"]
    assert [m["permission"] for m in by_name["prod-eu"]["missing"]] == ["get nodes"]
    # one cluster named: only that one, and its own exit code
    only = run_nsstuck("clusters", "check", "--config", str(path), "--cluster", "prod-eu", "-o", "json")
    assert only.returncode == 1
    assert [c["cluster"] for c in json.loads(only.stdout)["clusters"]] == ["prod-eu"]
    unknown = run_nsstuck("clusters", "check", "--config", str(path), "--cluster", "prod-e")
    assert unknown.returncode == 2
    assert "prod-eu" in unknown.stderr


def test_identity_is_unknown_and_aggregated_discovery_seen(kube_emulator: Emulator, tmp_path: Path) -> None:
    # a server without SelfSubjectReview (before 1.27): "unknown"; one serving apidiscovery.k8s.io/v2: yes
    kube_emulator.options["aggregated_discovery"] = True
    kube_emulator.knobs.inject_fault(r"POST /apis/authentication.k8s.io/v1(beta1)?/selfsubjectreviews", 404)
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["identity"] is None
    assert cluster["aggregated_discovery"] is True
    assert done.returncode == 0, done.stdout  # without RBAC every review is allowed
    text = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)))
    assert "unknown" in text.stdout.splitlines()[1]


def test_without_a_registered_cluster_the_kubeconfig_cluster_is_checked(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    # the first command of an adopter with no config file yet: the cluster kubectl would use, its read role
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu, without=("", "nodes")))
    from tests.foundation.test_config import REPO

    # no config file at the default path (config/nsstuck.yaml of the working folder)
    env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = run_nsstuck("clusters", "check", "-o", "json", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["cluster"] == "prod-eu"  # the context's name
    assert cluster["roles"] == ["read"]
    assert [m["permission"] for m in cluster["missing"]] == ["get nodes"]
    # --kubeconfig (and --context) name it even when the config file registers clusters
    other = emu.write_kubeconfig(tmp_path / "other.kubeconfig", token=emu.add_token(SA), context="arn:aws:eks:x/y")
    path = config(tmp_path, kubeconfig)
    named = run_nsstuck("clusters", "check", "--config", str(path), "--kubeconfig", str(other), "-o", "json")
    assert [c["cluster"] for c in json.loads(named.stdout)["clusters"]] == ["arn:aws:eks:x/y"]


def test_a_read_role_without_pods_log_misses_the_controller_logs(
    rbac_cluster: tuple[Emulator, Path], tmp_path: Path
) -> None:
    """Issue 37 §2: the read role reads controllers' logs (`get pods/log`); a role without it is named."""
    emu, kubeconfig = rbac_cluster
    grant(emu, "nsstuck-read", narrow_read_rules(emu, without=("", "pods/log")))
    done = run_nsstuck("clusters", "check", "--config", str(config(tmp_path, kubeconfig)), "-o", "json")
    assert done.returncode == 1, done.stdout
    assert [m["permission"] for m in json.loads(done.stdout)["clusters"][0]["missing"]] == ["get pods/log"]
