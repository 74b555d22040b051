"""`Collector.collect_many` gives each namespace the snapshot `collect` gives it, with fewer requests.

Every scenario of the emulator's library is collected both ways, for every namespace of its cluster
(Active, terminating, and one that does not exist), and the snapshots are compared as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.errors import ClusterUnreachableError
from bot.kube.collecting import CollectOptions, Collector, list_namespaces
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import Transport
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, Api, app, apply_scenario_once, base_cluster, run_for

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
OPTIONS = CollectOptions(deadline=20, call_timeout=5)
# the scenario with a hanging group waits out its call timeout: keep that short (it only has to be the
# same), under the scenario's 10 s and with room for a loaded machine (1.5 s was not: a call of another
# scenario timed out in one of the two collections beside a parallel run)
SCENARIO_OPTIONS = CollectOptions(deadline=20, call_timeout=4)


class Cluster:
    """A started emulator and a transport to it for the user identity."""

    def __init__(self, emu: Emulator, tmp_path: Path) -> None:
        self.emu = emu
        self.target = ClusterTarget(name="emulated", kubeconfig=emu.write_kubeconfig(tmp_path / "kubeconfig"))
        self.connection = connect(self.target)
        self.transport = Transport(self.connection, call_timeout=OPTIONS.call_timeout)

    def collector(self, options: CollectOptions = OPTIONS) -> Collector:
        return Collector(self.transport, cluster="emulated", options=options, clock=self.emu.clock.now)

    def requests(self) -> list[str]:
        return self.emu.journal.lines()

    def close(self) -> None:
        self.connection.close()
        self.emu.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    emu = Emulator(clock=FakeClock(START), seed=0).start()
    c = Cluster(emu, tmp_path)
    try:
        yield c
    finally:
        c.close()


def _json(snapshot: Any) -> str:
    # nothing in a snapshot is timing apart from observed_at, which both take from the same FakeClock
    return json.dumps(snapshot.to_json(), sort_keys=True)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_snapshots_as_collect_and_fewer_requests(name: str, tmp_path: Path) -> None:
    emu = Emulator(clock=FakeClock(START), seed=0).start()
    c = Cluster(emu, tmp_path)
    try:
        apply_scenario_once(emu, name)  # built once per process (a restored state reads as the build)
        _more_stuck_namespaces(emu)
        listed = list_namespaces(c.transport)
        namespaces = sorted(str(n["metadata"]["name"]) for n in listed)
        namespaces += [SCENARIOS[name].expected.namespace, "no-such-namespace"]
        terminating = [str(n["metadata"]["name"]) for n in listed if n["metadata"].get("deletionTimestamp")]

        emu.journal.clear()
        # each namespace once (the scenario's own is listed twice, for collect_many to take it once)
        one_by_one = {ns: c.collector(SCENARIO_OPTIONS).collect(ns) for ns in dict.fromkeys(namespaces)}
        requests_one_by_one = len(emu.journal.entries())
        emu.journal.clear()
        together = c.collector(SCENARIO_OPTIONS).collect_many(namespaces)
        requests_together = len(emu.journal.entries())
    finally:
        c.close()

    assert list(together) == list(dict.fromkeys(namespaces))
    for ns in namespaces:
        assert _json(together[ns]) == _json(one_by_one[ns]), ns
    assert len(terminating) >= 2, terminating
    assert requests_together < requests_one_by_one


def _more_stuck_namespaces(emu: Emulator) -> None:
    """Two more terminating namespaces beside the scenario's own (each scenario has one), so that every
    scenario's cluster-wide trouble (failing discovery, webhooks, lost nodes) meets several namespaces."""
    api = Api(emu)
    for ns in ("extra-held", "extra-pods"):
        api.namespace(ns)
    api.configmap("extra-held", "settings", finalizers=["example.com/cleanup"])
    app(api, "extra-pods", "worker", node="node-1", replicas=1)
    emu.settle()
    for ns in ("extra-held", "extra-pods"):
        api.delete_namespace(ns)
    emu.settle()  # the clock stands still: the scenario's own state is left as it was


def _stuck_with_configmap(api: Api, ns: str) -> None:
    api.namespace(ns)
    api.configmap(ns, "settings", finalizers=["example.com/cleanup"])
    api.delete_namespace(ns)


def test_five_stuck_namespaces_cost_far_fewer_requests(cluster: Cluster) -> None:
    api = Api(cluster.emu)
    base_cluster(api)
    names = [f"team-{i}" for i in range(5)]
    for ns in names:
        _stuck_with_configmap(api, ns)
    run_for(cluster.emu, 60, step=30)

    cluster.emu.journal.clear()
    one_by_one = {ns: cluster.collector().collect(ns) for ns in names}
    requests_one_by_one = cluster.requests()
    cluster.emu.journal.clear()
    together = cluster.collector().collect_many(names)
    requests_together = cluster.requests()

    for ns in names:
        assert _json(together[ns]) == _json(one_by_one[ns])
        assert [o["metadata"]["name"] for o in together[ns].objects("configmaps")] == ["settings"]
        assert together[ns].complete
    # the cluster-scoped calls once instead of five times; the namespaced lists five times either way
    cluster_scoped = [r for r in requests_together if "/namespaces/team-" not in r]
    assert len(cluster_scoped) == len(set(cluster_scoped))
    namespaced = sorted(r for r in requests_together if "/namespaces/team-" in r)
    assert namespaced == sorted(r for r in requests_one_by_one if "/namespaces/team-" in r)
    assert len(requests_together) == len(requests_one_by_one) - 4 * len(cluster_scoped)


def test_a_node_is_read_once_for_every_namespace_with_pods_on_it(cluster: Cluster) -> None:
    emu = cluster.emu
    api = Api(emu)
    base_cluster(api, nodes=3)
    run_for(emu, 10)
    for ns in ("batch-a", "batch-b"):
        api.namespace(ns)
        app(api, ns, "worker", node="node-3", replicas=1)
    run_for(emu, 30)
    api.node_lost("node-3")
    run_for(emu, 40, step=30)
    for ns in ("batch-a", "batch-b"):
        api.delete_namespace(ns)
    run_for(emu, 90, step=30)

    one_by_one = {ns: cluster.collector().collect(ns) for ns in ("batch-a", "batch-b")}
    emu.journal.clear()
    together = cluster.collector().collect_many(["batch-a", "batch-b"])

    assert cluster.requests().count("GET /api/v1/nodes/node-3") == 1
    for ns in ("batch-a", "batch-b"):
        assert "node-3" in together[ns].nodes
        assert _json(together[ns]) == _json(one_by_one[ns])


def test_a_failed_read_of_one_namespace(cluster: Cluster) -> None:
    api = Api(cluster.emu)
    base_cluster(api)
    for ns in ("good", "flaky"):
        _stuck_with_configmap(api, ns)
    run_for(cluster.emu, 60, step=30)
    cluster.emu.knobs.inject_fault(r"^GET /api/v1/namespaces/flaky$", 500)
    # and so is the list of namespaces, where its read is made once more (by its name)
    cluster.emu.knobs.inject_fault(r"^GET /api/v1/namespaces$", 500, query=r"metadata\.name%3Dflaky")

    outcomes = cluster.collector().collect_each(["good", "flaky", "absent"])

    assert list(outcomes) == ["good", "flaky", "absent"]
    flaky = outcomes["flaky"]
    assert isinstance(flaky, ClusterUnreachableError)
    with pytest.raises(ClusterUnreachableError) as single:
        cluster.collector().collect("flaky")
    assert str(flaky) == str(single.value)
    good = outcomes["good"]
    assert not isinstance(good, ClusterUnreachableError)
    assert good.objects("configmaps")
    assert good.complete
    absent = outcomes["absent"]
    assert not isinstance(absent, ClusterUnreachableError)
    assert not absent.exists
    # collect_many raises as collect() would
    with pytest.raises(ClusterUnreachableError, match="unreachable"):
        cluster.collector().collect_many(["good", "flaky"])


def test_a_late_namespaced_list_is_a_gap_in_that_namespace_only(cluster: Cluster) -> None:
    api = Api(cluster.emu)
    base_cluster(api)
    for ns in ("slow", "fast"):
        _stuck_with_configmap(api, ns)
    run_for(cluster.emu, 60, step=30)
    cluster.emu.knobs.latency(12_000, match=r"^GET /api/v1/namespaces/slow/configmaps$")

    # a deadline far past what the rest takes (0.1 s here, over 3 s seen on a machine with half its CPU
    # stolen), far before the slow list ends
    together = cluster.collector(CollectOptions(deadline=6, call_timeout=10)).collect_many(["slow", "fast"])

    assert [(g.what, g.reason) for g in together["slow"].gaps] == [("list configmaps in slow", "timeout")]
    assert together["fast"].complete
    assert together["fast"].objects("configmaps")


def test_only_active_namespaces_need_no_cluster_wide_calls(cluster: Cluster) -> None:
    """As a scan collects (`predict` off: it diagnoses terminating namespaces only, issue 27)."""
    cluster.emu.journal.clear()
    together = cluster.collector(replace(OPTIONS, predict=False)).collect_many(["default", "kube-system", "default"])
    assert list(together) == ["default", "kube-system"]
    assert sorted(cluster.requests()) == ["GET /api/v1/namespaces/default", "GET /api/v1/namespaces/kube-system"]
    assert cluster.collector().collect_many([]) == {}


# -- list_namespaces ---------------------------------------------------------------------------------


def test_list_namespaces_is_one_call_trimmed(cluster: Cluster) -> None:
    api = Api(cluster.emu)
    _stuck_with_configmap(api, "going")
    cluster.emu.settle()
    cluster.emu.journal.clear()

    listed = {n["metadata"]["name"]: n for n in list_namespaces(cluster.transport)}

    assert cluster.requests() == ["GET /api/v1/namespaces"]
    going = listed["going"]
    assert set(going["metadata"]) <= {"name", "uid", "deletionTimestamp", "finalizers"}
    assert going["metadata"]["deletionTimestamp"] == "2026-11-20T08:00:00Z"
    assert going["status"] == {"phase": "Terminating"}
    assert listed["default"]["status"] == {"phase": "Active"}
    assert "deletionTimestamp" not in listed["default"]["metadata"]
    assert set(going) == {"apiVersion", "kind", "metadata", "status"}


class _PagingTransport:
    """A server that pages a list although nobody asked it to."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str] | None] = []
        self.connection = type("C", (), {"host": "https://paging", "target": ClusterTarget(name="paging")})()

    def get(
        self, path: str, query: dict[str, str] | None = None, *, timeout: float | None = None, kind: str | None = None
    ) -> Any:
        assert kind == "NamespaceList"  # the answer is judged as the list it must be
        self.calls.append(query)
        page = len(self.calls)
        items = [{"metadata": {"name": f"ns-{page}-{i}", "uid": f"u{page}{i}", "labels": {"x": "y"}}} for i in range(2)]
        return {"kind": "NamespaceList", "metadata": {"continue": "next"} if page < 3 else {}, "items": items}


def test_list_namespaces_follows_continue() -> None:
    transport = _PagingTransport()
    listed = list_namespaces(transport)  # type: ignore[arg-type]
    assert transport.calls == [None, {"limit": "500", "continue": "next"}, {"limit": "500", "continue": "next"}]
    assert len(listed) == 6
    assert listed[0]["metadata"] == {"name": "ns-1-0", "uid": "u10"}


def test_list_namespaces_raises_as_the_namespace_read_does(cluster: Cluster, tmp_path: Path) -> None:
    cluster.emu.knobs.expired_tokens.add(cluster.emu.user_token)
    with pytest.raises(ClusterUnreachableError, match="refuses our credentials: Unauthorized"):
        list_namespaces(cluster.transport)
    with pytest.raises(ClusterUnreachableError, match="refuses our credentials: Unauthorized"):
        cluster.collector().collect("default")
    cluster.emu.knobs.expired_tokens.clear()

    down = tmp_path / "down"
    down.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: d, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: d, user: {token: sekrit-token}}]\ncontexts: [{name: d, context: {cluster: d, user: d}}]\n"
        "current-context: d\n"
    )
    connection = connect(ClusterTarget(name="down", kubeconfig=down))
    try:
        with pytest.raises(ClusterUnreachableError, match=r"'down' .* is unreachable: cannot connect") as e:
            list_namespaces(Transport(connection), timeout=2)
        assert "sekrit" not in str(e.value)
    finally:
        connection.close()
