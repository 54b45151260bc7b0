"""Time to train per fabric as the step and advise tables print it: ideal beside expected."""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table

from fabricplan.workload import FabricResult
from fabricplan.workload.interruptions import ExpectedRun


def _run(figure: Callable[[ExpectedRun], float]) -> Callable[[FabricResult], float | None]:
    """A figure of the expected run; None when the run never finishes."""
    return lambda r: None if r.expected is None else figure(r.expected)


# Ideal: tokens / throughput. Expected: with checkpoints and interruptions. (label, figure of
# the result or its expected run, format, scale)
_TTT_ROWS: tuple[tuple[str, Callable[[FabricResult], float | None], str, float], ...] = (
    ("days, ideal", lambda r: r.figures.time_to_train_days, "{:,.1f}", 1.0),
    ("days, expected", lambda r: r.expected_time_to_train_days, "{:,.1f}", 1.0),
    ("GPU-hours, ideal", lambda r: r.figures.gpu_hours, "si", 1.0),
    ("GPU-hours, expected", lambda r: r.expected_gpu_hours, "si", 1.0),
    ("goodput", lambda r: r.goodput, "{:.1%}", 1.0),
    ("interruptions", _run(lambda e: e.interruptions), "{:,.1f}", 1.0),
    ("  of them fabric-caused", _run(lambda e: e.fabric_interruptions), "{:,.1f}", 1.0),
    ("hours lost to them", _run(lambda e: e.interruption_h), "{:,.1f}", 1.0),
    ("  fabric-caused", _run(lambda e: e.fabric_interruption_h), "{:,.1f}", 1.0),
    ("lost work each (min)", _run(lambda e: e.lost_work_per_interruption_h), "{:.1f}", 60.0),
    ("restart each (min)", _run(lambda e: e.restart_h), "{:.0f}", 60.0),
    ("checkpoint every (min)", _run(lambda e: e.checkpoint_interval_h), "{:.1f}", 60.0),
    ("checkpoint write (s)", _run(lambda e: e.checkpoint_write_s), "{:.1f}", 1.0),
    ("hours writing checkpoints", _run(lambda e: e.checkpoint_h), "{:,.1f}", 1.0),
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


def time_to_train_table(results: list[FabricResult]) -> Table:
    """Each training result's run: ideal, and expected with checkpoints and interruptions."""
    t = Table(
        title="Time to train: ideal (tokens / throughput) and expected (with checkpoints "
        "and interruptions)",
        title_justify="left",
        title_style="bold",
    )
    t.add_column("")
    for r in results:
        t.add_column(r.fabric, justify="right", no_wrap=True)
    for label, figure, spec, scale in _TTT_ROWS:
        values = (figure(r) for r in results)
        t.add_row(label, *(cell(spec, None if v is None else v * scale) for v in values))
    return t
