"""How the suite is split and ordered across its parallel processes (pytest-xdist), and what the fast
tier leaves out. A pytest plugin, loaded by tests/conftest.py.

- `timing`: a test whose assertion is about time (a call that must end within its deadline plus a
  margin, an acknowledgement within 3 s while the bot is loaded on purpose, a wait that must not
  happen). All of them go to one xdist group, so no two ever run at the same time
  (`--dist loadgroup`; scripts/check).
- `kubectl` and `slow` are set here from what a module does, so the fast tier (`make test-fast`,
  `-m "not postgres and not kubectl and not slow"`) needs no tool and waits on no real deadline:
  a module that runs the kubectl binary is `kubectl`; one that starts the bot as a process, runs helm,
  promtool, hadolint or a shell, and a test that took 2 s or more in the recorded run
  (tests/durations.json), is `slow`.
- A module whose tests share a fixture that outlives a test goes to one process whole, in its order.
- Order: the longest first (by tests/durations.json), so that the parallel run does not end waiting
  for one long test that was handed out last; scripts/check keeps it (`--no-loadscope-reorder`).
  `NSSTUCK_RECORD_DURATIONS=1 make test` records the file again.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
SLOW_SECONDS = 2.0
# the chart (helm, promtool, hadolint), the demo and the benchmarks' own test
SLOW_FOLDERS = {"chart", "demo", "bench"}

# what in a module's source says it needs a tool or waits in real time
_KUBECTL = re.compile(r"\bKUBECTL\b|\bkubectl\(|kubectl_available\(")
_SLOW = re.compile(
    r"\brunning_bot\(|\bserve_process\(|\bremediation_bot\(|\bhelm\b|\bpromtool\b|\bhadolint\b|\bZSH\b"
    r"|scripts/demo\.py|\bbench\."
)


def _recorded() -> dict[str, float]:
    try:
        loaded = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


_GROUP_SUFFIX = re.compile(r"@(timing|tests/[^@\[\]]*)$")
_needs_cache: dict[Path, tuple[bool, bool]] = {}


def _needs(path: Path) -> tuple[bool, bool]:
    """(runs kubectl, is slow) of a module, from its source, once per module."""
    if path not in _needs_cache:
        try:
            source = path.read_text()
        except OSError:
            source = ""
        _needs_cache[path] = (bool(_KUBECTL.search(source)), bool(_SLOW.search(source)))
    return _needs_cache[path]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "timing: asserts how long something takes; never runs beside another such test")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(), "nsstuck-durations")


def _shares_state_across_tests(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of ours that lives longer than a test (module, package or session
    scope): such a module's tests go to one process, in their order, so the fixture is built once and
    what one test leaves for the next (tests/hostile/test_payloads.py) is there."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for definitions in info.name2fixturedefs.values():
        definition = definitions[-1]
        if definition.scope != "function" and getattr(definition.func, "__module__", "").startswith("tests."):
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    durations = _recorded()
    unit_of: dict[str, str] = {}
    for item in items:
        path = Path(str(item.path))
        kubectl, slow = _needs(path)
        if kubectl:
            item.add_marker(pytest.mark.kubectl)
        if slow or path.parent.name in SLOW_FOLDERS or durations.get(item.nodeid, 0.0) >= SLOW_SECONDS:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("timing") is not None:
            group = "timing"
        elif _shares_state_across_tests(item):
            group = item.nodeid.split("::", 1)[0]
        else:
            unit_of[item.nodeid] = item.nodeid
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        unit_of[item.nodeid] = group
    # the longest unit first (a group is handed out whole, so it weighs what all its tests weigh), each
    # group's tests in their own order; a test never recorded counts as a second
    weight: dict[str, float] = {}
    for item in items:
        unit = unit_of[item.nodeid]
        weight[unit] = weight.get(unit, 0.0) + durations.get(item.nodeid, 1.0)
    first_index = {}
    for index, item in enumerate(items):
        first_index.setdefault(unit_of[item.nodeid], index)
    items.sort(key=lambda item: (-weight[unit_of[item.nodeid]], first_index[unit_of[item.nodeid]]))


class DurationRecorder:
    """With NSSTUCK_RECORD_DURATIONS=1, writes every test's setup + call + teardown time to
    tests/durations.json at the end of the run (in the controlling process, which hears every worker)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = _GROUP_SUFFIX.sub("", report.nodeid)  # xdist's loadgroup appends "@group" to a grouped test's id
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if os.environ.get("NSSTUCK_RECORD_DURATIONS") != "1" or hasattr(session.config, "workerinput"):
            return
        recorded = _recorded()
        recorded.update({k: round(v, 2) for k, v in self.seconds.items()})
        DURATIONS.write_text(json.dumps(dict(sorted(recorded.items())), indent=0) + "\n")
