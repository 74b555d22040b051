"""The scan's shortcut: in a terminating namespace, list only the types its controller names.

Each scenario of the emulator's library is collected twice from the same cluster, once listing every
type and once with `contents_from_conditions`; the rules must reach the same diagnosis from both, and
the shortcut must list fewer types exactly where the conditions can be trusted. `remaining_types`
is checked against every condition that must make it fall back to the full listing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis.engine import diagnose
from bot.domain.findings import Action, Diagnosis
from bot.kube.collecting import CollectOptions, Collector, remaining_types
from bot.kube.connecting import ClusterTarget, connect
from bot.kube.transport import Transport
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import SCENARIOS, apply_scenario_once

# Generous bounds: this is not about timing, and a call that timed out under load in one collection but
# not the other made the two differ (a CI flake). The call timeout stays under the 10 s the scenario
# incomplete-timeout-group hangs its group for, so that group is still a gap both ways.
FULL = CollectOptions(deadline=60, call_timeout=8)
SHORT = CollectOptions(deadline=60, call_timeout=8, contents_from_conditions=True)


def _namespaced_lists(log: list[str], namespace: str) -> set[str]:
    """The types listed inside `namespace` (`GET .../namespaces/<ns>/<resource>` without a name), less the
    Events: every collection reads them as evidence, whatever types it lists as content."""
    out = set()
    for line in log:
        method, _, rest = line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        parts = [p for p in path.split("/") if p]
        if method == "GET" and "namespaces" in parts:
            i = parts.index("namespaces")
            if parts[i + 1 : i + 2] == [namespace] and len(parts) == i + 3 and parts[i + 2] != "events":
                out.add("/".join(parts[:i]) + "/" + parts[i + 2])
    return out


def _collect(
    emu: Emulator, kubeconfig: Path, namespace: str, options: CollectOptions
) -> tuple[Diagnosis, set[str], dict[str, Any] | None]:
    connection = connect(ClusterTarget(name="emulated", kubeconfig=kubeconfig), pool_size=options.workers)
    try:
        emu.journal.clear()
        collector = Collector(Transport(connection), cluster="emulated", options=options, clock=emu.clock.now)
        snapshot = collector.collect_many([namespace])[namespace]
        lists = _namespaced_lists(emu.journal.lines(), namespace)
        return diagnose(snapshot), lists, snapshot.namespace_object
    finally:
        connection.close()


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    scenario = SCENARIOS[request.param]
    emu = Emulator(clock=FakeClock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), seed=0)
    emu.start()
    try:
        apply_scenario_once(emu, scenario.name)  # built once per process
        kubeconfig = emu.write_kubeconfig(tmp_path_factory.mktemp(request.param) / "kubeconfig")
        namespace = scenario.expected.namespace
        full, full_lists, ns_object = _collect(emu, kubeconfig, namespace, FULL)
        short, short_lists, _ = _collect(emu, kubeconfig, namespace, SHORT)
        return {
            "name": scenario.name,
            "full": full,
            "short": short,
            "full_lists": full_lists,
            "short_lists": short_lists,
            "trusted": remaining_types(ns_object),
        }
    finally:
        emu.stop()


def test_same_diagnosis_either_way(both: dict[str, Any]) -> None:
    full, short = both["full"], both["short"]
    why = f"gaps listing every type: {_gaps(full)}; listing the types the conditions name: {_gaps(short)}"
    assert short.state == full.state, why
    assert _without_force_finalize(short) == _without_force_finalize(full), why
    if short.findings != full.findings:  # force-finalize offered on evidence complete by the controller's count
        assert short.complete, why
        assert not full.complete, why
    # the gaps are the same, but for lists of types the controller reports empty (the shortcut does
    # not make them: a type we may not list cannot hide objects the controller says are gone)
    assert set(short.gaps) <= set(full.gaps), why
    for gap in set(full.gaps) - set(short.gaps):
        assert both["trusted"] is not None, gap
        assert gap.what.startswith("list "), gap
        key = gap.what.split()[1]
        assert (key if "." in key else f"{key}.") not in both["trusted"], gap


def _gaps(diagnosis: Diagnosis) -> list[str]:
    return [f"{gap.what} ({gap.reason})" for gap in diagnosis.gaps] or ["none"]


def _without_force_finalize(diagnosis: Diagnosis) -> list[Any]:
    return [
        replace(f, remedies=tuple(r for r in f.remedies if r.action is not Action.FORCE_FINALIZE_NAMESPACE))
        for f in diagnosis.findings
    ]


def test_lists_fewer_types_only_where_the_conditions_are_trusted(both: dict[str, Any]) -> None:
    if both["trusted"] is None:
        assert both["short_lists"] == both["full_lists"]
        return
    assert both["short_lists"] < both["full_lists"]
    listed = {path.rsplit("/", 1)[1] + "." + _group_of(path) for path in both["short_lists"]}
    assert listed <= both["trusted"]


def test_the_library_has_both_kinds() -> None:
    """The comparison above means something only if some scenarios take the shortcut and some do not."""
    trusted = []
    for name in sorted(SCENARIOS):
        conds = SCENARIOS[name].expected.conditions
        if conds:
            trusted.append(remaining_types(_terminating({"conditions": [_cond(*c) for c in conds]})) is not None)
    assert any(trusted)
    assert not all(trusted)


def _group_of(path: str) -> str:
    parts = path.split("/")
    return "" if parts[0] == "api" else parts[1]


def _cond(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def _terminating(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "team-a", "deletionTimestamp": "2026-11-20T08:00:00Z"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", **status},
    }


OK = {
    "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "False",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "False",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
}
PREFIX = "Some resources are remaining: "
REMAINING = PREFIX + "backups.stash.example.com has 2 resource instances, configmaps. has 1 resource instances"


def _with(**changes: tuple[str, str, str] | None) -> dict[str, Any]:
    conds = dict(OK)
    conds["NamespaceContentRemaining"] = ("True", "SomeResourcesRemain", REMAINING)
    for key, value in changes.items():
        if value is None:
            conds.pop(key, None)
        else:
            conds[key] = value
    return _terminating({"conditions": [_cond(k, *v) for k, v in conds.items()]})


def test_trusted_conditions_name_the_types() -> None:
    assert remaining_types(_with()) == {"backups.stash.example.com", "configmaps."}


@pytest.mark.parametrize(
    ("why", "namespace"),
    [
        ("no conditions (before 1.17, or no controller)", _terminating({})),
        ("not terminating", {**_with(), "metadata": {"name": "team-a"}}),
        (
            "discovery failed in the last pass",
            _with(NamespaceDeletionDiscoveryFailure=("True", "DiscoveryFailed", "Discovery failed for some groups")),
        ),
        ("a failure condition is missing", _with(NamespaceDeletionGroupVersionParsingFailure=None)),
        (
            "deleting failed (a webhook): the failing types are not counted",
            _with(NamespaceDeletionContentFailure=("True", "ContentDeletionFailed", "Failed to delete all")),
        ),
        (
            "pods remain (ordered deletion counts nothing else)",
            _with(
                NamespaceContentRemaining=(
                    "True",
                    "SomeResourcesRemain",
                    PREFIX + "configmaps. has 1 resource instances, pods. has 2 resource instances",
                )
            ),
        ),
        (
            "all removed, yet stuck (ordered deletion misreports pods so)",
            _with(NamespaceContentRemaining=("False", "ContentRemoved", "All content successfully removed")),
        ),
        (
            "a message we cannot read in full",
            _with(
                NamespaceContentRemaining=(
                    "True",
                    "SomeResourcesRemain",
                    PREFIX + "configmaps. has 1 resource instances, and more",
                )
            ),
        ),
        ("no ContentRemaining condition", _with(NamespaceContentRemaining=None)),
    ],
)
def test_falls_back_to_the_full_listing(why: str, namespace: dict[str, Any]) -> None:
    assert remaining_types(namespace) is None, why
