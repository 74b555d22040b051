"""Issue 37 §3: a finalizer's controller found from the cluster where the catalogue and the finalizer's name
find none, through the real command line and the real bot, against the Kubernetes emulator (the scenarios
`controller-found-by-rbac`, `controller-rbac-wildcard-only`, `controller-found-by-helm`,
`controller-found-by-olm`): through RBAC (Argo CD's `*` grant beside it never counts), through the CRD's Helm
release, through OLM's ClusterServiceVersion (a Ready deployment beside a missing one: never dead), and a
forbidden RBAC read, which is a named gap and never makes the controller dead.

The command line reads the emulator over its plain HTTP listener (the bot, over HTTPS): what is found
does not depend on TLS, which cost a fifth of the module's CPU on both ends of each request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.diagnose import NAMESPACE as HEAVY
from bench.diagnose import build_cluster
from tests._cli import run_nsstuck
from tests.approvals._flow import remediation_bot
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario_once
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL

JSON = dict[str, Any]
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_PATH = f"/apis/{RBAC_GROUP}/v1/"


@pytest.fixture
def cluster() -> Iterator[Emulator]:
    # the command line reads the real clock: the scenario is built in the minutes before it
    with Emulator(clock=FakeClock(datetime.now(UTC) - timedelta(minutes=10)), seed=0) as emu:
        yield emu


def _diagnose(emu: Emulator, tmp_path: Path, scenario: str, *more: str) -> tuple[JSON, str]:
    """The scenario applied; `nsstuck diagnose` as JSON, then as text."""
    namespace = apply_scenario_once(emu, scenario).expected.namespace
    kubeconfig = str(emu.write_kubeconfig(tmp_path / "kubeconfig", tls=False))
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", kubeconfig, "-o", "json", *more)
    assert done.returncode == 0, done.stderr
    text = run_nsstuck("diagnose", namespace, "--kubeconfig", kubeconfig, *more)
    assert text.returncode == 0, text.stderr
    return json.loads(done.stdout), text.stdout


def _judged(report: JSON) -> JSON:
    [finding] = [f for f in report["findings"] if "controller" in f]
    return finding


def test_a_controller_found_only_through_rbac_is_alive_and_argo_cds_wildcard_grant_is_ignored(
    cluster: Emulator, tmp_path: Path
) -> None:
    report, text = _diagnose(cluster, tmp_path, "controller-found-by-rbac")
    finding = _judged(report)
    assert report["complete"] is True, report["gaps"]
    assert finding["cause"] == "content_deleting"
    assert finding["controller"]["state"] == "alive"
    assert finding["controller"]["found_by"] == "rbac"
    evidence = "\n".join(finding["controller"]["evidence"])
    assert "RBAC lets ServiceAccount platform-ops/reconciler update these objects" in evidence
    assert "ClusterRole gizmo-editor (update/patch gizmos, update/patch gizmos/finalizers)" in evidence
    assert "running: Deployment reconciler: 1/1 ready in platform-ops" in evidence
    assert "argocd" not in evidence  # allowed everything, named nothing
    assert [r["action"] for r in finding["remedies"]] == ["wait", "investigate"]
    assert [
        c
        for c in finding["remedies"][1]["commands"]
        if c.startswith("kubectl -n platform-ops logs deployment/reconciler")
    ]
    assert "its controller (reconciler, found through RBAC" in text


def test_a_wildcard_grant_alone_finds_no_controller(cluster: Emulator, tmp_path: Path) -> None:
    report, _ = _diagnose(cluster, tmp_path, "controller-rbac-wildcard-only")
    finding = _judged(report)
    assert finding["cause"] == "orphaned_finalizer"
    assert finding["controller"]["state"] == "unknown"
    assert finding["controller"]["found_by"] == "name"
    evidence = "\n".join(finding["controller"]["evidence"])
    assert "argocd" not in evidence
    assert "no ClusterRole or Role lets a service account update it by name (grants on `*` are not counted)" in (
        evidence
    )
    # finding the controller comes before removing its finalizer
    assert [r["action"] for r in finding["remedies"]][:2] == ["restore_controller", "remove_finalizer"]


def test_a_controller_found_only_through_the_crds_helm_release_is_dead_when_scaled_to_zero(
    cluster: Emulator, tmp_path: Path
) -> None:
    report, text = _diagnose(cluster, tmp_path, "controller-found-by-helm")
    finding = _judged(report)
    assert finding["cause"] == "orphaned_finalizer"
    assert finding["controller"] | {"evidence": None} == {"state": "dead", "found_by": "helm", "evidence": None}
    evidence = "\n".join(finding["controller"]["evidence"])
    assert "installed by Helm release storefront-system/storefront (its meta.helm.sh annotations)" in evidence
    assert "Deployment order-manager: 0/0 ready in storefront-system: scaled to zero" in evidence
    first = finding["remedies"][0]
    assert first["action"] == "restore_controller"
    assert first["commands"] == ["kubectl -n storefront-system describe deployment order-manager"]
    assert "its controller (order-manager, found through the CRD's Helm release) exists but does not run" in text


def test_a_controller_found_only_through_olm_with_a_ready_deployment_is_never_dead(
    cluster: Emulator, tmp_path: Path
) -> None:
    report, _ = _diagnose(cluster, tmp_path, "controller-found-by-olm")
    finding = _judged(report)
    assert finding["cause"] == "content_deleting"
    assert finding["controller"]["state"] == "alive"
    assert finding["controller"]["found_by"] == "olm"
    evidence = "\n".join(finding["controller"]["evidence"])
    assert "ClusterServiceVersion operators/retention-operator.v1.3.0 (OLM) owns CRD retentions.archive.mycorp.io" in (
        evidence
    )
    assert "retention-controller-manager: 1/1 ready" in evidence
    # the deployment the CSV names that does not exist does not outweigh the Ready one
    assert "retention-webhook" not in evidence
    assert not [r for r in finding["remedies"] if r["action"] == "remove_finalizer"]


def test_a_forbidden_rbac_read_is_a_named_gap_and_never_makes_the_controller_dead(
    cluster: Emulator, tmp_path: Path
) -> None:
    cluster.knobs.forbid("clusterroles", RBAC_GROUP)
    report, text = _diagnose(cluster, tmp_path, "controller-found-by-rbac")
    assert report["complete"] is False
    assert {(g["what"], g["reason"]) for g in report["gaps"]} == {
        ("list clusterroles (controller discovery)", "forbidden")
    }
    finding = _judged(report)
    assert finding["controller"]["state"] == "unknown"  # not found, and not dead for want of it
    assert "the cluster could not all be searched for its controller (list clusterroles (controller discovery)" in (
        "\n".join(finding["controller"]["evidence"])
    )
    assert "list clusterroles (controller discovery): forbidden" in text
    assert not [r for r in report["findings"] for x in r["remedies"] if x["action"] == "force_finalize_namespace"]


def test_the_searches_read_rbac_and_csvs_only_for_a_finalizer_nothing_else_finds(
    cluster: Emulator, tmp_path: Path
) -> None:
    """The Kiali operator is in the catalogue and its Deployment runs: no RBAC or CSV read is made (and where
    a finalizer nothing else finds asks for them, they are: the scenario with reconciler)."""
    apply_scenario_once(cluster, "live-operator-finalizer")
    cluster.journal.clear()
    kubeconfig = str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    namespace = SCENARIOS["live-operator-finalizer"].expected.namespace
    assert run_nsstuck("diagnose", namespace, "--kubeconfig", kubeconfig, "-o", "json").returncode == 0
    paths = cluster.journal.lines()
    assert [p for p in paths if "/namespaces/observability/" in p], "the diagnosis listed nothing"
    # (the namespace's own Roles and RoleBindings are listed as its content, as every namespaced type is)
    searched = ("/clusterroles", "/clusterrolebindings", "/clusterserviceversions")
    assert not [p for p in paths if any(s in p for s in searched)]


def test_the_bot_names_how_it_found_each_controller(
    slack_emulator: SlackEmulator, cluster: Emulator, tmp_path: Path
) -> None:
    """One bot, three clusters (RBAC, Helm, OLM): each verdict's thread says how the controller was found, and
    the report kept in the database carries `found_by`."""
    clock = FakeClock(datetime.now(UTC) - timedelta(minutes=10))
    with Emulator(clock=clock, seed=0) as helm, Emulator(clock=clock, seed=0) as olm:
        extra = ""
        for name, emu in (("helm-c", helm), ("olm-c", olm)):
            emu.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
            extra += f"  - name: {name}\n    kubeconfig: {name}.kubeconfig\n    channels: [{OPS_CHANNEL}]\n"
        asked = [
            ("prod-eu", apply_scenario_once(cluster, "controller-found-by-rbac").expected.namespace, "rbac"),
            ("helm-c", apply_scenario_once(helm, "controller-found-by-helm").expected.namespace, "helm"),
            ("olm-c", apply_scenario_once(olm, "controller-found-by-olm").expected.namespace, "olm"),
        ]
        with remediation_bot(slack_emulator, cluster, tmp_path, cluster_extra=extra) as flow:
            said = {
                "rbac": "found through RBAC, who may update the resource",
                "helm": "found through the CRD's Helm release",
                "olm": "found through OLM, the ClusterServiceVersion that owns the CRD",
            }
            for name, namespace, found_by in asked:
                before = {m["ts"] for m in slack_emulator.channel_messages(OPS_CHANNEL)}
                command = f"{name} {namespace}"
                assert flow.bot.driver.slash_command("/nsstuck", command, user=ALICE, channel=OPS_CHANNEL).status == 200

                def verdict(namespace: str = namespace, before: set[Any] = before) -> JSON | None:
                    new = [m for m in slack_emulator.channel_messages(OPS_CHANNEL) if m["ts"] not in before]
                    return next((m for m in new if namespace in slack_emulator.render(m)), None)

                message = slack_emulator.wait_for(verdict, timeout=60, message=f"no verdict for {namespace}")

                def thread(ts: str = str(message["ts"]), found_by: str = found_by) -> str | None:
                    text = "\n".join(slack_emulator.thread_text(OPS_CHANNEL, ts))
                    return text if "Controller: *" in text and said[found_by] in text else None

                slack_emulator.wait_for(thread, timeout=60, message=f"no controller line for {namespace}")
                flow.namespace = namespace
                report = flow.latest_report()
                [finding] = [f for f in report["findings"] if "controller" in f]
                assert finding["controller"]["found_by"] == found_by


def test_the_searchs_reads_go_before_the_lists_still_queued(tmp_path: Path) -> None:
    """The search's reads are decided on when the first list holding a finalizer nothing finds answers, with
    most of a CRD-heavy namespace's lists still queued: they go before those (issue 37: in parallel with the
    rest), not in a round after the last of them."""
    types = 200
    with Emulator(clock=FakeClock(), seed=0, controllers=False) as emu:
        # bench/diagnose.py's CRD-heavy cluster, one object of each type: a finalizer nothing finds on each
        build_cluster(emu, types=types, objects=types)
        # the namespace's reads slow, the rest fast: every list is queued (its group discovered) before the
        # first answers, as on a cluster of a thousand types. The lists go 64 at a time, so they answer in
        # waves 400 ms apart: the search is decided on in the first wave's answers, and it is the third and
        # fourth waves (72 lists) that it must go before, not a race with the second (issue 35: a loaded CI
        # machine lost that race when there were only two waves)
        emu.knobs.latency(400, match=f"/namespaces/{HEAVY}/")
        emu.journal.clear()
        kubeconfig = str(emu.write_kubeconfig(tmp_path / "kubeconfig", tls=False))
        done = run_nsstuck("diagnose", HEAVY, "--kubeconfig", kubeconfig, "-o", "json")
        assert done.returncode == 0, done.stderr
        sent = emu.journal.entries()
    report = json.loads(done.stdout)
    assert report["complete"] is True, report["gaps"]
    assert len([f for f in report["findings"] if f["cause"] == "orphaned_finalizer"]) == types
    heavy = re.compile(rf"/apis/g\d+[.]bench[.]example[.]com/v1/namespaces/{HEAVY}/widgets\d+")
    lists = [i for i, e in enumerate(sent) if heavy.fullmatch(e.path)]
    assert len(lists) == types
    # (the namespace's Roles and RoleBindings are also listed as its content, metadata only, as every type is)
    searched = [(i, e.path) for i, e in enumerate(sent) if e.path.startswith(RBAC_PATH) and not e.metadata_only]
    searched += [(i, e.path) for i, e in enumerate(sent) if e.path.endswith("/clusterserviceversions")]
    assert sorted(p.rpartition("/")[2] for _, p in searched) == [
        "clusterrolebindings", "clusterroles", "clusterserviceversions", "rolebindings", "roles"
    ]  # fmt: skip
    for at, path in searched:
        # the command line makes 64 calls at a time: when the first list answers, most of the others are still
        # queued (the search's reads queued after them would have none after them)
        assert len([i for i in lists if i > at]) >= types // 4, (path, [e.line for e in sent])
