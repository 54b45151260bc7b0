"""Where each fabric's result stands against the validated runs, as ``step`` and ``advise``
print it: one line per distinct verdict, a warning when it is outside."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabricplan.workload import FabricResult


def validation_lines(results: Sequence[FabricResult]) -> list[str]:
    """Rich-markup lines, fabrics with the same verdict on one line (they usually share it:
    only the fabric family differs between them)."""
    by_summary: dict[str, list[str]] = {}
    inside: dict[str, bool] = {}
    for r in results:
        v = r.validation
        if v is None:
            continue
        summary = v.summary()
        by_summary.setdefault(summary, []).append(r.fabric)
        inside[summary] = v.inside
    return [
        f"[dim]{', '.join(fabrics)}: {summary}[/]"
        if inside[summary]
        else f"[yellow]warning:[/] {', '.join(fabrics)}: {summary}"
        for summary, fabrics in by_summary.items()
    ]


def show_envelope(as_json: bool) -> None:
    """``validate --suite envelope``: what the runs span on each GPU, and the errors on them."""
    from rich.table import Table

    from fabricplan.cli.output import console, emit_json, print_table
    from fabricplan.validation.envelope import CHOICES, SPANS, envelopes, shown

    envs = list(envelopes().values())
    if as_json:
        emit_json([e.to_dict() for e in envs])
        return
    t = Table(
        title="The validated envelope: what the published training runs span on each GPU",
        title_justify="left",
        title_style="bold",
    )
    t.add_column("")
    for e in envs:
        t.add_column(e.name, justify="right")
    t.add_row("runs", *(f"{len(e.runs)}" for e in envs))
    for dim, label in SPANS:
        t.add_row(label, *(e.span_text(dim) for e in envs))
    for dim, label in CHOICES:
        t.add_row(label, *(", ".join(shown(dim, v) for v in e.choices(dim)) for e in envs))
    errors = [e.to_dict()["errors"] for e in envs]
    t.add_row("median |error|", *(f"{100 * x['median_abs']:.1f} %" for x in errors))
    t.add_row("worst |error|", *(f"{100 * x['worst_abs']:.1f} %" for x in errors))
    print_table(t)
    console.print(
        "A step or advise result is inside when its GPU is one of these and every dimension "
        "lies within its GPU's column; errors are those recorded for the model on the runs "
        "(python -m fabricplan.validation.record_errors).",
        highlight=False,
    )
