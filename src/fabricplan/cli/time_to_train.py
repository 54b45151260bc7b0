"""Time to train per fabric as the step and advise tables print it: ideal beside expected."""

from __future__ import annotations

from typing import Any

from rich.table import Table

# Ideal: tokens / throughput. Expected: with checkpoints and interruptions. (label, key in the
# result or its expected run, format, scale)
_TTT_ROWS = (
    ("days, ideal", "time_to_train_days", "{:,.1f}", 1.0),
    ("days, expected", "expected_time_to_train_days", "{:,.1f}", 1.0),
    ("GPU-hours, ideal", "gpu_hours", "si", 1.0),
    ("GPU-hours, expected", "expected_gpu_hours", "si", 1.0),
    ("goodput", "goodput", "{:.1%}", 1.0),
    ("interruptions", "interruptions", "{:,.1f}", 1.0),
    ("  of them fabric-caused", "fabric_interruptions", "{:,.1f}", 1.0),
    ("hours lost to them", "interruption_h", "{:,.1f}", 1.0),
    ("  fabric-caused", "fabric_interruption_h", "{:,.1f}", 1.0),
    ("lost work each (min)", "lost_work_per_interruption_h", "{:.1f}", 60.0),
    ("restart each (min)", "restart_h", "{:.0f}", 60.0),
    ("checkpoint every (min)", "checkpoint_interval_h", "{:.1f}", 60.0),
    ("checkpoint write (s)", "checkpoint_write_s", "{:.1f}", 1.0),
    ("hours writing checkpoints", "checkpoint_h", "{:,.1f}", 1.0),
)


def cell(spec: str, value: float | None) -> str:
    """``si`` gives 3.72M / 573.0k so wide numbers fit an 80-column terminal."""
    if value is None:
        return "-"
    if spec != "si":
        return spec.format(value)
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


def time_to_train_table(results: list[dict[str, Any]]) -> Table:
    t = Table(
        title="Time to train: ideal (tokens / throughput) and expected (with checkpoints "
        "and interruptions)",
        title_justify="left",
        title_style="bold",
    )
    t.add_column("")
    for r in results:
        t.add_column(r["fabric"], justify="right", no_wrap=True)
    flat = [{**r, **r["expected_run"]} for r in results]
    for label, key, spec, scale in _TTT_ROWS:
        t.add_row(
            label, *(cell(spec, None if f.get(key) is None else f[key] * scale) for f in flat)
        )
    return t
