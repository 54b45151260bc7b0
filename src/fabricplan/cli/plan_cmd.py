"""``fabricplan plan``: the fastest training plan that fits, per fabric, and why the others
lose."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from, backend_note
from fabricplan.cli.output import console, emit_json, fail, fail_with, print_table
from fabricplan.cli.scenario_cmd import (
    FILE_ARG,
    JSON_OPT,
    SET_OPT,
    load_or_fail,
    warn_on_stderr,
)
from fabricplan.ops import BadInput
from fabricplan.ops.plan import plan_document, plan_searches
from fabricplan.ops.step import step_fabrics
from fabricplan.workload import WorkloadError

if TYPE_CHECKING:
    from fabricplan.planning.scenario import FabricSearch
    from fabricplan.planning.search import Candidate, Reason

# Largest --top: each alternative is a row of the table.
MAX_TOP = 50

TOP_OPT = typer.Option(
    5, "--top", min=0, max=MAX_TOP, help="Alternatives shown per fabric (other layouts)."
)


def _settings(p: Candidate) -> str:
    """ZeRO, micro-batch, recomputation and the overlap options that are on."""
    out = [f"ZeRO {p.zero}", f"mb {p.micro_batch}", f"recompute {p.recompute}"]
    out += ["DP overlap"] if p.overlap_dp else []
    out += ["TP overlap"] if p.tp_comm_overlap else []
    out += ["EP overlap"] if p.ep_comm_overlap else []
    out += ["EP one copy a node"] if p.ep_dispatch == "hierarchical" else []
    out += [f"CP {p.cp_comm}"] if p.cp > 1 else []
    return ", ".join(out)


def _layout(p: Candidate) -> str:
    parts = [("tp", p.tp), ("pp", p.pp), ("vp", p.vp), ("dp", p.dp), ("cp", p.cp), ("ep", p.ep)]
    return " ".join(f"{k} {v}" for k, v in parts if v > 1 or k in ("tp", "pp", "dp"))


def _row(label: str, p: Candidate, why: Sequence[Reason]) -> list[str]:
    return [
        label,
        _layout(p),
        _settings(p),
        f"{p.step_time_s:.3f}",
        f"{p.tokens_per_s:,.0f}",
        f"{p.memory_GB:.1f}",
        "; ".join(w.text() for w in why),
    ]


def _table(f: FabricSearch) -> Table:
    r = f.result
    n, fit = r.evaluated, r.fitting
    title = (
        f"{r.fabric}: the fastest plan that fits ({fit:,} of {n:,} plans fit in "
        f"{r.capacity_GB:.1f} GB usable per GPU)"
    )
    t = Table(title=title, title_justify="left", title_style="bold")
    for h in ("plan", "layout", "settings"):
        t.add_column(h)
    for h in ("step (s)", "tokens/s", "GB/GPU"):
        t.add_column(h, justify="right")
    t.add_column("why it loses")
    if r.best is not None:
        t.add_row(*_row("best", r.best, []))
    for i, a in enumerate(r.alternatives, 2):
        t.add_row(*_row(f"#{i} ({a.relative:.1%})", a.plan, a.reasons))
    for a in r.faster_unfit:
        t.add_row(*_row("faster, does not fit", a.plan, a.reasons))
    t.add_row(*_row("the scenario's", f.scenario_plan, f.scenario_plan_reasons()))
    return t


def plan_cmd(
    file: Path = FILE_ARG,
    fabric: list[str] | None = typer.Option(
        None, "--fabric", help="Search on this fabric id instead of the scenario's (repeatable)."
    ),
    top: int = TOP_OPT,
    congestion: str | None = CONGESTION_OPT,
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """The fastest training plan that fits, per fabric: every plan searched (tp, pp, vp, dp,
    cp, ep, ZeRO stage, recomputation, micro-batch, overlap options), the best of other
    layouts and why each loses, and faster plans that do not fit."""
    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(file, set_, as_json, cat)
    warn_on_stderr(sc, cat, as_json)
    try:
        fabrics = step_fabrics(sc, cat, fabric)
    except BadInput as exc:
        fail_with(exc, as_json)
    try:
        found = plan_searches(sc, cat, fabrics, backend, top)
    except WorkloadError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json([plan_document(f, backend) for f in found])
        return
    for f in found:
        print_table(_table(f))
        best, own, gain = f.result.best, f.scenario_plan, f.best_over_scenario_plan
        if best is None:
            console.print(f"{f.result.fabric}: no plan fits; use more GPUs", highlight=False)
        elif gain is not None:
            console.print(
                f"{f.result.fabric}: the best plan is {gain:+.1%} over the "
                f"scenario's plan ({best.tokens_per_s:,.0f} vs {own.tokens_per_s:,.0f} "
                "tokens/s)",
                highlight=False,
            )
    assert sc.workload is not None
    if sc.workload.parallel.pipeline_engine == "deepspeed":
        console.print(
            "every plan runs DeepSpeed's pipeline engine (the scenario's pipeline_engine): "
            "no interleaved plans (vp 1)",
            highlight=False,
        )
    note = backend_note(backend)
    if note:
        console.print(note, highlight=False)
