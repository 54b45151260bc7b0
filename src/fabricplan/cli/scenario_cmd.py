"""``fabricplan scenario``: validate a scenario file and show what it amounts to."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricplan.catalog import Catalog
from fabricplan.cli import output
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.catalog_opt import JSON_OPT as JSON_OPT
from fabricplan.cli.output import emit_json, fail, fmt, kv_table, print_table
from fabricplan.ops import scenario_problems_message
from fabricplan.ops.scenario import check_document
from fabricplan.scenario import Scenario, ScenarioError, load_scenario, summarize

if TYPE_CHECKING:
    from rich.table import Table

app = typer.Typer(help="Validate scenario files and show what they describe.", no_args_is_help=True)

FILE_ARG = typer.Argument(..., metavar="FILE", help="Scenario YAML file.")
SET_OPT = typer.Option(
    None,
    "--set",
    metavar="KEY=VALUE",
    help="Override a field, e.g. --set cluster.gpus=1024 (repeatable).",
)


def load_or_fail(
    path: Path, overrides: list[str] | None, as_json: bool, catalog: Catalog
) -> Scenario:
    """Load a scenario for a command; bad input exits with code 2 and every problem listed."""
    try:
        return load_scenario(path, overrides=overrides or (), catalog=catalog)
    except ScenarioError as exc:
        fail(scenario_problems_message(str(path), len(exc.problems)), exc.problems, as_json=as_json)


def warn_on_stderr(s: Scenario, catalog: Catalog, as_json: bool) -> None:
    """The scenario's warnings (``scenario check`` lists them) on standard error, for a command
    whose own output is the answer; none with ``--json``, whose output stays one document."""
    if as_json:
        return
    from rich.markup import escape

    from fabricplan.scenario import scenario_warnings

    err = output.err_console
    for w in scenario_warnings(s, catalog):
        err.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False)


def _print_warnings(warnings: list[dict[str, Any]]) -> None:
    for w in warnings:
        got = f" (got {w['value']!r})" if "value" in w else ""
        output.console.print(
            f"[yellow]warning:[/] {w['field']}: {w['message']}{got}", highlight=False
        )


@app.command("check")
def check_cmd(
    file: Path = FILE_ARG,
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Validate FILE: exit 0 if usable, 2 with every problem listed if not."""
    cat = catalog_from(catalog, as_json)
    s = load_or_fail(file, set_, as_json, cat)
    if as_json:
        emit_json(check_document(s, cat))
        return
    summary = summarize(s, cat)
    c = summary["cluster"]
    output.console.print(
        f"[green]ok[/] {file}: '{s.name}' - {c['gpus']} x {c['gpu']} in {c['nodes']} nodes, "
        f"fabrics {', '.join(s.cluster.fabrics)}",
        highlight=False,
    )
    _print_warnings(summary["warnings"])


def _fabric_table(fabrics: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(
        title="Fabrics compared (catalog facts; predictions come from later layers)",
        title_justify="left",
        title_style="bold",
    )
    table.add_column("", style="cyan", no_wrap=True)
    for f in fabrics:
        table.add_column(f["id"], overflow="fold")
    rows = [
        ("line rate (Gb/s)", "line_rate_gbps"),
        ("goodput per NIC (GB/s)", "goodput_per_port_GBps"),
        ("NICs per node", "nics_per_node"),
        ("injection per node (GB/s)", "injection_per_node_GBps"),
        ("RDMA latency range (us)", "rdma_latency_us"),
        ("switch", "switch"),
        ("switch latency (ns)", "switch_latency_ns"),
        ("flow control", "flow_control"),
        ("lossless", "lossless"),
        ("routing", "routing"),
        ("congestion control", "congestion_control"),
        ("RoCE quality", "roce_quality"),
    ]
    for label, key in rows:
        table.add_row(label, *(_fabric_cell(f, key) for f in fabrics))
    return table


def _fabric_cell(f: dict[str, Any], key: str) -> str:
    if key == "rdma_latency_us":
        return "-".join(fmt(v) for v in f[key])
    if key == "nics_per_node" and f["rented_as"]:  # the cloud node types it comes on
        return f"{f[key]} (as {', '.join(f['rented_as'])})"
    return fmt(f[key])


def _deepspeed_pipeline(p: dict[str, Any]) -> bool:
    """Whether the summary's parallel layout runs a pipeline on DeepSpeed's engine."""
    return p.get("pipeline_engine") == "deepspeed" and p["pp"] > 1


@app.command("show")
def show_cmd(
    file: Path = FILE_ARG,
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Show the resolved scenario: cluster, fabrics compared and workload size."""
    cat = catalog_from(catalog, as_json)
    s = load_or_fail(file, set_, as_json, cat)
    summary = summarize(s, cat)
    if as_json:
        emit_json(summary)
        return
    c = summary["cluster"]
    topo = c["topology"]
    nics = f"{c['nics_per_node']} NICs each"
    if any(f["nics_per_node"] != c["nics_per_node"] for f in summary["fabrics"]):
        nics += " (other fabrics: NICs per node below)"
    output.console.print(
        kv_table(
            f"Scenario '{summary['name']}'",
            [
                ("GPUs", f"{c['gpus']:,} x {c['gpu_name']}"),
                (
                    "nodes",
                    f"{c['nodes']:,} x {c['gpus_per_node']} GPUs, {nics}",
                ),
                ("topology", f"{topo['design']}, oversubscription {topo['oversubscription']:g}:1"),
            ],
        )
    )
    print_table(_fabric_table(summary["fabrics"]))
    w = summary["workload"]
    if w is not None:
        p = w["parallel"]
        rows: list[tuple[str, Any]] = [
            (
                "model",
                f"{w['model']} ({w['params_b']:.1f}B params"
                + (
                    f", {w['active_params_b']:.1f}B active)"
                    if w["active_params_b"] < w["params_b"]
                    else ")"
                ),
            ),
            (
                "parallelism",
                f"tp {p['tp']} x pp {p['pp']} x dp {p['dp']} x cp {p['cp']}"
                f" (ep {p['ep']}, ZeRO-{p['zero']}), {w['precision']}"
                + (", DeepSpeed's pipeline engine" if _deepspeed_pipeline(p) else ""),
            ),
            (
                "batch",
                f"{w['global_batch']:,} x {w['seq_len']:,} tokens = "
                f"{w['tokens_per_step']:,} tokens/step",
            ),
        ]
        if w["kind"] == "training":
            rows += [
                ("training tokens", f"{w['tokens']:.3g} ({w['steps']:,.0f} steps)"),
                (
                    "compute",
                    f"{w['train_flops']:.3g} FLOPs; floor {w['days_at_peak']:.1f} days "
                    "at 100 % of dense peak, no communication",
                ),
            ]
        else:
            rows.append(("serving", _serving_line(w["serving"], p["tp"] * p["pp"])))
        print_table(kv_table(f"Workload: {w['kind']}", rows))
    _print_warnings(summary["warnings"])


def _serving_line(sv: dict[str, Any], replica_gpus: int) -> str:
    """The serving load, with concurrency said to be per replica."""
    return (
        f"prompt_tokens {sv['prompt_tokens']:,}, output_tokens {sv['output_tokens']:,}, "
        f"concurrency {sv['concurrency']:,} per replica ({sv['replicas']:,} replicas of "
        f"tp x pp = {replica_gpus:,} GPUs: {sv['streams_total']:,} streams in total), "
        f"disaggregated {fmt(sv['disaggregated'])}"
    )
