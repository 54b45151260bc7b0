"""``fabricplan validate --suite nccl-tests``: the published nccl-tests runs against the
collective model, run by run and as median errors per fabric family and size band."""

from __future__ import annotations

from rich.table import Table

from fabricplan.cli.collective_cmd import human_size
from fabricplan.cli.output import console, emit_json, print_table
from fabricplan.validation import check_runs
from fabricplan.validation.nccl_runs import BANDS, accuracy_by_family


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f} %"


def show_nccl_runs(points: bool, as_json: bool) -> None:
    """Every run with its errors and grade, then the accuracy per fabric family."""
    checks = check_runs()
    accuracy = accuracy_by_family(checks)
    if as_json:
        emit_json(
            {"runs": [c.to_dict() for c in checks], "accuracy": [a.to_dict() for a in accuracy]}
        )
        return
    table = Table(
        title="Published nccl-tests runs vs the collective model",
        title_justify="left",
        title_style="bold",
    )
    for col in (
        "file",
        "run",
        "health",
        "nodes",
        "busbw err >=64M",
        "time err <=64K",
        "verdict",
        "expected",
        "findings",
    ):
        table.add_column(col, overflow="fold")
    for c in checks:
        d = c.to_dict()
        table.add_row(
            d["file"][:3],
            d["run"] or "(only)",
            d["health"],
            str(d["nodes"]),
            _pct(d["busbw_median_abs_error"]),
            _pct(d["time_median_abs_error"]),
            d["verdict"],
            d["expected_verdict"] + ("" if d["grade_ok"] else " [red]MISMATCH[/]"),
            ", ".join(d["findings"]),
        )
        if points:
            for p in d["points"]:
                err = p["measured_busbw_GBps"] / p["predicted_busbw_GBps"] - 1
                table.add_row(
                    "",
                    human_size(p["size_bytes"]),
                    "",
                    "",
                    f"{p['measured_busbw_GBps']:.1f} vs {p['predicted_busbw_GBps']:.1f} GB/s",
                    f"{p['measured_time_us']:,.1f} vs {p['predicted_time_us']:,.1f} us",
                    f"{100 * err:+.0f} %",
                    p["algorithm"],
                    "",
                )
    print_table(table)
    healthy = [c for c in checks if c.setup["health"] == "healthy"]
    bw_ok = sum(1 for c in healthy if c.busbw_error is not None and c.busbw_error <= 0.10)
    t_ok = [c for c in healthy if c.time_error is not None]
    console.print(
        f"healthy runs with busbw median error <= 10 %: {bw_ok}/{len(healthy)}; "
        f"with small-message time error <= 25 %: "
        f"{sum(1 for c in t_ok if c.time_error <= 0.25)}/{len(t_ok)}; "
        f"grades as expected: {sum(c.grade_ok for c in checks)}/{len(checks)}",
        highlight=False,
    )
    show_accuracy(accuracy)


def show_accuracy(accuracy: list) -> None:  # list[BandAccuracy]
    """Median |error| per fabric family and size band: the runs the model was built on, the
    held-back ones, then every run together."""
    for held in (False, True, None):
        rows = [a for a in accuracy if a.held_back is held]
        if not rows:
            continue
        what = {
            False: "runs the model was built on",
            True: "held-back runs (nothing was set from them)",
            None: "every run, built on and held back together",
        }[held]
        table = Table(
            title=f"Median |error| by fabric family, {what}",
            title_justify="left",
            title_style="bold",
        )
        table.add_column("family", no_wrap=True)
        for band in BANDS:
            table.add_column(band, justify="right", no_wrap=True)
        for fam in dict.fromkeys(a.family for a in rows):
            cells = []
            for band in BANDS:
                a = next(x for x in rows if x.family == fam and x.band == band)
                cells.append(
                    "-"
                    if a.median_abs_error is None
                    else f"{_pct(a.median_abs_error)} ({a.points} pts, {a.runs} runs)"
                )
            table.add_row(fam, *cells)
        print_table(table)
