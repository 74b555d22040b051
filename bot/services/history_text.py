"""`nsstuck history` for a terminal: a table of incidents (open first), then the summary. Pure."""

from __future__ import annotations

from bot.services.history import Count, History, IncidentEntry
from bot.services.reporting import human_seconds

HEADERS = ("STATUS", "CLUSTER/NAMESPACE", "CAUSE", "SINCE / RESOLVED IN", "RUNS")
NO_CAUSE = "-"


def age(entry: IncidentEntry, history: History) -> str:
    """How long it has been open, or how long it took to resolve."""
    if entry.is_open:
        seconds = entry.open_for_seconds(history.generated_at) or 0
        return f"{human_seconds(seconds)} (since {entry.started_at:%Y-%m-%d %H:%M}Z)"
    took = entry.time_to_resolution_seconds
    return f"resolved in {human_seconds(took)}" if took is not None else "resolved"


def counts(items: tuple[Count, ...], *, none: str = NO_CAUSE) -> str:
    return ", ".join(f"{item.name if item.name is not None else none} {item.count}" for item in items) or "none"


def scope(history: History) -> str:
    filters = history.filters
    where = _where(history)
    return f"{where}, cause {filters.cause}" if filters.cause else where


def _where(history: History) -> str:
    filters = history.filters
    if filters.cluster and filters.namespace:
        return f"{filters.cluster}/{filters.namespace}"
    if filters.cluster:
        return filters.cluster
    if filters.namespace:
        return f"namespace {filters.namespace} on every cluster"
    return "every cluster"


def render_text(history: History) -> str:
    """The table and the summary, ending with a newline."""
    lines: list[str] = []
    if history.incidents:
        rows = [
            (
                entry.status,
                f"{entry.cluster}/{entry.namespace}",
                entry.cause or NO_CAUSE,
                age(entry, history),
                str(entry.diagnoses),
            )
            for entry in history.incidents
        ]
        widths = [max(len(row[i]) for row in [HEADERS, *rows]) for i in range(len(HEADERS))]
        for row in [HEADERS, *rows]:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        shown = len(history.incidents)
        if shown >= history.filters.limit:
            lines.append(f"(the {shown} most recent)")
    else:
        what = "open incidents" if history.filters.open_only else "incidents"
        lines.append(f"No {what} for {scope(history)}.")
    summary = history.summary
    lines.append("")
    lines.append(f"Summary for {scope(history)}:")
    lines.append(f"  incidents:           {summary.incidents} ({summary.open} open, {summary.resolved} resolved)")
    median = summary.median_time_to_resolution_seconds
    lines.append(f"  median to resolve:   {human_seconds(median) if median is not None else 'nothing resolved yet'}")
    lines.append(f"  by cause:            {counts(summary.by_cause)}")
    lines.append(f"  by cluster:          {counts(summary.by_cluster)}")
    recurring = ", ".join(f"{r.cluster}/{r.namespace} ({r.incidents}x)" for r in summary.recurring)
    lines.append(f"  keep coming back:    {recurring or 'none'}")
    return "\n".join(lines) + "\n"
