"""``fabricplan validate --suite training|held-back|recipes``: the workload model against
published runs."""

from __future__ import annotations

import numpy as np
from rich.table import Table

from fabricplan.cli.congestion_opt import backend_note
from fabricplan.cli.output import console, emit_json, fail, print_table
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.validation.training_runs import (
    TFLOPS_TOLERANCE,
    CeilingCase,
    TrainingCheck,
    ceiling_sensitivity,
    check_held_back,
    check_recipes,
    check_training,
)
from fabricplan.workload import WorkloadError

_METRIC_LABEL = {
    "hw_tflops_per_gpu": "HW TF/s",
    "model_tflops_per_gpu": "model TF/s",
    "mfu": "MFU",
    "step_s": "step s",
    "tokens_per_s_per_gpu": "tokens/s/GPU",
}


def _fmt(metric: str, v: float) -> str:
    if metric == "mfu":
        return f"{v:.1%}"
    return f"{v:.2f}" if metric == "step_s" else f"{v:,.0f}"


def _table(title: str, checks: list[TrainingCheck]) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold")
    for col in ("run", "GPUs", "TP·PP", "metric", "measured", "predicted", "error", "top overhead"):
        t.add_column(col, justify="left" if col in ("run", "metric", "top overhead") else "right")
    for c in checks:
        r = c.row
        parts = sorted(
            (
                (v, k.removesuffix("_s"))
                for k, v in c.breakdown.items()
                if k != "compute_s" and v > 0
            ),
            reverse=True,
        )
        over = f"{parts[0][1]} {parts[0][0] / c.step_time_s:.0%}" if parts else "-"
        t.add_row(
            c.label,
            f"{r['gpus']:,}",
            f"{r['tp']}·{r['pp']}",
            _METRIC_LABEL[c.metric],
            _fmt(c.metric, c.measured),
            _fmt(c.metric, c.predicted),
            f"{c.error:+.1%}",
            over,
        )
    return t


def _ceiling_table(cases: list[CeilingCase]) -> Table:
    t = Table(
        title="The same runs under each published matmul ceiling of their GPU "
        "(* the catalog's, which the model keeps)",
        title_justify="left",
        title_style="bold",
    )
    for col in (
        "",
        "GPU",
        "measured as",
        "TF/s",
        "of peak",
        "Table 1 ≤10 %",
        "Table 1 errors",
        "held-back ≤10 %",
    ):
        t.add_column(col, justify="left" if col in ("measured as", "Table 1 errors") else "right")
    for i, c in enumerate(cases, 1):
        n = c.acceptance_rows
        errs = c.errors[:n]
        span = f"{min(errs):+.0%} to {max(errs):+.0%}" if errs else "-"
        mark = "*" if c.in_catalog else ""
        t.add_row(
            f"[{i}]{mark}",
            c.gpu.upper(),
            c.label,
            f"{c.tflops:.0f}",
            f"{c.efficiency:.1%}",
            f"{c.acceptance_within}/{n}" if n else "-",
            span,
            f"{c.held_back_within}/{len(c.errors) - n}",
        )
    return t


# Each training suite's runs, by the suite's name.
_SUITE_CHECKS = {"training": check_training, "held-back": check_held_back, "recipes": check_recipes}


def show_training(
    as_json: bool, suite: str = "training", backend: NetworkBackend = DEFAULT_BACKEND
) -> None:
    held_back = suite != "training"  # tables per source, and no ceiling sensitivity
    try:
        checks = _SUITE_CHECKS[suite](backend=backend)
        ceilings = [] if held_back else ceiling_sensitivity(backend=backend)
    except WorkloadError as exc:  # e.g. a run outside the chosen backend's law
        fail(str(exc), as_json=as_json)
    within = sum(abs(c.error) <= TFLOPS_TOLERANCE for c in checks)
    errors = np.abs([c.error for c in checks])
    median, worst = float(np.median(errors)), float(errors.max())
    if as_json:
        out = {
            "rows": [c.to_dict() for c in checks],
            "within_10pct": within,
            "count": len(checks),
            "median_abs_error": median,
            "worst_abs_error": worst,
        }
        if not held_back:
            out["matmul_ceiling_sensitivity"] = [c.to_dict() for c in ceilings]
        emit_json(out)
        return
    if held_back:
        sources = dict.fromkeys(c.row["source"] for c in checks)
        for src in sources:
            print_table(_table(src, [c for c in checks if c.row["source"] == src]))
    else:
        console.print(_table("Megatron-LM on Selene (Narayanan et al. SC'21, Table 1)", checks))
    note = backend_note(backend)
    if note:
        console.print(note, highlight=False)
    console.print(
        f"rows within 10 %: {within}/{len(checks)}; median |error| {median:.1%}, worst "
        f"{worst:.1%}. Error = predicted / measured throughput - 1: positive means the model is "
        "faster than the run.",
        highlight=False,
    )
    if ceilings:
        print_table(_ceiling_table(ceilings))
        for i, c in enumerate(ceilings, 1):
            console.print(f"[{i}] {c.protocol}. {c.source}.", highlight=False, markup=False)
        ours = {c.gpu: c.tflops for c in ceilings if c.in_catalog}
        above = [c.tflops / ours[c.gpu] - 1 for c in ceilings if not c.in_catalog]
        console.print(
            "The catalog keeps the sustained figure of each GPU (power-saturated, random "
            f"inputs), which is how a training step runs; the other published figures are "
            f"{min(above):.0%} to {max(above):.0%} higher and make every run faster in the "
            "model.",
            highlight=False,
        )
