"""What the transport asks again, and what it does not: a 429 after its Retry-After when that fits in
the deadline, a GET once after a server error or a dropped connection, never a write."""

from __future__ import annotations

import time

import pytest

from bot.domain.findings import Action
from bot.kube.connecting import connect
from bot.kube.transport import CallError, Transport
from tests.faults._support import (
    APISERVICES,
    BITING,
    DEADLINE,
    INTERNAL_ERROR,
    MARGIN,
    ROOMY,
    Cluster,
    Fault,
    assert_partial,
    offered,
    too_many_requests,
)

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

APISERVICES_GAP = "list apiservices (cluster-wide)"


def _complete(cluster: Cluster, **options: int) -> tuple[int, float]:
    """Diagnose and check the report is complete with the last resort offered; APIServices seen and seconds."""
    result, elapsed = cluster.diagnose(**options)
    diagnosis = result.diagnosis
    assert diagnosis.complete is True, [str(g) for g in diagnosis.gaps]
    assert Action.FORCE_FINALIZE_NAMESPACE in offered(diagnosis)
    return len(result.snapshot.apiservices), elapsed


def test_a_short_retry_after_is_waited_for_and_the_report_is_complete(cluster: Cluster) -> None:
    rule = cluster.emu.knobs.inject_fault(APISERVICES, 429, too_many_requests(1), {"Retry-After": "1"}, times=1)

    _, elapsed = _complete(cluster)

    assert rule.hits == 1
    assert cluster.requests(APISERVICES) == 2  # the 429, then the retry
    assert 1.0 <= elapsed < ROOMY  # it did wait the second the server asked for, and ended then


def test_a_retry_after_beyond_the_deadline_is_a_gap_at_once(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(APISERVICES, 429, too_many_requests(30), {"Retry-After": "30"})

    result, elapsed = cluster.diagnose()

    fault = Fault("429", lambda emu: None, APISERVICES_GAP, "unavailable", "not retried: a retry after 30s would not")
    assert_partial(result.diagnosis, fault)
    assert cluster.requests(APISERVICES) == 1
    assert elapsed < ROOMY  # nothing waited for a retry that could not be made


def test_a_429_that_keeps_coming_is_retried_a_bounded_number_of_times(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(APISERVICES, 429, too_many_requests(1), {"Retry-After": "1"})

    result, elapsed = cluster.diagnose(**BITING)

    assert_partial(result.diagnosis, Fault("429", lambda emu: None, APISERVICES_GAP, "unavailable", "not retried"))
    # a second apart while one more fits before the 3 s deadline: at 0, 1 and 2 s (at 0 and 1 s on a
    # machine so slow that the second came after 1.9 s); never the 1 + 3 retries of an unbounded wait
    assert cluster.requests(APISERVICES) in (2, 3)
    assert elapsed <= DEADLINE + MARGIN


def test_one_server_error_is_retried(cluster: Cluster) -> None:
    rule = cluster.emu.knobs.inject_fault(APISERVICES, 500, INTERNAL_ERROR, times=1)

    _complete(cluster)

    assert rule.hits == 1
    assert cluster.requests(APISERVICES) == 2


def test_a_server_error_that_stays_is_retried_once_and_is_a_gap(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(APISERVICES, 500, INTERNAL_ERROR)

    result, elapsed = cluster.diagnose()

    assert_partial(result.diagnosis, Fault("500", lambda emu: None, APISERVICES_GAP, "error", "leader changed"))
    assert cluster.requests(APISERVICES) == 2
    assert elapsed < ROOMY  # it did not retry until the deadline


def test_a_page_whose_connection_was_reset_once_is_asked_again(cluster: Cluster) -> None:
    full, _ = _complete(cluster, page_size=5)
    pages = cluster.requests(APISERVICES)
    assert full > 10
    assert pages == -(-full // 5)
    cluster.emu.journal.clear()
    rule = cluster.emu.knobs.inject_fault(APISERVICES, 200, reset_connection=True, query=r"(^|&)continue=", times=1)

    seen, _ = _complete(cluster, page_size=5)

    assert rule.hits == 1
    assert seen == full  # every page, none lost or repeated
    assert cluster.requests(APISERVICES) == pages + 1


def test_a_list_whose_second_page_always_fails_is_a_gap_not_a_short_list(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(APISERVICES, 200, reset_connection=True, query=r"(^|&)continue=")

    result, _ = cluster.diagnose(page_size=5)

    assert_partial(result.diagnosis, Fault("reset", lambda emu: None, APISERVICES_GAP, "error", "connection dropped"))
    assert result.snapshot.apiservices == ()  # the first page is not passed off as the whole list
    assert cluster.requests(APISERVICES) == 3  # page 1, page 2, page 2 once more


def test_writes_are_not_retried(cluster: Cluster) -> None:
    path = "/api/v1/namespaces/default/configmaps/settings"
    cluster.emu.knobs.inject_fault(rf"^PATCH {path}$", 200, reset_connection=True)
    cluster.emu.knobs.inject_fault(rf"^PUT {path}$", 500, INTERNAL_ERROR)
    connection = connect(cluster.target, pool_size=2)
    try:
        transport = Transport(connection, call_timeout=DEADLINE)
        with pytest.raises(CallError) as dropped:
            transport.call("PATCH", path, body={"data": {"a": "b"}}, content_type="application/merge-patch+json")
        assert dropped.value.dropped
        with pytest.raises(CallError) as failed:
            transport.call("PUT", path, body={"metadata": {"name": "settings"}})
        assert failed.value.status == 500
    finally:
        connection.close()
    assert cluster.requests(rf"^PATCH {path}$") == 1  # it may have been applied: never sent twice
    assert cluster.requests(rf"^PUT {path}$") == 1


def test_without_a_deadline_a_long_retry_after_is_not_waited_for(cluster: Cluster) -> None:
    cluster.emu.knobs.inject_fault(r"^GET /api/v1/nodes$", 429, too_many_requests(60), {"Retry-After": "60"})
    connection = connect(cluster.target, pool_size=2)
    try:
        started = time.monotonic()
        with pytest.raises(CallError) as throttled:
            Transport(connection, call_timeout=DEADLINE).get("/api/v1/nodes")
        assert time.monotonic() - started < 1.0
    finally:
        connection.close()
    assert throttled.value.status == 429
    assert "not retried: Retry-After 60s is longer than we wait" in throttled.value.message
    assert cluster.requests(r"^GET /api/v1/nodes$") == 1
