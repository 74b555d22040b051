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
- Order: the timing group first, then the longest first (by tests/durations.json), so that the parallel
  run does not end waiting for one long test that was handed out last; scripts/check keeps it
  (`--no-loadscope-reorder`). `NSSTUCK_RECORD_DURATIONS=1 make test` records the file again.
- Priority: the process that runs the timing group (handed out first, so it starts with it) keeps its
  scheduling priority; every other process lowers its own (`os.nice`) before its first test, and the bots
  and commands it starts inherit that. On two cores shared by six processes and their bots, a deadline
  measured in the timing group is then measured on the CPU share a real deployment has, not a quarter of
  it, and the group (the longest unit) ends sooner.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
SLOW_SECONDS = 2.0
TIMING_GROUP = "timing"
OTHERS_NICE = 5  # a weight of 335 against 1,024 at nice 0 (the kernel's CFS table)
# the chart (helm, promtool, hadolint), the demo and the benchmarks' own test
SLOW_FOLDERS = {"chart", "demo", "bench"}

# what in a module's source says it needs a tool or waits in real time
_KUBECTL = re.compile(r"\bKUBECTL\b|\bkubectl\(|kubectl_available\(")
_SLOW = re.compile(
    r"\brunning_bot\(|\bserve_process\(|\bremediation_bot\(|\bhelm\b|\bpromtool\b|\bhadolint\b|\bZSH\b"
    r"|scripts/demo\.py|\bbench\."
    # the module's shared bot (tests/approvals/_shared.py): a fixture, not a call
    r"|\bflow: Flow\b|\blane: Callable\["
)


@functools.cache
def _recorded() -> dict[str, float]:
    """tests/durations.json, read once per process (the markers, the order and the recorder all ask)."""
    try:
        loaded = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


_GROUP_SUFFIX = re.compile(r"@(timing|tests/[^@\[\]]*)$")  # what xdist appends to a grouped test's id
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
    config.pluginmanager.register(Order(), "nsstuck-order")
    config.pluginmanager.register(CpuMeter(), "nsstuck-cpu")
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(Priority(), "nsstuck-priority")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(), "nsstuck-durations")


def _shared_state_group(item: pytest.Item) -> str | None:
    """The group of a test that uses a fixture of ours living longer than a test (module, package or
    session scope), else None. Such tests go to one process, in their order, so that the fixture is built
    once there and what one test leaves for the next (tests/hostile/test_payloads.py) is there: one group
    per module, or per module and value of such a fixture where it is parametrized (one scenario's
    fixture, tests/diagnosis/test_scenarios.py), so that the values are still spread over the processes."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    shared = [
        name
        for name, definitions in info.name2fixturedefs.items()
        if definitions[-1].scope != "function" and getattr(definitions[-1].func, "__module__", "").startswith("tests.")
    ]
    if not shared:
        return None
    module = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    indices = [f"{name}={callspec.indices[name]}" for name in sorted(shared) if callspec and name in callspec.indices]
    return f"{module}#{','.join(indices)}" if indices else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The markers, first: `-m` deselects by them and xdist reads the groups after this."""
    durations = _recorded()
    for item in items:
        path = Path(str(item.path))
        kubectl, slow = _needs(path)
        if kubectl:
            item.add_marker(pytest.mark.kubectl)
        if slow or path.parent.name in SLOW_FOLDERS or durations.get(item.nodeid, 0.0) >= SLOW_SECONDS:
            item.add_marker(pytest.mark.slow)
        group = TIMING_GROUP if item.get_closest_marker("timing") is not None else _shared_state_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


class Order:
    """The order, last (after pytest's own, which groups the tests of a parametrized fixture): the
    longest unit first, a group being one unit that weighs what all its tests weigh, each group's
    tests in their own order; a test never recorded counts as a second."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        durations = _recorded()

        def unit(item: pytest.Item) -> str:
            marker = item.get_closest_marker("xdist_group")
            return str(marker.args[0]) if marker is not None and marker.args else item.nodeid

        def seconds(item: pytest.Item) -> float:
            return durations.get(_GROUP_SUFFIX.sub("", item.nodeid), 1.0)

        weight: dict[str, float] = {}
        first_index: dict[str, int] = {}
        for index, item in enumerate(items):
            weight[unit(item)] = weight.get(unit(item), 0.0) + seconds(item)
            first_index.setdefault(unit(item), index)
        items.sort(key=lambda item: (unit(item) != TIMING_GROUP, -weight[unit(item)], first_index[unit(item)]))


class Priority:
    """In an xdist worker: a lower scheduling priority (nice +OTHERS_NICE) from the first test that is not
    `timing`, unless the worker ran a timing test before (module docstring). A process may lower its own
    priority but never raise it again, so the timing group is handed out first."""

    def __init__(self) -> None:
        self.timing = False
        self.lowered = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.get_closest_marker("timing") is not None:
            self.timing = True
        elif not self.timing and not self.lowered:
            os.nice(OTHERS_NICE)
            self.lowered = True


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
        recorded = dict(_recorded())
        recorded.update({k: round(v, 2) for k, v in self.seconds.items()})
        DURATIONS.write_text(json.dumps(dict(sorted(recorded.items())), indent=0) + "\n")


def _cpu_seconds() -> float:
    """CPU time of this process (every thread: the emulators, the command line run in it) and of the
    child processes it has waited for (the bots, the commands run as processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuMeter:
    """The CPU each test cost, from its setup to the end of its teardown (a module's shared fixture is
    charged to its first test), summed by folder and module at the end of the run: on two cores the suite
    is bound by CPU, so this, not the wall time of --durations, says where its time goes. In a worker it
    is measured and sent with the teardown's report; the controlling process prints it."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.by_module: dict[str, float] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.started[item.nodeid] = _cpu_seconds()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
        started = self.started.pop(item.nodeid, None) if call.when == "teardown" else None
        if started is not None:
            report.user_properties.append(("cpu_seconds", _cpu_seconds() - started))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == "cpu_seconds" and isinstance(value, int | float):
                module = report.nodeid.split("::", 1)[0]
                self.by_module[module] = self.by_module.get(module, 0.0) + float(value)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.by_module or hasattr(terminalreporter.config, "workerinput"):
            return
        total = sum(self.by_module.values())
        by_folder: dict[str, float] = {}
        for module, seconds in self.by_module.items():
            folder = module.rsplit("/", 1)[0]
            by_folder[folder] = by_folder.get(folder, 0.0) + seconds
        write = terminalreporter.write_line
        terminalreporter.section("CPU of the tests (this process and the processes it waited for)")
        write(f"{total:,.0f} CPU-seconds in all; by folder:")
        for folder, seconds in sorted(by_folder.items(), key=lambda kv: -kv[1])[:12]:
            write(f"  {seconds:8.1f} s  {100 * seconds / total:4.1f}%  {folder}")
        write("the costliest modules:")
        for module, seconds in sorted(self.by_module.items(), key=lambda kv: -kv[1])[:25]:
            write(f"  {seconds:8.1f} s  {module}")
