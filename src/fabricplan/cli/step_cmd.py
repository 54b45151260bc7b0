"""``fabricplan step``: step time per fabric for a scenario's workload, and why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from fabricplan.cli.time_to_train import cell, time_to_train_table
from fabricplan.cli.validated_range import validation_lines
from fabricplan.ops import BadInput
from fabricplan.ops.step import not_modelled, step_fabrics, step_records, step_results
from fabricplan.workload import WorkloadError

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.scenario import Scenario
    from fabricplan.workload import FabricResult, ServingFigures
    from fabricplan.workload.inference import ServingRates

Column = Callable[["FabricResult"], Any]

_TRAIN_COLS: tuple[tuple[str, Column, str], ...] = (
    ("step (s)", lambda r: r.figures.step_time_s, "{:.3f}"),
    ("tokens/s", lambda r: r.figures.tokens_per_s, "si"),
    ("TFLOP/s", lambda r: r.figures.tflops_per_gpu, "{:.0f}"),
    ("MFU", lambda r: r.figures.mfu, "{:.1%}"),
    ("comm", lambda r: r.figures.comm_exposed_fraction, "{:.1%}"),
)
_SERVE_COLS: tuple[tuple[str, Callable[[ServingFigures], float], str, float], ...] = (
    ("TTFT (ms)", lambda f: f.ttft_s, "{:.1f}", 1e3),
    ("ITL (ms)", lambda f: f.itl_s, "{:.2f}", 1e3),
    ("network share of ITL", lambda f: f.network_fraction, "{:.2%}", 1.0),
)
# Serving throughput: each rate per replica and for all replicas, labelled as such.
_RATE_COLS: tuple[tuple[str, Callable[[ServingRates], float]], ...] = (
    ("output tok/s per replica", lambda t: t.output_tokens_per_s_per_replica),
    ("output tok/s total", lambda t: t.output_tokens_per_s_total),
    ("input tok/s per replica", lambda t: t.input_tokens_per_s_per_replica),
    ("input tok/s total", lambda t: t.input_tokens_per_s_total),
)


def _breakdown_table(results: list[FabricResult]) -> Table:
    keys = list(results[0].figures.breakdown)
    t = Table(title="Breakdown per step (s)", title_justify="left", title_style="bold")
    t.add_column("part")
    for r in results:
        t.add_column(r.fabric, justify="right")
    for k in keys:
        t.add_row(k.removesuffix("_s"), *(f"{r.figures.breakdown[k]:.4g}" for r in results))
    return t


def _serving_rates_table(results: list[FabricResult], tp: int, pp: int) -> Table:
    """Per replica and total, with the streams that make them: the scenario's concurrency is
    per replica."""
    rates = [r.serving.rates for r in results if r.serving is not None]
    first = rates[0]
    title = (
        f"Serving throughput: {first.replicas:,} replicas of {tp * pp:,} GPUs "
        f"(tp {tp} x pp {pp}), "
        f"{first.streams_per_replica:,} concurrent streams per replica "
        f"(workload.serving.concurrency), {first.streams_total:,} in total"
    )
    t = Table(title=title, title_justify="left", title_style="bold")
    t.add_column("fabric", no_wrap=True)
    for head, _ in _RATE_COLS:
        t.add_column(head, justify="right")
    for r, rate in zip(results, rates, strict=True):
        t.add_row(r.fabric, *(f"{figure(rate):,.0f}" for _, figure in _RATE_COLS))
    return t


def _with_progress(
    sc: Scenario, cat: Catalog, fabrics: list[str], backend: NetworkBackend
) -> list[FabricResult]:
    """Behind a transient bar: a group spanning hundreds of nodes makes the congestion
    simulation take a minute or more."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from fabricplan.cli.output import err_console

    cols = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*cols, console=err_console, transient=True) as bar:
        task = bar.add_task("step per fabric", total=len(fabrics))
        return step_records(sc, cat, fabrics, backend, tick=lambda _f: bar.advance(task))


def step_cmd(
    file: Path = FILE_ARG,
    fabric: list[str] | None = typer.Option(
        None, "--fabric", help="Evaluate this fabric id instead of the scenario's (repeatable)."
    ),
    congestion: str | None = CONGESTION_OPT,
    no_congestion: bool = typer.Option(
        False, "--no-congestion", hidden=True, help="Deprecated: --congestion none."
    ),
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Step time, tokens/s, MFU and time-to-train per fabric (serving: TTFT, ITL, and token
    rates per replica and in total; workload.serving.concurrency is per replica)."""
    if no_congestion:  # the flag --congestion replaced; kept working for existing scripts
        if congestion not in (None, "none"):
            fail(
                f"--no-congestion means --congestion none, not {congestion}; give one of them",
                as_json=as_json,
            )
        from fabricplan.cli.output import err_console

        err_console.print(
            "[yellow]warning:[/] --no-congestion is deprecated; use --congestion none",
            highlight=False,
        )
        congestion = "none"
    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(file, set_, as_json, cat)
    warn_on_stderr(sc, cat, as_json)
    try:
        fabrics = step_fabrics(sc, cat, fabric)
    except BadInput as exc:
        fail_with(exc, as_json)
    try:
        if as_json:
            emit_json(step_results(sc, cat, fabrics, backend))
            return
        results = _with_progress(sc, cat, fabrics, backend)
    except WorkloadError as exc:  # a design the fabric cannot build is one too
        fail(str(exc), as_json=as_json)
    w = sc.workload
    assert w is not None
    p = w.parallel
    title = (
        f"{sc.name}: {w.model} on {sc.cluster.gpus:,} x {sc.cluster.gpu}, "
        f"tp {p.tp} pp {p.pp} dp {p.dp} cp {p.cp} ep {p.ep}"
    )
    if w.kind == "training" and p.pipeline_layout is not None:
        title += f", stages {p.pipeline_layout}"
    if w.kind == "training" and w.mtp_layers:
        title += f", {w.mtp_layers} MTP"
    if w.kind == "training" and p.pp > 1 and p.pipeline_engine != "megatron":
        title += f", {p.pipeline_engine} pipeline"
    table = Table(title=title, title_justify="left", title_style="bold")
    table.add_column("fabric", no_wrap=True)
    if w.kind == "training":
        for head, *_ in _TRAIN_COLS:
            table.add_column(head, justify="right")
        for r in results:
            table.add_row(r.fabric, *(cell(f, figure(r)) for _, figure, f in _TRAIN_COLS))
    else:
        for head, *_ in _SERVE_COLS:
            table.add_column(head, justify="right")
        for r in results:
            sv = r.serving
            assert sv is not None
            table.add_row(r.fabric, *(f.format(figure(sv) * s) for _, figure, f, s in _SERVE_COLS))
    print_table(table)
    for line in validation_lines(results):
        console.print(line, highlight=False)
    if w.kind != "training":
        print_table(_serving_rates_table(results, p.tp, p.pp))
    note = backend_note(backend)
    if note:
        console.print(note, highlight=False)
    if w.kind == "training":
        print_table(time_to_train_table(results))
        for r in results:
            if r.expected is None:
                console.print(f"{r.fabric}: {r.expected_note}", highlight=False)
    print_table(_breakdown_table(results))
    best = max(r.figures.tokens_per_s for r in results)
    what = "throughput" if w.kind == "training" else "output throughput"
    for r in results:
        console.print(
            f"{r.fabric}: {r.figures.tokens_per_s / best:.1%} of the best fabric's {what}",
            highlight=False,
        )
    for r in results:
        missing = not_modelled(cat, backend.name, r.fabric, sc)
        console.print(f"[dim]{r.fabric}, not modelled: {'; '.join(missing)}[/]", highlight=False)
