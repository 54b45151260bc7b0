"""Where each fabric's result stands against the validated runs, as ``step`` and ``advise``
print it: one line per distinct verdict, a warning when it is outside."""

from __future__ import annotations

from typing import Any


def validation_lines(results: list[dict[str, Any]]) -> list[str]:
    """Rich-markup lines, fabrics with the same verdict on one line (they usually share it:
    only the fabric family differs between them)."""
    by_summary: dict[str, list[str]] = {}
    inside: dict[str, bool] = {}
    for r in results:
        v = r.get("validation")
        if v is None:
            continue
        by_summary.setdefault(v["summary"], []).append(r["fabric"])
        inside[v["summary"]] = v["inside"]
    return [
        f"[dim]{', '.join(fabrics)}: {summary}[/]"
        if inside[summary]
        else f"[yellow]warning:[/] {', '.join(fabrics)}: {summary}"
        for summary, fabrics in by_summary.items()
    ]
