"""A group whose API flaps between available and unavailable: the report is consistent, either with
the group's objects in it or with a gap for the group, never complete with its objects missing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.domain.findings import Action, Cause
from bot.services.diagnosing import DiagnosisResult
from bot.services.scanning import scan_cluster
from tests.faults._support import (
    KIALI_GAP,
    KIALI_GROUP,
    KIALI_LIST,
    KIALIS,
    NAMESPACE,
    ROOMY,
    Cluster,
    Fault,
    assert_partial,
    offered,
    scan_options,
)

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

UNAVAILABLE = "service unavailable\n"  # what the aggregator answers for an API it cannot reach
PLAIN = {"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"}


def assert_consistent(result: DiagnosisResult) -> None:
    listed = KIALIS in result.snapshot.contents
    gap = any("kiali.io" in g.what for g in result.diagnosis.gaps)
    assert listed or gap, [str(g) for g in result.diagnosis.gaps]
    if result.diagnosis.complete:
        assert listed


@pytest.mark.parametrize("skip", [0, 1], ids=["unavailable-first", "available-first"])
def test_a_group_that_alternates_is_listed(cluster: Cluster, skip: int) -> None:
    """503, 200, 503, ... (or 200, 503, ...) on every request to kiali.io: the retry of a GET gets it."""
    rule = cluster.emu.knobs.inject_fault(KIALI_GROUP, 503, UNAVAILABLE, PLAIN, every=2, skip=skip)

    result, elapsed = cluster.diagnose()

    assert rule.hits >= 1  # it did flap under us
    assert_consistent(result)
    diagnosis = result.diagnosis
    assert diagnosis.complete is True, [str(g) for g in diagnosis.gaps]
    assert diagnosis.cause is Cause.ORPHANED_FINALIZER
    assert [(o.kind, o.name) for o in diagnosis.findings[0].objects] == [("Kiali", "kiali")]
    assert Action.FORCE_FINALIZE_NAMESPACE in offered(diagnosis)  # every piece of evidence is there
    assert elapsed < ROOMY  # it ended when the collection was done, not at its deadline


def test_a_group_whose_lists_fail_twice_is_a_gap(cluster: Cluster) -> None:
    rule = cluster.emu.knobs.inject_fault(KIALI_LIST, 503, UNAVAILABLE, PLAIN, times=2)

    result, _ = cluster.diagnose()

    assert rule.hits == 2
    assert_consistent(result)
    assert_partial(result.diagnosis, Fault("flap", lambda emu: None, KIALI_GAP, "unavailable"))


def test_a_group_whose_discovery_fails_twice_is_still_listed(cluster: Cluster) -> None:
    """Discovery down for both tries: the types its CRDs define are listed anyway."""
    rule = cluster.emu.knobs.inject_fault(r"^GET /apis/kiali\.io/v1alpha1$", 503, UNAVAILABLE, PLAIN, times=2)

    result, _ = cluster.diagnose()

    assert rule.hits == 2
    assert_consistent(result)
    assert KIALIS in result.snapshot.contents
    blocking = [o.name for f in result.diagnosis.findings if f.blocking for o in f.objects]
    assert "kiali" in blocking


def test_a_scan_over_a_flapping_group_keeps_the_namespace(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(KIALI_GROUP, 503, UNAVAILABLE, PLAIN, every=2)

    scan = scan_cluster(
        cluster.target, stuck_after=timedelta(minutes=1), now=cluster.emu.clock.now(), options=scan_options()
    )

    assert [s.namespace for s in scan.stuck] == [NAMESPACE]
    entry = scan.stuck[0].result
    assert entry is not None
    assert_consistent(entry)
