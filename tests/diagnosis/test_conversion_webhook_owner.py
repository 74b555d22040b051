"""Issue 37 §3, the third path: a finalizer's controller found through the CRD's conversion webhook Service and
the pods it selects, through the real command line against the Kubernetes emulator.

The Invoice CRD converts between v1 and v2 through Service bookkeeping/bookkeeper-conversion; its finalizer,
`ledger.example.org/void-invoice`, is in no catalogue, and nothing else names the controller: no Helm release
or app.kubernetes.io labels on the CRD, no ClusterServiceVersion, no role granting update on invoices, and no
workload carrying a word of the finalizer's domain (Deployment bookkeeper, image quay.io/finance/bookkeeper).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import _start, run_for

JSON = dict[str, Any]
CRD = "invoices.ledger.example.org"
SERVICE = "bookkeeper-conversion"


@pytest.fixture
def cluster() -> Iterator[Emulator]:
    # the command line reads the real clock: the cluster is built in the minutes before it
    with Emulator(clock=FakeClock(datetime.now(UTC) - timedelta(minutes=10)), seed=0) as emu:
        yield emu


def _version(name: str, *, storage: bool) -> JSON:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"name": name, "served": True, "storage": storage, "schema": schema}


def _billing(emu: Emulator, selector: dict[str, str]) -> None:
    """The CRD, its conversion webhook's Service selecting `selector`, Deployment bookkeeper (pods app=bookkeeper,
    Ready), and namespace billing deleted with one Invoice that keeps the finalizer."""
    api = _start(emu)
    client = {"service": {"namespace": "bookkeeping", "name": SERVICE, "path": "/convert", "port": 443}}
    api.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {
                "group": "ledger.example.org",
                "names": {"plural": "invoices", "singular": "invoice", "kind": "Invoice", "listKind": "InvoiceList"},
                "scope": "Namespaced",
                "versions": [_version("v2", storage=True), _version("v1", storage=False)],
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client},
                },
            },
        },
    )
    api.namespace("bookkeeping")
    api.deployment(
        "bookkeeping",
        "bookkeeper",
        node="node-1",
        image="quay.io/finance/bookkeeper:2.1.0",
        labels={"app": "bookkeeper"},
    )
    api.service("bookkeeping", SERVICE, selector=selector, ports=[{"port": 443, "targetPort": 9443}])
    api.namespace("billing")
    api.custom(
        "ledger.example.org",
        "v2",
        "invoices",
        "billing",
        {
            "apiVersion": "ledger.example.org/v2",
            "kind": "Invoice",
            "metadata": {"name": "inv-2031", "finalizers": ["ledger.example.org/void-invoice"]},
            "spec": {"total": 120},
        },
    )
    run_for(emu, 30)
    api.delete_namespace("billing")
    run_for(emu, 60, step=30)


def _diagnose(emu: Emulator, tmp_path: Path) -> tuple[JSON, str]:
    kubeconfig = str(emu.write_kubeconfig(tmp_path / "kubeconfig"))
    done = run_nsstuck("diagnose", "billing", "--kubeconfig", kubeconfig, "-o", "json")
    assert done.returncode == 0, done.stderr
    text = run_nsstuck("diagnose", "billing", "--kubeconfig", kubeconfig)
    assert text.returncode == 0, text.stderr
    return json.loads(done.stdout), text.stdout


def _judged(report: JSON) -> JSON:
    [finding] = [f for f in report["findings"] if "controller" in f]
    return finding


def test_the_conversion_webhooks_service_finds_the_controller_it_selects(cluster: Emulator, tmp_path: Path) -> None:
    _billing(cluster, {"app": "bookkeeper"})
    report, text = _diagnose(cluster, tmp_path)
    assert report["complete"] is True, report["gaps"]
    finding = _judged(report)
    assert finding["controller"]["found_by"] == "conversion_webhook"
    # the workload its pods belong to is named, Ready: alive, and within the bound the content is being deleted
    assert finding["controller"]["state"] == "alive"
    assert finding["cause"] == "content_deleting"
    evidence = "\n".join(finding["controller"]["evidence"])
    assert (
        f"CRD {CRD} converts through a webhook at Service bookkeeping/{SERVICE} (the pods it selects); its workloads: "
        "Deployment bookkeeper: 1/1 ready in bookkeeping"
    ) in evidence
    assert "its controller (bookkeeper, found through the CRD's conversion webhook) is running" in finding["summary"]
    assert "found through the CRD's conversion webhook" in text
    assert not [r for r in finding["remedies"] if r["action"] == "remove_finalizer"]
    assert "kubectl -n bookkeeping logs deployment/bookkeeper --all-containers" in json.dumps(finding["remedies"])
    # the conversion webhook answers (its Service has a ready endpoint): nothing blocks on it
    assert "webhook_blocks_delete" not in [f["cause"] for f in report["findings"]]


def test_a_conversion_service_that_selects_nothing_finds_no_controller(cluster: Emulator, tmp_path: Path) -> None:
    _billing(cluster, {"app": "bookkeeper-v1"})  # a selector left from an older release: no pod carries it
    report, _ = _diagnose(cluster, tmp_path)
    finding = _judged(report)
    evidence = "\n".join(finding["controller"]["evidence"])
    # the path says what it looked at and found no workload; Deployment bookkeeper is not taken for the controller
    assert (
        f"CRD {CRD} converts through a webhook at Service bookkeeping/{SERVICE} (the pods it selects); "
        "no Deployment, StatefulSet or DaemonSet carries it"
    ) in evidence
    assert "bookkeeper:" not in evidence
    assert "running:" not in evidence
    assert finding["controller"]["found_by"] == "conversion_webhook"
    assert finding["controller"]["state"] == "unknown"  # not found is not dead
    assert finding["cause"] == "orphaned_finalizer"
    assert [r["action"] for r in finding["remedies"]][:2] == ["restore_controller", "remove_finalizer"]
    # and the conversion webhook itself cannot answer: that blocks first, its backend restored first
    first = report["findings"][0]
    assert report["cause"] == "webhook_blocks_delete"
    assert first["summary"] == f"the conversion webhook of {CRD} cannot answer, so {CRD} cannot be listed or deleted"
    assert "no pod in bookkeeping matches the service selector app=bookkeeper-v1" in first["evidence"]
    assert first["remedies"][0]["action"] == "restore_backend"
