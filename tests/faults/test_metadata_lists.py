"""What the collector asks for (issue 20, item 1): the types of a terminating namespace as metadata only
(`PartialObjectMetadataList`), pods in full; a server that cannot answer with metadata only (406) is
asked again for the whole objects, reduced at once, except for Secrets and ConfigMaps, which are never
read whole: a 406 there is a gap. Then (issue 22) the objects being deleted are read whole one by one
(their status and managers), never a Secret or a ConfigMap, and the namespace's Events are listed whole
(they are the evidence of what controllers and kubelets did)."""

from __future__ import annotations

import re
from datetime import timedelta

from bot.domain.findings import Action
from bot.services.diagnosing import DiagnosisResult
from bot.services.scanning import scan_cluster
from tests.fakes.kubeapi import Journaled
from tests.faults._support import KIALI_LIST, NAMESPACE, Cluster, Fault, assert_partial, offered

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# what kube-apiserver answers a media type it cannot serve (negotiation.NewNotAcceptableError)
NOT_ACCEPTABLE = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "only the following media types are accepted: application/json, application/yaml",
    "reason": "NotAcceptable",
    "code": 406,
}
NAMESPACED_LIST = re.compile(rf"^/apis?/(?:[^/]+/)?[^/]+/namespaces/{NAMESPACE}/([^/]+)$")


def _lists(journal: list[Journaled]) -> dict[str, list[Journaled]]:
    """The lists of each type in the namespace, by resource name."""
    out: dict[str, list[Journaled]] = {}
    for entry in journal:
        match = NAMESPACED_LIST.match(entry.path)
        if entry.method == "GET" and match:
            out.setdefault(match.group(1), []).append(entry)
    return out


def _complete(result: DiagnosisResult) -> None:
    assert result.diagnosis.complete is True, [str(g) for g in result.diagnosis.gaps]
    assert Action.FORCE_FINALIZE_NAMESPACE in offered(result.diagnosis)


def test_only_pods_are_listed_whole_in_a_terminating_namespace(cluster: Cluster) -> None:
    cluster.emu.journal.clear()
    result, _ = cluster.diagnose()
    scan_cluster(cluster.target, stuck_after=timedelta(0), now=cluster.emu.clock.now())

    _complete(result)
    lists = _lists(cluster.emu.journal.entries())
    assert {"secrets", "configmaps", "pods", "kialis", "serviceaccounts"} <= set(lists), sorted(lists)
    assert {e.accept for e in lists.pop("pods")} == {"application/json"}
    # the Events as evidence: whole, from events.k8s.io/v1 (as content, both groups, metadata only)
    events = lists.pop("events")
    assert {(e.path.split("/")[1], e.accept) for e in events} == {
        ("apis", "application/json"),
        ("apis", METADATA_LIST),
        ("api", METADATA_LIST),
    }
    # the Kiali operator being gone, the search for who else may run its finalizer (issue 37 §3) reads the
    # namespace's Roles and RoleBindings whole: it needs their rules and subjects
    for rbac in ("roles", "rolebindings"):
        whole = [e for e in lists.get(rbac, []) if e.accept == "application/json"]
        assert whole, f"{rbac}: the controller search's read"
        lists[rbac] = [e for e in lists[rbac] if e not in whole]
        if not lists[rbac]:
            del lists[rbac]
    assert {(name, e.accept) for name, entries in lists.items() for e in entries} == {
        (name, METADATA_LIST) for name in lists
    }
    # the one object being deleted is then read whole, by name (by the diagnosis and the scan); nothing else is
    one_by_one = [e.path for e in cluster.emu.journal.entries("GET") if f"/namespaces/{NAMESPACE}/" in e.path]
    assert {p for p in one_by_one if not NAMESPACED_LIST.match(p)} == {
        f"/apis/kiali.io/v1alpha1/namespaces/{NAMESPACE}/kialis/kiali"
    }
    [kiali] = result.snapshot.objects("kialis.kiali.io")
    assert (kiali["apiVersion"], kiali["kind"], kiali["metadata"]["finalizers"]) == (
        "kiali.io/v1alpha1",
        "Kiali",
        ["kiali.io/finalizer"],
    )
    # who wrote it and when, without the field sets
    assert all(v == {} for m in kiali["metadata"].get("managedFields", []) for v in m["fieldsV1"].values())
    for rtype, obj in result.snapshot.all_contents():
        assert obj["kind"] == rtype.kind
        if rtype.key not in ("pods", "kialis.kiali.io"):
            assert set(obj) == {"apiVersion", "kind", "metadata"}, obj


def test_a_type_whose_server_cannot_answer_metadata_only_is_read_whole_once(cluster: Cluster) -> None:
    rule = cluster.emu.knobs.inject_fault(KIALI_LIST, 406, NOT_ACCEPTABLE, times=1)
    cluster.emu.journal.clear()

    result, _ = cluster.diagnose()

    _complete(result)
    assert rule.hits == 1
    assert [e.accept for e in _lists(cluster.emu.journal.entries())["kialis"]] == [
        METADATA_LIST,
        "application/json",
    ]
    assert "Kiali" in result.diagnosis.findings[0].summary


def test_secrets_are_never_read_whole_not_even_when_refused_metadata_only(cluster: Cluster) -> None:
    secrets = rf"^GET /api/v1/namespaces/{NAMESPACE}/secrets$"
    cluster.emu.knobs.inject_fault(secrets, 406, NOT_ACCEPTABLE)
    cluster.emu.journal.clear()

    result, _ = cluster.diagnose()

    assert_partial(
        result.diagnosis,
        Fault("406", lambda emu: None, f"list secrets in {NAMESPACE}", "error", "only the following media types"),
    )
    asked = _lists(cluster.emu.journal.entries())["secrets"]
    assert [e.accept for e in asked] == [METADATA_LIST]
