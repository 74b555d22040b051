"""The corpus loader refuses a case it cannot hold as posted, and the score reads a diagnosis as the
corpus README says (tests/corpus/README.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from bot.domain.findings import Action, Cause, Diagnosis, Finding, NamespaceState, Remedy, Risk
from bot.domain.refs import ClusterName, ObjectRef
from tests.corpus.loading import CaseError, load, load_case, score
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP

_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "team", "deletionTimestamp": "2024-01-01T10:00:00Z"},
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Terminating"},
}


def _case(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "source": "https://github.com/example/project/issues/1",
        "summary": "s",
        "resolution": "r",
        "namespace": "team",
        "observed_at": "2024-01-01T11:00:00Z",
        "invented": ["everything"],
        "cluster": [_NAMESPACE],
        "expected": {"cause": "namespace_finalizer", "blocking": [{"kind": "Namespace", "name": "team"}]},
    }
    data.update(changes)
    path = tmp_path / "900-test.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"source": "see the forum"}, "https://github.com/"),
        ({"expected": {"cause": "gremlins", "blocking": [{"kind": "Namespace", "name": "team"}]}}, "unknown cause"),
        ({"expected": {"cause": "orphaned_finalizer", "blocking": []}}, "names no object"),
        ({"namespace": "other"}, "must hold namespace 'other'"),
        ({"observed_at": "yesterday"}, "not an RFC 3339 time"),
    ],
)
def test_a_case_that_does_not_say_what_a_case_must_is_refused(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(CaseError, match=message):
        load_case(_case(tmp_path, **changes))


def test_a_case_missing_a_key_is_refused(tmp_path: Path) -> None:
    path = _case(tmp_path)
    data = yaml.safe_load(path.read_text())
    del data["invented"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CaseError, match="missing 'invented'"):
        load_case(path)


def test_a_posted_state_the_api_server_cannot_hold_is_refused(tmp_path: Path, kube_emulator: Emulator) -> None:
    # a ConfigMap without finalizers is removed by its DELETE: it cannot sit there with a deletionTimestamp
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team", "deletionTimestamp": "2024-01-01T10:00:05Z"},
    }
    case = load_case(_case(tmp_path, cluster=[_NAMESPACE, configmap]))
    with pytest.raises(CaseError, match="ConfigMap settings: gone once deleted"):
        load(kube_emulator, case)


def test_the_loaded_namespace_is_the_posted_one(tmp_path: Path, kube_emulator: Emulator) -> None:
    namespace = {
        **_NAMESPACE,
        "metadata": {**_NAMESPACE["metadata"], "finalizers": ["example.com/keep"]},  # type: ignore[dict-item]
        "spec": {"finalizers": []},
        "status": {
            "phase": "Terminating",
            "conditions": [
                {
                    "type": "NamespaceContentRemaining",
                    "status": "False",
                    "reason": "ContentRemoved",
                    "message": "All content successfully removed",
                    "lastTransitionTime": "2024-01-01T10:00:05Z",
                }
            ],
        },
    }
    case = load_case(_case(tmp_path, cluster=[namespace]))
    load(kube_emulator, case)
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    try:
        stored = http.get("/api/v1/namespaces/team")
    finally:
        http.close_all()
    assert stored["metadata"]["deletionTimestamp"] == "2024-01-01T10:00:00Z"
    assert stored["metadata"]["finalizers"] == ["example.com/keep"]
    assert stored["spec"].get("finalizers", []) == []
    assert [c["message"] for c in stored["status"]["conditions"]] == ["All content successfully removed"]
    assert kube_emulator.clock.now() == datetime(2024, 1, 1, 11, 0, tzinfo=UTC)


def _diagnosis(*findings: Finding, complete: bool = True) -> Diagnosis:
    return Diagnosis(
        cluster=ClusterName("c"),
        namespace="team",
        observed_at=datetime(2024, 1, 1, 11, 0, tzinfo=UTC),
        state=NamespaceState.TERMINATING,
        terminating_for_seconds=3600,
        complete=complete,
        findings=findings,
    )


_NS_REF = ObjectRef(api_version="v1", kind="Namespace", name="team")
_FORCE = Remedy(action=Action.FORCE_FINALIZE_NAMESPACE, risk=Risk.HIGH, description="force")


def test_the_score_takes_the_first_blocking_finding_and_every_named_object(tmp_path: Path) -> None:
    case = load_case(_case(tmp_path))
    context = Finding(cause=Cause.CONTENT_DELETING, blocking=False, summary="x", objects=(_NS_REF,))
    wrong = Finding(cause=Cause.ORPHANED_FINALIZER, blocking=True, summary="y")
    right = Finding(cause=Cause.NAMESPACE_FINALIZER, blocking=True, summary="z")
    first_wrong = score(case, _diagnosis(context, wrong, right))
    assert (first_wrong.got, first_wrong.cause_ok, first_wrong.objects_ok) == ("orphaned_finalizer", False, True)
    nothing = score(case, _diagnosis())
    assert (nothing.got, nothing.objects_ok, nothing.missing) == ("none", False, ("Namespace/team",))


def test_force_finalize_first_is_forbidden_where_a_webhook_is_the_cause_or_evidence_is_missing(
    tmp_path: Path,
) -> None:
    webhook = load_case(
        _case(tmp_path, expected={"cause": "webhook_blocks_delete", "blocking": [{"kind": "Namespace", "name": "x"}]})
    )
    finding = Finding(cause=Cause.WEBHOOK_BLOCKS_DELETE, blocking=True, summary="w", remedies=(_FORCE,))
    forced = score(webhook, _diagnosis(finding))
    assert forced.force_first
    assert forced.force_forbidden
    assert not forced.ok
    namespace_case = load_case(_case(tmp_path))
    ns_finding = Finding(cause=Cause.NAMESPACE_FINALIZER, blocking=True, summary="n", remedies=(_FORCE,))
    assert not score(namespace_case, _diagnosis(ns_finding)).force_forbidden
    assert score(namespace_case, _diagnosis(ns_finding, complete=False)).force_forbidden


def test_a_case_may_expect_a_cause_of_issue_37_that_no_rule_produces_yet(tmp_path: Path) -> None:
    for cause in ("cleanup_failing", "pod_not_terminating"):
        case = load_case(_case(tmp_path, expected={"cause": cause, "blocking": [{"kind": "Namespace", "name": "x"}]}))
        assert case.cause == cause


_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "operator-0", "namespace": "team"},
    "spec": {"nodeName": "node-1", "containers": [{"name": "manager", "image": "operator"}]},
}


def test_a_case_log_is_served_by_the_emulator_as_posted(tmp_path: Path, kube_emulator: Emulator) -> None:
    logs = [
        {
            "namespace": "team",
            "pod": "operator-0",
            "lines": [["2024-01-01T10:30:00Z", "cleanup failed: 401"], ["2024-01-01T10:40:00Z", "retrying"]],
        }
    ]
    case = load_case(_case(tmp_path, cluster=[_NAMESPACE, _POD], logs=logs))
    load(kube_emulator, case)
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    try:
        status, _, body = http.raw(
            "GET", "/api/v1/namespaces/team/pods/operator-0/log", query={"timestamps": "true", "tailLines": "1"}
        )
    finally:
        http.close_all()
    assert (status, body) == (200, b"2024-01-01T10:40:00Z retrying\n")


def test_a_log_of_a_pod_the_case_does_not_hold_is_refused(tmp_path: Path) -> None:
    logs = [{"namespace": "team", "pod": "ghost", "lines": [["2024-01-01T10:30:00Z", "x"]]}]
    with pytest.raises(CaseError, match="logs name pod team/ghost"):
        load_case(_case(tmp_path, cluster=[_NAMESPACE, _POD], logs=logs))
    empty = [{"namespace": "team", "pod": "operator-0", "lines": []}]
    with pytest.raises(CaseError, match="hold no line"):
        load_case(_case(tmp_path, cluster=[_NAMESPACE, _POD], logs=empty))
