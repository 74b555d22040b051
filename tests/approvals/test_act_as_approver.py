"""Acting as the approving person (issue 20, item 3): with `act_as_approver`, every read and write of
an execution is sent with the impersonation headers of the approver whose vote completed the quorum,
so that the cluster's own RBAC decides, and its audit log names that person.

Through the running bot, against the Kubernetes emulator with its RBAC authorizer on: nsstuck's
service account may read and impersonate, never write; the approvers' Kubernetes identities get what
each test grants them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator, Journaled
from tests.fakes.kubeapi.scenarios import Api
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import BOB, CAROL

pytestmark = pytest.mark.slow

SA = "system:serviceaccount:nsstuck:nsstuck"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
KIALI = "/apis/kiali.io/v1alpha1/namespaces/istio-system/kialis/kiali"
SCENARIO = "seed003-kiali-orphaned-finalizer"


def _grant(api: Api, name: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]]) -> None:
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


READ = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]


@pytest.fixture
def rbac_cluster(kube_emulator: Emulator) -> Emulator:
    """RBAC on; nsstuck's service account reads everything and may impersonate the mapped people and
    the sre group (the chart's role for this mode), nothing else; every person mapped may read."""
    api = Api(kube_emulator)
    kube_emulator.enable_rbac()
    _grant(api, "nsstuck-read", READ, [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}])
    _grant(
        api,
        "nsstuck-impersonate",
        [
            {
                "apiGroups": [""],
                "resources": ["users"],
                "verbs": ["impersonate"],
                "resourceNames": ["oidc:carol@example.com", "bob@example.com"],
            },
            {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["sre"]},
        ],
        [{"kind": "ServiceAccount", "name": "nsstuck", "namespace": "nsstuck"}],
    )
    _grant(api, "people-read", READ, [{"kind": "Group", "name": "system:authenticated"}])
    return kube_emulator


def _config(*, email: bool = True, bob: bool = True) -> str:
    lines = ["    act_as_approver: true\n", "    impersonation:\n"]
    if bob:
        lines += ["      users:\n", f"        {BOB}: {{user: bob@example.com}}\n"]
    else:
        lines += ["      users:\n", f"        {CAROL}: {{user: oidc:carol@example.com, groups: [sre]}}\n"]
    if email:
        lines += ["      email: {prefix: 'oidc:', groups: [sre]}\n"]
    return "".join(lines)


def _entries(flow: Flow, request_id: int) -> list[tuple[str, dict[str, Any]]]:
    rows = flow.query("SELECT event, details FROM audit_entries WHERE request_id = :id ORDER BY seq", id=request_id)
    return [
        (str(r["event"]), json.loads(r["details"]) if isinstance(r["details"], str) else dict(r["details"]))
        for r in rows
    ]


def _writes(kube: Emulator) -> list[Journaled]:
    return [
        e
        for e in kube.journal.entries(admin=True)
        if e.method in ("PATCH", "PUT", "POST", "DELETE") and "accessreview" not in e.path
    ]


def test_an_allowed_approver_makes_the_change_as_themself(
    slack_emulator: SlackEmulator, rbac_cluster: Emulator, tmp_path: Path, database_url: str
) -> None:
    # CAROL's Kubernetes user is derived from her Slack e-mail (prefix oidc:, group sre), and sre may
    # patch kialis: the finalizer goes, and the cluster saw the write made by her, through nsstuck
    api = Api(rbac_cluster)
    _grant(
        api,
        "sre-kiali",
        [{"apiGroups": ["kiali.io"], "resources": ["kialis"], "verbs": ["patch"]}],
        [{"kind": "Group", "name": "sre"}],
    )
    with remediation_bot(
        slack_emulator, rbac_cluster, tmp_path, database=database_url, cluster_extra=_config()
    ) as flow:
        request_id = flow.requested(SCENARIO, "remove_finalizer")
        # the diagnosis read with nsstuck's own read role, as itself
        assert [e for e in rbac_cluster.journal.entries(admin=True) if e.impersonated_by] == []
        assert any(
            e.user == SA and e.path.startswith("/apis/kiali.io/") for e in rbac_cluster.journal.entries(admin=True)
        )
        rbac_cluster.journal.clear()
        assert flow.vote(request_id, CAROL).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)

        assert row["status"] == "applied", row["status_reason"]
        assert api.http.get_or_none(KIALI) is None or not api.http.get(KIALI)["metadata"].get("finalizers")
        writes = _writes(rbac_cluster)
        assert [(w.method, w.path, w.dry_run) for w in writes] == [
            ("PATCH", KIALI, True),
            ("PATCH", KIALI, False),
        ]
        for write in writes:
            assert write.user == "oidc:carol@example.com"
            assert write.groups == ("sre", "system:authenticated")
            assert write.impersonated_by == SA
        # every read of the execution too (the target's re-check, the cause's re-collection, the backup)
        reads = [e for e in rbac_cluster.journal.entries("GET", admin=True) if e.impersonated_by == SA]
        assert any(e.path == KIALI for e in reads)
        assert any(e.path.startswith("/api/v1/namespaces/istio-system/") for e in reads)
        events = _entries(flow, request_id)
        assert events[-1][0] == "applied"
        assert events[-1][1]["acting_as"] == {"user": "oidc:carol@example.com", "groups": ["sre"]}
        flow.wait_thread(f"Remediation #{request_id}: Done")


def test_the_clusters_refusal_is_shown_and_nothing_changes(
    slack_emulator: SlackEmulator, rbac_cluster: Emulator, tmp_path: Path, database_url: str
) -> None:
    # BOB maps to bob@example.com, who may read but not patch kialis: the cluster refuses the dry run
    api = Api(rbac_cluster)
    with remediation_bot(
        slack_emulator, rbac_cluster, tmp_path, database=database_url, cluster_extra=_config()
    ) as flow:
        request_id = flow.requested(SCENARIO, "remove_finalizer")
        before = api.http.get(KIALI)
        assert flow.vote(request_id, BOB).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)

        refusal = (
            'kialis.kiali.io "kiali" is forbidden: User "bob@example.com" cannot patch resource "kialis" '
            'in API group "kiali.io" in the namespace "istio-system"'
        )
        assert row["status"] == "failed"
        assert refusal in str(row["status_reason"]), row["status_reason"]
        assert "the cluster refused it for bob@example.com" in str(row["status_reason"])
        assert (
            api.http.get(KIALI)["metadata"]["finalizers"] == before["metadata"]["finalizers"] == ["kiali.io/finalizer"]
        )
        assert api.http.get(KIALI)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert [w for w in _writes(rbac_cluster) if not w.dry_run] == []
        events = _entries(flow, request_id)
        names = [e for e, _ in events]
        assert "execution_started" not in names, names
        assert events[-1][0] == "failed"
        assert refusal in events[-1][1]["reason"]
        assert events[-1][1]["acting_as"] == {"user": "bob@example.com", "groups": []}
        thread = flow.wait_thread(f"Remediation #{request_id}: Failed")
        # the thread quotes the cluster (Slack escapes nothing in these words but the quotes stay)
        assert 'User "bob@example.com" cannot patch resource "kialis"' in thread.replace("&quot;", '"'), thread


def test_an_approver_without_a_kubernetes_identity_is_refused_before_anything_runs(
    slack_emulator: SlackEmulator, rbac_cluster: Emulator, tmp_path: Path, database_url: str
) -> None:
    # only CAROL is mapped (no e-mail mapping): BOB's approval completes the quorum, nothing is sent
    api = Api(rbac_cluster)
    extra = _config(email=False, bob=False)
    with remediation_bot(slack_emulator, rbac_cluster, tmp_path, database=database_url, cluster_extra=extra) as flow:
        request_id = flow.requested(SCENARIO, "remove_finalizer")
        before = api.http.get(KIALI)
        rbac_cluster.journal.clear()
        assert flow.vote(request_id, BOB).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)

        message = (
            f"nsstuck has no Kubernetes identity for Slack user {BOB} on prod-eu: add {BOB} to impersonation.users"
        )
        assert (row["status"], row["status_reason"]) == ("failed", message)
        assert api.http.get(KIALI)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        sent = rbac_cluster.journal.lines()
        assert not [line for line in sent if not line.startswith("GET ")], sent
        assert not [e for e in rbac_cluster.journal.entries(admin=True) if e.impersonated_by]
        events = _entries(flow, request_id)
        assert [e for e, _ in events][-1] == "failed"
        assert not {"backed_up", "dry_run", "execution_started"} & {e for e, _ in events}
        assert events[-1][1]["phase"] == "identity"
        flow.wait_thread(f"Remediation #{request_id}: Failed: {message}")


def test_an_approver_whose_slack_profile_has_no_email_is_refused(
    slack_emulator: SlackEmulator, rbac_cluster: Emulator, tmp_path: Path
) -> None:
    # the e-mail mapping only: CAROL's profile shows no e-mail, so she has no Kubernetes identity
    slack_emulator.add_user(CAROL, "carol", real_name="Carol Chen")
    extra = "    act_as_approver: true\n    impersonation:\n      email: {prefix: 'oidc:', groups: [sre]}\n"
    with remediation_bot(slack_emulator, rbac_cluster, tmp_path, cluster_extra=extra) as flow:
        request_id = flow.requested(SCENARIO, "remove_finalizer")
        rbac_cluster.journal.clear()
        assert flow.vote(request_id, CAROL).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)

        assert row["status"] == "failed"
        assert str(row["status_reason"]) == (
            f"nsstuck has no Kubernetes identity for Slack user {CAROL} on prod-eu: Slack shows no e-mail for them "
            f"(the app needs users:read.email); add {CAROL} to impersonation.users"
        )
        assert not [e for e in rbac_cluster.journal.entries(admin=True) if e.impersonated_by]
        assert Api(rbac_cluster).http.get(KIALI)["metadata"]["finalizers"] == ["kiali.io/finalizer"]


@pytest.mark.timing  # a 2 s execution deadline that the re-check's diagnosis must fit in
def test_the_reconciler_reads_as_the_approver(
    slack_emulator: SlackEmulator, rbac_cluster: Emulator, tmp_path: Path
) -> None:
    # the write's connection is cut after the dry run: the request is settled from what the cluster
    # shows, and that read is made as the approver too
    _grant(
        Api(rbac_cluster),
        "sre-kiali",
        [{"apiGroups": ["kiali.io"], "resources": ["kialis"], "verbs": ["patch"]}],
        [{"kind": "Group", "name": "sre"}],
    )
    env = {"NSSTUCK_EXECUTION_TIMEOUT_SECONDS": "2"}
    with remediation_bot(slack_emulator, rbac_cluster, tmp_path, extra_env=env, cluster_extra=_config()) as flow:
        request_id = flow.requested(SCENARIO, "remove_finalizer")
        rbac_cluster.knobs.inject_fault(f"^PATCH {KIALI}$", 0, reset_connection=True, skip=1, times=1)
        assert flow.vote(request_id, CAROL).status == 200
        row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)

        assert row["status"] == "failed", row["status_reason"]
        assert "the cluster shows it did not happen" in str(row["status_reason"])
        assert flow.audit(request_id)[-3:] == ["execution_started", "reconciled", "failed"]
        journal = rbac_cluster.journal.entries(admin=True)
        last_patch = max(i for i, e in enumerate(journal) if e.method == "PATCH" and e.path == KIALI)
        settle_reads = [e for e in journal[last_patch + 1 :] if e.method == "GET" and e.path == KIALI]
        assert settle_reads, journal[last_patch:]
        assert {(e.user, e.impersonated_by) for e in settle_reads} == {("oidc:carol@example.com", SA)}
