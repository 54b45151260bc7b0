"""``fabricplan validate --suite training|claims``: the workload model against published runs,
and the seeds' scale claims recomputed."""

from __future__ import annotations

from rich.table import Table

from fabricplan.cli.output import console, emit_json
from fabricplan.validation.seed_claims import check_claims
from fabricplan.validation.training_runs import TFLOPS_TOLERANCE, check_training


def show_training(as_json: bool) -> None:
    checks = check_training()
    within = sum(abs(c.error) <= TFLOPS_TOLERANCE for c in checks)
    if as_json:
        emit_json({"rows": [c.to_dict() for c in checks], "within_10pct": within,
                   "count": len(checks)})  # fmt: skip
        return
    t = Table(title="Megatron-LM on Selene (Narayanan et al. SC'21, Table 1) vs the workload model",
              title_justify="left", title_style="bold")  # fmt: skip
    for col in ("params", "GPUs", "TP", "PP", "measured TFLOP/s", "predicted", "error",
                "step (s)", "largest overheads"):  # fmt: skip
        t.add_column(col, justify="left" if col == "largest overheads" else "right")
    for c in checks:
        r = c.row
        parts = sorted(((v, k.removesuffix("_s")) for k, v in c.breakdown.items()
                        if k != "compute_s" and v > 0), reverse=True)[:2]  # fmt: skip
        over = ", ".join(f"{k} {v / c.step_time_s:.0%}" for v, k in parts)
        t.add_row(f"{r['params_b']}B", str(r["gpus"]), str(r["tp"]), str(r["pp"]),
                  f"{c.measured_tflops:.0f}", f"{c.predicted_tflops:.0f}", f"{c.error:+.1%}",
                  f"{c.step_time_s:.2f}", over)  # fmt: skip
    console.print(t)
    console.print(f"rows within 10 %: {within}/{len(checks)} (TFLOP/s per GPU counted as the "
                  f"paper does, with the recomputed forward pass)", highlight=False)  # fmt: skip


def show_claims(as_json: bool) -> None:
    checks = check_claims()
    if as_json:
        emit_json([c.to_dict() for c in checks])
        return
    t = Table(title="The seeds' scale claims, recomputed (IB NDR vs RoCE 400G)",
              title_justify="left", title_style="bold")  # fmt: skip
    for col in ("claim", "RoCE quality", "topology", "fabricplan", "claimed", "holds"):
        t.add_column(col)
    for c in checks:
        gain = c.claim.quantity == "ib_gain"
        val = f"{c.value:+.1%}" if gain else f"{c.value:.1%}"
        claimed = f"{c.claim.low:.0%}-{c.claim.high:.0%}" + (" IB gain" if gain else "")
        t.add_row(c.claim.text, c.roce_quality, c.design, val, claimed,
                  "[green]yes[/]" if c.holds else "[red]no[/]")  # fmt: skip
    console.print(t)
