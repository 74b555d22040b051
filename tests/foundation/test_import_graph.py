"""No import cycle among the modules of `bot`, TYPE_CHECKING imports included (issue 17): two modules
that import each other are one room with two doors. Checked over grimp's import graph (the one
import-linter builds), on the tree and on a copy with a cycle made on purpose."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def cycles(package: str) -> list[list[str]]:
    """Every strongly connected group of two or more modules of `package` (Tarjan), sorted."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative: the graph is deep enough for recursion to be a worry on small stacks
        work = [(start, iter(edges.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


def test_bot_has_no_import_cycle() -> None:
    assert cycles("bot") == []


def test_a_cycle_through_type_checking_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "bot"
    shutil.copytree(REPO / "bot", copy, ignore=shutil.ignore_patterns("__pycache__"))
    # bot.services.outbox is imported by bot.services.answering; the reverse, even only for types, is a cycle
    outbox = copy / "services" / "outbox.py"
    outbox.write_text(
        outbox.read_text().replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
            "if TYPE_CHECKING:\n    from bot.services.answering import Answering\n",
            1,
        )
    )
    probe = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "from tests.foundation.test_import_graph import cycles; print(cycles('bot'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path), str(REPO)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "bot.services.answering" in done.stdout, done.stdout
    assert "bot.services.outbox" in done.stdout, done.stdout
