"""``fabricplan sweep``: a scenario over a grid of its fields (``run``), the results stored in
DuckDB (``show``, ``export``). DuckDB, pandas and Ray are imported by the subcommands that use
them, never at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from fabricplan.cli import output
from fabricplan.cli.catalog_opt import CATALOG_OPT, JSON_OPT, catalog_from
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from
from fabricplan.cli.output import emit_json, fail, fmt, print_table
from fabricplan.cli.scenario_cmd import FILE_ARG, SET_OPT, load_or_fail

app = typer.Typer(
    help="Evaluate a scenario over a grid of its fields; results in DuckDB.",
    no_args_is_help=True,
)

WHAT_HELP = (
    "What each combination computes: step (the workload model), cost (with each fabric's "
    "money and the cost of the same work) or advise (the whole recommendation)."
)
# The figures the tables show per level (the store and exports have every output).
SHOWN = {
    "step": ["step_time_s", "mfu", "expected_time_to_train_days"],
    "cost": ["step_time_s", "cost_same_work_usd", "cheapest"],
    "advise": [
        "step_time_s",
        "cost_same_work_usd",
        "recommendation",
        "confidence",
        "p_cheapest",
        "break_even_gpus",
    ],
}


def _base(file: Path, set_: list[str] | None, as_json: bool, cat: Any) -> dict[str, Any]:
    """The scenario file's data with the --set overrides, once the file has loaded cleanly."""
    from fabricplan.inputs import read_user_text
    from fabricplan.scenario.load import MAX_SCENARIO_BYTES
    from fabricplan.scenario.overrides import apply_overrides
    from fabricplan.scenario.yaml_io import parse_yaml

    load_or_fail(file, set_, as_json, cat)  # every problem of the file itself, exit 2
    data = parse_yaml(read_user_text(file, MAX_SCENARIO_BYTES))
    return apply_overrides(data, set_ or (), str(file))


@app.command("run")
def run_cmd(
    file: Path = FILE_ARG,
    grid: list[str] = typer.Option(
        ...,
        "--grid",
        metavar="KEY=V1,V2|KEY=START..END:xFACTOR|KEY=START..END:+STEP",
        help="A swept field and its values (repeatable): a list, a geometric range "
        "(cluster.gpus=256..8192:x2) or an arithmetic one (costs.gpu_hour_price=2..4:+0.5).",
    ),
    what: str = typer.Option("step", "--what", metavar="step|cost|advise", help=WHAT_HELP),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="DuckDB file for the results (default: SCENARIO-sweep.duckdb); "
        "an existing one from the same sweep is resumed.",
    ),
    engine: str = typer.Option("local", "--engine", metavar="local|ray", help="Where to run."),
    address: str | None = typer.Option(
        None, "--address", help="A running Ray cluster's address (--engine ray)."
    ),
    jobs: int | None = typer.Option(
        None, "--jobs", min=1, max=4096, help="Worker processes (default: every local core)."
    ),
    set_: list[str] | None = SET_OPT,
    seed: int = typer.Option(0, "--seed", min=0, help="advise's Monte Carlo seed."),
    congestion: str | None = CONGESTION_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Evaluate every combination of the --grid values on the scenario FILE and store one row
    per combination and fabric. Fields that depend on a swept one follow it (dp, the growth
    target); a combination that is still not a valid scenario, or that the model refuses, is
    stored as skipped with the reason. Rerun the same command to resume a stopped sweep."""
    from fabricplan.sweep.engine import Spec
    from fabricplan.sweep.executors import make_executor
    from fabricplan.sweep.grid import GridError, parse_grid
    from fabricplan.sweep.records import WHATS
    from fabricplan.sweep.run import run_sweep
    from fabricplan.sweep.store import StoreError

    if what not in WHATS:
        fail(f"--what: unknown level '{what}'; allowed: {', '.join(WHATS)}", as_json=as_json)
    if engine not in ("local", "ray"):
        fail(f"--engine: unknown engine '{engine}'; allowed: local, ray", as_json=as_json)
    if address and engine != "ray":
        fail("--address names a Ray cluster: give it with --engine ray", as_json=as_json)
    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    try:
        axes = parse_grid(grid)
    except GridError as exc:
        n = len(exc.problems)
        fail(f"--grid: {n} problem{'s' if n != 1 else ''}", exc.problems, as_json=as_json)
    base = _base(file, set_, as_json, cat)
    if engine == "ray":
        _needs_ray(as_json)
    out = out or Path(f"{file.stem}-sweep.duckdb")
    spec = Spec(what, cat, backend.name, seed, keep_going=True)
    executor = make_executor(engine, jobs, address)
    try:
        if as_json:
            summary = run_sweep(base, axes, spec, out, executor, name=file.stem, engine=engine)
        else:
            from rich.progress import Progress

            with Progress(console=output.err_console, transient=True) as bar:
                task = bar.add_task(f"sweep ({what})", total=None)
                summary = run_sweep(
                    base,
                    axes,
                    spec,
                    out,
                    executor,
                    name=file.stem,
                    engine=engine,
                    on_progress=lambda d, t: bar.update(task, completed=d, total=t),
                )
    except StoreError as exc:
        fail(str(exc), as_json=as_json)
    except ConnectionError as exc:  # a Ray address nothing answers at
        fail(f"--address: {exc}", as_json=as_json)
    if as_json:
        emit_json(summary.to_dict())
        _exit_if_failed(summary.failed)
        return
    s = summary
    output.console.print(
        f"{s.combinations:,} combinations of {file}: {s.evaluated:,} evaluated "
        f"({s.skipped:,} skipped), {s.already_stored:,} already stored; {s.seconds:.1f} s on "
        f"{s.workers} worker{'s' if s.workers != 1 else ''} ({s.engine}) -> {s.out}",
        highlight=False,
    )
    for e in s.skipped_examples:
        point = ", ".join(f"{k}={v}" for k, v in e["point"].items())
        output.console.print(f"  [yellow]skipped[/] {point}: {e['reason']}", highlight=False)
    for e in s.failed_examples:
        point = ", ".join(f"{k}={v}" for k, v in e["point"].items())
        output.err_console.print(f"  [red]failed[/] {point}: {e['error']}", highlight=False)
    _show(out, limit=20, as_json=False)
    if s.failed:
        output.err_console.print(
            f"{s.failed:,} combination{'s' if s.failed != 1 else ''} stopped by an error and "
            "not stored: the same command retries them (the others are kept)",
            highlight=False,
        )
    _exit_if_failed(s.failed)


def _exit_if_failed(failed: int) -> None:
    """A fault in some combinations (not a refusal) is exit code 1, after all the others are
    stored."""
    if failed:
        raise typer.Exit(output.EXIT_INTERNAL)


def _needs_ray(as_json: bool) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("--engine ray needs Ray: pip install 'fabricplan[ray]'", as_json=as_json)


def _document(path: Path, limit: int) -> dict[str, Any]:
    from fabricplan.sweep.store import TABLE, read_only

    con = read_only(path)
    try:
        cur = con.execute(f"SELECT * FROM {TABLE} ORDER BY combination_index, fabric")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        con.close()
    results = [dict(zip(names, r, strict=True)) for r in rows]
    for r in results:
        r["time"] = r["time"].isoformat() if r["time"] is not None else None
    combos = {r["combination"]: r["status"] for r in results}
    return {
        "file": str(path),
        "what": next((r["what"] for r in results), None),
        "swept": [n for n in names if "." in n],
        "combinations": len(combos),
        "skipped": sum(s == "skipped" for s in combos.values()),
        "rows": len(results),
        "fabricplan_versions": sorted({r["fabricplan_version"] for r in results}),
        "results": results if limit == 0 else results[:limit],
    }


def _show(path: Path, limit: int, as_json: bool) -> None:
    from rich.table import Table

    from fabricplan.sweep.store import StoreError

    try:
        doc = _document(path, limit)
    except StoreError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json(doc)
        return
    shown = SHOWN.get(doc["what"] or "step", [])
    table = Table(
        title=f"{path}: {doc['combinations']:,} combinations ({doc['skipped']:,} skipped), "
        f"{doc['rows']:,} rows, level {doc['what']}",
        title_justify="left",
        title_style="bold",
    )
    skips = any(r["status"] == "skipped" for r in doc["results"])
    for col in [*doc["swept"], "fabric", *shown, *(["skipped because"] if skips else [])]:
        text = col in ("fabric", "skipped because")
        table.add_column(col, justify="left" if text else "right", no_wrap=not text)
    for r in doc["results"]:
        cells = [fmt(r[k]) for k in [*doc["swept"], "fabric", *shown]]
        if r["status"] == "skipped":
            cells = [*cells[: len(doc["swept"])], "-", *("" for _ in shown)]
        table.add_row(*cells, *([r["reason"] or ""] if skips else []))
    print_table(table)
    if len(doc["results"]) < doc["rows"]:
        output.console.print(
            f"[dim]first {len(doc['results'])} of {doc['rows']:,} rows (--limit 0 for all, or "
            "sweep export)[/]",
            highlight=False,
        )


@app.command("show")
def show_cmd(
    file: Path = typer.Argument(..., metavar="FILE", help="A sweep's DuckDB file."),
    limit: int = typer.Option(40, "--limit", min=0, help="Rows to show (0: all)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Show a sweep's results: how many combinations, which were skipped, and the rows."""
    _show(file, limit, as_json)


@app.command("export")
def export_cmd(
    file: Path = typer.Argument(..., metavar="FILE", help="A sweep's DuckDB file."),
    csv: Path | None = typer.Option(None, "--csv", help="Write the rows as CSV."),
    parquet: Path | None = typer.Option(None, "--parquet", help="Write the rows as Parquet."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    as_json: bool = JSON_OPT,
) -> None:
    """Export a sweep's rows, in grid order, to CSV or Parquet."""
    from fabricplan.sweep.store import StoreError, export

    if (csv is None) == (parquet is None):
        fail("give one of --csv OUT.csv or --parquet OUT.parquet", as_json=as_json)
    target, kind = (csv, "csv") if csv is not None else (parquet, "parquet")
    assert target is not None
    if target.exists() and not force:
        fail(f"{target} exists; --force replaces it", as_json=as_json)
    try:
        rows = export(file, target, kind)
    except StoreError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json({"file": str(file), "out": str(target), "format": kind, "rows": rows})
    else:
        output.console.print(f"{rows:,} rows -> {target} ({kind})", highlight=False)
