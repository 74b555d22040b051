"""Reading the Dockerfile and .dockerignore as `docker build` does, for the tests (no Docker here)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    line: int
    name: str  # upper case
    args: str  # the rest, continuation lines joined


def instructions(dockerfile: Path) -> list[Instruction]:
    out: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(dockerfile.read_text(encoding="utf-8").splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        name, _, args = text.partition(" ")
        out.append(Instruction(start, name.upper(), args.strip()))
    return out


def copy_sources(dockerfile: Path) -> list[tuple[int, str]]:
    """(line, source) of every COPY/ADD from the build context (not `--from` another stage)."""
    found: list[tuple[int, str]] = []
    for ins in instructions(dockerfile):
        if ins.name not in ("COPY", "ADD"):
            continue
        words = shlex.split(ins.args)
        if any(w.startswith("--from") for w in words):
            continue
        paths = [w for w in words if not w.startswith("--")]
        found.extend((ins.line, source) for source in paths[:-1])
    return found


def _regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


class DockerIgnore:
    """The patterns of a .dockerignore: the last one matching a path or one of its parents decides."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = line[1:].strip() if negate else line
            pattern = pattern.strip("/") or "."
            self.rules.append((negate, _regex(pattern)))

    def excluded(self, path: str) -> bool:
        parts = path.strip("/").split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for negate, regex in self.rules:
            if any(regex.match(c) for c in candidates):
                excluded = not negate
        return excluded

    def context(self, root: Path) -> list[Path]:
        """Every file of `root` that the build context holds."""
        return sorted(p for p in root.rglob("*") if p.is_file() and not self.excluded(p.relative_to(root).as_posix()))
