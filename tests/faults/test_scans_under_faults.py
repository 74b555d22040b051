"""Each fault once through a digest's scan (`scan_cluster`, which lists in a stuck namespace only the
types its conditions name): the stuck namespace is always reported, partial when the scan needed what
the fault broke, and never with a force-finalize on partial evidence."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from bot.domain.findings import Action
from bot.services.scanning import scan_cluster
from tests.faults._support import (
    CULPRIT_FAULTS,
    FAULTS,
    MARGIN,
    NAMESPACE,
    Cluster,
    Fault,
    assert_partial,
    offered,
    scan_options,
)

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing


@pytest.mark.parametrize("fault", FAULTS + CULPRIT_FAULTS, ids=str)
def test_the_stuck_namespace_is_reported_whatever_the_fault(cluster: Cluster, fault: Fault) -> None:
    fault.inject(cluster.emu)

    started = time.monotonic()
    scan = scan_cluster(
        cluster.target,
        stuck_after=timedelta(minutes=1),
        now=cluster.emu.clock.now(),
        options=scan_options(**fault.options),
    )
    elapsed = time.monotonic() - started

    assert scan.reachable, scan.error
    assert [s.namespace for s in scan.stuck] == [NAMESPACE]
    entry = scan.stuck[0]
    assert entry.error is None
    assert entry.result is not None
    diagnosis = entry.result.diagnosis
    assert elapsed <= fault.deadline + MARGIN
    if fault.in_scan:
        assert_partial(diagnosis, fault)
        return
    # the namespace's conditions say only its Kiali objects remain: the scan never asked for what broke
    assert diagnosis.complete is True, [str(g) for g in diagnosis.gaps]
    assert Action.FORCE_FINALIZE_NAMESPACE in offered(diagnosis)
    # (besides the Events, and the object being deleted read whole)
    # (and, the Kiali operator being gone, the search for who else may run its finalizer: the namespace's
    # Roles and their bindings, issue 37 §3)
    asked = {line for line in cluster.emu.journal.lines() if f"/namespaces/{NAMESPACE}/" in line}
    assert asked == {
        f"GET /apis/kiali.io/v1alpha1/namespaces/{NAMESPACE}/kialis",
        f"GET /apis/kiali.io/v1alpha1/namespaces/{NAMESPACE}/kialis/kiali",
        f"GET /apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events",
        f"GET /apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
        f"GET /apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
    }
