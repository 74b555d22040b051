"""What the benchmarks read of the machine and of their processes from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[int, int]:
    """(busy, all) CPU time of the whole machine so far, in clock ticks."""
    ticks = cpu_ticks()
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def io_stalled_seconds() -> float | None:
    """How long every task of the machine was stalled on I/O so far (PSI "full"), if the kernel tells."""
    try:
        lines = Path("/proc/pressure/io").read_text().splitlines()
    except OSError:
        return None
    full = next((line for line in lines if line.startswith("full ")), "")
    return int(full.rpartition("total=")[2]) / 1e6 if "total=" in full else None


def stolen_share(before: list[int], after: list[int]) -> float:
    """The share of the machine's CPU time between two `cpu_ticks()` that its host took (steal): a
    benchmark run on a machine whose host takes much of its time measures the host, not the code."""
    spent = [b - a for a, b in zip(before, after, strict=True)]
    return spent[7] / sum(spent) if sum(spent) else 0.0


def cpu_ticks() -> list[int]:
    """The machine's CPU time so far by kind (user, nice, system, idle, iowait, irq, softirq, steal)."""
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (children, theirs, ...), found by their parent ids in /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    return [pid, *descendants(pid)]


def pss_mb(pid: int) -> float:
    """The proportional set size of a process: its share of the pages it shares with others (the fork
    server's pages with each worker) plus its own; summed over processes, the memory they take."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss for process {pid}")


def tree_memory_mb(pid: int) -> tuple[float, float, int]:
    """(RSS summed, PSS summed, how many processes) over `pid` and its descendants."""
    rss = pss = 0.0
    count = 0
    for member in tree(pid):
        try:
            rss += rss_mb(member)
            pss += pss_mb(member)
        except (OSError, RuntimeError):
            continue  # gone meanwhile
        count += 1
    return rss, pss, count


def tree_cpu_seconds(pid: int) -> float:
    """CPU time so far of `pid` and its descendants alive now."""
    total = 0.0
    for member in tree(pid):
        try:
            total += cpu_seconds(member)
        except (OSError, ValueError, IndexError):
            continue
    return total


def tree_rss_mb(pid: int) -> float:
    """RSS summed over `pid` and its descendants (pages they share are counted in each)."""
    total = 0.0
    for member in tree(pid):
        try:
            total += rss_mb(member)
        except (OSError, RuntimeError):
            continue
    return total
