"""What every benchmark does at the end: print the verdict on each target, keep the figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Check = tuple[str, bool, str]  # (what was measured, target met?, the target)


def percentile(values: list[float], p: float) -> float:
    """The `p`th percentile of `values` (nearest rank, no interpolation: a value that was measured)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def finish(figures: dict[str, Any], checks: list[Check], json_path: Path | None) -> int:
    """Print PASS/MISS for each target, write the figures as JSON if asked; exit code 1 on any miss."""
    for text, ok, goal in checks:
        print(f"  {'PASS' if ok else 'MISS'}  {text} (target {goal})")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if all(ok for _, ok, _ in checks) else 1
