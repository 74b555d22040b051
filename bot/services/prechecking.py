"""What `precheck` answers of an Active namespace's prediction, the same at every door: the command line's exit
code (contract §1) and the MCP tool's verdict with that code."""

from __future__ import annotations

from bot.domain.findings import Prediction

CLEAR = 0  # nothing would hold the deletion
WOULD_BLOCK = 4  # deleting it now would get stuck
INCOMPLETE = 5  # the evidence is incomplete: it cannot be said that nothing would hold it


def verdict(prediction: Prediction) -> tuple[str, int]:
    """`would_block` (4) when a reason would hold it, else `incomplete` (5) when evidence is missing, else
    `clear` (0)."""
    if any(f.blocking for f in prediction.findings):
        return "would_block", WOULD_BLOCK
    if not prediction.complete:
        return "incomplete", INCOMPLETE
    return "clear", CLEAR
