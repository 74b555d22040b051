"""How long something took or lasted, in the words every report uses ("4d 3h", "12m", "45s"). Pure.

One formatter for the CLI, Slack and the evidence. Two units at most, the largest first; the places
that show it differ only in two choices, passed in:
- `keep_zero`: "2d 0h" (a column of ages reads evenly) or "2d" (a sentence of evidence);
- `seconds_below_minutes`: under that many minutes the seconds are shown too ("5m 30s"), for a
  terminal report where the first minutes of a deletion matter; 0 never shows them next to minutes.
"""

from __future__ import annotations


def human_seconds(seconds: int, *, keep_zero: bool = True, seconds_below_minutes: int = 0) -> str:
    days, rest = divmod(max(0, seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours or keep_zero else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes or keep_zero else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs and minutes < seconds_below_minutes else f"{minutes}m"
    return f"{secs}s"
