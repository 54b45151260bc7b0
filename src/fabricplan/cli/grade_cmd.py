"""``fabricplan grade`` and ``fabricplan validate``: measured nccl-tests against the model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.collective_cmd import human_size
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from
from fabricplan.cli.output import console, emit_json, fail, fmt, print_table
from fabricplan.cli.system_opts import (
    FABRIC_OPT,
    GPN_OPT,
    GPU_OPT,
    HOPS_OPT,
    JSON_OPT,
    MAX_FILE_OPT,
    NICS_OPT,
    NODES_OPT,
    RUN_OPT,
    SCENARIO_OPT,
    SET_OPT,
    SHARP_OPT,
    measured_runs,
)
from fabricplan.nccltests.grade import PASS_BW_RATIO
from fabricplan.ops.cluster import ClusterFlags
from fabricplan.ops.grade import grade_document, grade_runs, worst_verdict

if TYPE_CHECKING:
    from fabricplan.cli.report_out import Targets

# Exit code when a run is graded `fail`: the command worked, the fabric did not.
EXIT_GRADE_FAIL = 3
VERDICT_STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}


def grade_cmd(
    results: Path = typer.Argument(
        ..., metavar="RESULTS", help="nccl-tests output (text or -J JSON)."
    ),
    op: str | None = typer.Option(None, "--op", help="Collective, if the log does not say."),
    gpu: str | None = GPU_OPT,
    nodes: int | None = NODES_OPT,
    gpus_per_node: int | None = GPN_OPT,
    nics_per_node: int | None = NICS_OPT,
    fabric: str | None = FABRIC_OPT,
    hops: int | None = HOPS_OPT,
    sharp: bool = SHARP_OPT,
    scenario: Path | None = SCENARIO_OPT,
    set_: list[str] | None = SET_OPT,
    run_index: list[int] | None = RUN_OPT,
    catalog: Path | None = CATALOG_OPT,
    max_file_mb: int = MAX_FILE_OPT,
    report: Path | None = typer.Option(
        None,
        "--report",
        metavar="FILE.html",
        help="Also write the grade as a self-contained HTML report: each run's measured and "
        "expected busbw as a chart, its findings and the log lines behind them (replaced).",
    ),
    report_pdf: Path | None = typer.Option(
        None,
        "--report-pdf",
        metavar="FILE.pdf",
        help="Also print that report to PDF (replaced); needs headless Chromium.",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Grade measured nccl-tests output against what the fabric should deliver.

    Exit codes: 0 pass or warn, 3 a run failed, 2 bad input.
    """
    targets = None
    if report is not None or report_pdf is not None:
        from fabricplan.cli.report_out import output_targets

        targets = output_targets(report, report_pdf, as_json, ("--report", "--report-pdf"))
    triples = measured_runs(
        results,
        op=op,
        run_index=run_index,
        catalog=catalog_from(catalog, as_json),
        as_json=as_json,
        max_file_mb=max_file_mb,
        flags=ClusterFlags(
            gpu=gpu,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            fabric=fabric,
            hops=hops,
            sharp=sharp,
        ),
        scenario=scenario,
        overrides=set_,
    )
    graded = grade_runs(triples)
    worst = worst_verdict(graded)
    written = {}
    if targets is not None:
        systems = [m.system for m in triples]
        given = {
            "fabric graded against": ", ".join(dict.fromkeys(s.fabric for s in systems)),
            "GPU": ", ".join(dict.fromkeys(s.gpu for s in systems)),
            "--op": op,
            "--nodes": nodes,
            "--gpus-per-node": gpus_per_node,
            "--nics-per-node": nics_per_node,
            "--hops": hops,
            "--sharp": sharp,
            "--scenario": scenario,
            "--set": ", ".join(set_ or []),
            "--run": ", ".join(map(str, run_index or [])),
            "--catalog": catalog,
        }
        written = _write_report(graded, results, targets, as_json, given)
    if as_json:
        emit_json({**grade_document(graded), **({"report": written} if written else {})})
    else:
        for d in graded:
            _print_grade(d)
        if written:
            console.print()
        for path in written.values():
            console.print(f"wrote {path}", highlight=False)
    if worst == "fail":
        raise typer.Exit(EXIT_GRADE_FAIL)


def _write_report(
    graded: list[dict[str, Any]],
    results: Path,
    targets: Targets,
    as_json: bool,
    given: dict[str, Any],
) -> dict[str, str]:
    """The grade as an HTML report (and PDF) where ``targets`` say; where each went."""
    from fabricplan.cli.report_out import progress, write_reports
    from fabricplan.report.grade_report import grade_report_html

    settings = {k: str(v) for k, v in given.items() if v not in (None, False, "")}
    with progress(f"making the report on {results}"):
        html = grade_report_html(graded, source=results.name, settings=settings)
        return write_reports(html, targets, as_json)


def _print_grade(d: dict[str, Any]) -> None:
    style = VERDICT_STYLE[d["verdict"]]
    bw = d["bandwidth_ratio"]
    lat = d["latency_ratio"]
    console.print(
        f"\n[bold]{d['label']}[/] ({d['op']}): [{style} bold]{d['verdict'].upper()}[/] - "
        f"large-message busbw {fmt(bw * 100 if bw is not None else None)} % of expected"
        + (f", small-message time {lat:.2f}x expected" if lat is not None else ""),
        highlight=False,
    )
    table = Table(show_edge=False, pad_edge=False)
    for col in ("size", "busbw", "expected", "speed", "time (us)", "expected", "algo"):
        table.add_column(col, justify="left" if col == "algo" else "right", no_wrap=True)
    worst = set(d["worst"])
    for r in d["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        if r["size_bytes"] in worst and r["ratio"] is not None and r["ratio"] < PASS_BW_RATIO:
            ratio = f"[red]{ratio}[/]"
        table.add_row(
            human_size(r["size_bytes"]),
            _bandwidth(r["measured_busbw_GBps"]),
            _bandwidth(r["expected_busbw_GBps"]),
            ratio,
            f"{r['measured_time_us']:,.2f}",
            f"{r['expected_time_us']:,.2f}",
            r["expected_algorithm"],
        )
    print_table(table)
    for f in d["findings"]:
        colour = {"fail": "red", "warn": "yellow"}.get(f["severity"], "cyan")
        console.print(
            f"  [{colour}]{f['severity']}[/] {f['code']}: {f['message']}", highlight=False
        )
        for quote in f["evidence"]:
            console.print(f"      {quote}", highlight=False, markup=False)


def _bandwidth(gbps: float) -> str:
    """GB/s with the two decimals nccl-tests prints; three significant digits below 0.01, so
    an 8-byte row's 0.0004 GB/s is not shown as 0."""
    return f"{gbps:,.2f}" if gbps == 0 or gbps >= 0.01 else f"{gbps:.3g}"


SUITES = ("nccl-tests", "training", "held-back", "recipes", "claims", "packet-level", "envelope")


def validate_cmd(
    suite: str = typer.Option(
        "nccl-tests",
        "--suite",
        help="nccl-tests | training (Megatron SC'21) | held-back (other training runs) | "
        "recipes (runs of NVIDIA's published H100 and B200 performance recipes) | "
        "claims (the seeds' claims, as `fabricplan claims`) | packet-level (the congestion "
        "simulator against a packet-level simulator's recorded runs) | envelope (what the "
        "training runs of those three suites span per GPU, with the model's errors on them).",
    ),
    case: str | None = typer.Option(
        None, "--case", help="packet-level: one case only (e.g. perm128)."
    ),
    points: bool = typer.Option(False, "--points", help="Also print every data point."),
    congestion: str | None = CONGESTION_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Rerun every published measurement we compare with: predicted vs measured, and the error."""
    if suite not in SUITES:
        fail(f"--suite: {suite!r} is not allowed; use {', '.join(SUITES)}", as_json=as_json)
    if suite == "envelope":
        from fabricplan.cli.validated_range import show_envelope

        if congestion is not None:
            fail(
                "--congestion: the envelope reads the recorded errors; it runs no model",
                as_json=as_json,
            )
        show_envelope(as_json)
        return
    if suite == "packet-level":
        from fabricplan.cli.validate_packet import show_packet_level

        if congestion is not None:
            fail(
                "--congestion: the packet-level suite runs the flow-level simulator itself",
                as_json=as_json,
            )
        show_packet_level(case, as_json)
        return
    if suite != "nccl-tests":
        from fabricplan.cli.claims_cmd import claims_cmd
        from fabricplan.cli.validate_workload import show_training

        if suite == "claims":
            claims_cmd(group=None, claim_id=None, congestion=congestion, as_json=as_json)
        else:
            backend = backend_from(congestion, as_json)
            show_training(as_json, suite, backend=backend)
        return
    if congestion is not None:  # the collective model alone, as nccl-tests measures it
        fail(
            "--congestion: the nccl-tests suite uses no congestion backend; it applies to "
            "--suite training, held-back, recipes and claims",
            as_json=as_json,
        )
    from fabricplan.cli.validate_nccl import show_nccl_runs

    show_nccl_runs(points, as_json)
