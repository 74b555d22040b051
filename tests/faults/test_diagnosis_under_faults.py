"""Each cluster fault, diagnosed over HTTP with a deadline: a partial report, on time, with the gap
named, and never a force-finalize offered on partial evidence."""

from __future__ import annotations

import pytest

from bot.domain.findings import Action, Cause, ControllerState
from tests.faults._support import (
    CULPRIT_FAULTS,
    FAULTS,
    KIALIS,
    MARGIN,
    ROOMY,
    Cluster,
    Fault,
    assert_partial,
    offered,
)

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing


def test_without_faults_the_report_is_complete_and_offers_force_finalize(cluster: Cluster) -> None:
    """The baseline that makes the absence of the offer below mean something."""
    result, elapsed = cluster.diagnose()
    diagnosis = result.diagnosis
    assert diagnosis.complete is True, [str(g) for g in diagnosis.gaps]
    assert diagnosis.cause is Cause.ORPHANED_FINALIZER
    assert Action.FORCE_FINALIZE_NAMESPACE in offered(diagnosis)
    assert elapsed < ROOMY  # it ended when the collection was done, not at its deadline


@pytest.mark.parametrize("fault", FAULTS, ids=str)
def test_a_fault_beside_the_cause_leaves_the_cause_found(cluster: Cluster, fault: Fault) -> None:
    fault.inject(cluster.emu)

    result, elapsed = cluster.diagnose(**fault.options)

    assert elapsed <= fault.deadline + MARGIN
    diagnosis = result.diagnosis
    assert_partial(diagnosis, fault)
    assert diagnosis.cause is Cause.ORPHANED_FINALIZER
    first = diagnosis.findings[0]
    assert [(o.kind, o.name) for o in first.objects] == [("Kiali", "kiali")]
    assert first.controller is not None
    if "workloads" in fault.what or "leases" in fault.what:
        # the workloads (or Leases) that would show the Kiali operator uninstalled were not all seen:
        # whether it runs is unknown, and finding out comes before removing its finalizer (issue 22)
        assert first.controller.state is ControllerState.UNKNOWN
        assert [r.action for r in first.remedies[:2]] == [Action.RESTORE_CONTROLLER, Action.REMOVE_FINALIZER]
    else:
        assert first.controller.state is ControllerState.DEAD
        assert first.remedies[0].action is Action.REMOVE_FINALIZER


@pytest.mark.parametrize("fault", CULPRIT_FAULTS, ids=str)
def test_a_fault_on_the_blocking_objects_leaves_nothing_to_change(cluster: Cluster, fault: Fault) -> None:
    fault.inject(cluster.emu)

    result, elapsed = cluster.diagnose(**fault.options)

    assert elapsed <= fault.deadline + MARGIN
    diagnosis = result.diagnosis
    assert_partial(diagnosis, fault)
    assert KIALIS not in result.snapshot.contents
    # the objects are unseen: no remedy may touch the cluster on the strength of this report
    assert not [r.action for f in diagnosis.findings for r in f.remedies if r.action.changes_cluster]
    assert diagnosis.cause is not None
    assert diagnosis.findings[0].blocking
