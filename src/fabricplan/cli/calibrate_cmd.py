"""``fabricplan calibrate``: fit a fabric to measured nccl-tests output, write a definition."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from fabricplan.catalog import entries_to_toml
from fabricplan.catalog.models import ID_PATTERN
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.output import console, emit_json, err_console, fail, kv_table
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
    measured_runs,
)
from fabricplan.ops.cluster import ClusterFlags
from fabricplan.ops.grade import Measured


def calibrate_cmd(
    results: Path = typer.Argument(..., metavar="RESULTS", help="nccl-tests output to fit."),
    out: str = typer.Option(
        ...,
        "--out",
        help="Where to write the fabric definition (TOML); - for standard output.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace --out if it exists, and fit runs grade finds broken (GPUDirect off, "
        "TCP fallback, fewer NICs than the node has).",
    ),
    new_id: str | None = typer.Option(
        None, "--id", help="Id of the new fabric (default FABRIC-calibrated)."
    ),
    op: str | None = typer.Option(None, "--op", help="Collective, if the log does not say."),
    gpu: str | None = GPU_OPT,
    nodes: int | None = NODES_OPT,
    gpus_per_node: int | None = GPN_OPT,
    nics_per_node: int | None = NICS_OPT,
    fabric: str | None = FABRIC_OPT,
    hops: int | None = HOPS_OPT,
    scenario: Path | None = SCENARIO_OPT,
    set_: list[str] | None = SET_OPT,
    run_index: list[int] | None = RUN_OPT,
    catalog: Path | None = CATALOG_OPT,
    max_file_mb: int = MAX_FILE_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Fit NIC goodput and network latency to measured runs; use the result with --catalog."""
    from fabricplan.cli.outfile import STDOUT, OutFileError, check_target, write_out
    from fabricplan.inputs import short_repr

    if new_id is not None and not re.match(ID_PATTERN, new_id):
        fail(
            f"--id {short_repr(new_id)}: an id is lower-case letters, digits, dots and dashes, "
            "starting with a letter or digit (e.g. roce-400g-site-a)",
            as_json=as_json,
        )
    try:
        if out == STDOUT and as_json:
            raise OutFileError("--out -: standard output carries the TOML; drop --json")
        if out != STDOUT:
            check_target(out, force=force)
    except OutFileError as exc:
        fail(str(exc), as_json=as_json)
    cat = catalog_from(catalog, as_json)
    measured = measured_runs(
        results,
        op=op,
        run_index=run_index,
        catalog=cat,
        as_json=as_json,
        max_file_mb=max_file_mb,
        flags=ClusterFlags(
            gpu=gpu,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            fabric=fabric,
            hops=hops,
            sharp=False,
        ),
        scenario=scenario,
        overrides=set_,
    )
    # a single node never touches the fabric
    multi = [m for m in measured if m.system.nodes > 1]
    if not multi:
        fail("no multi-node run to fit: the fabric is only used across nodes", as_json=as_json)
    _refuse_broken(multi, force=force, as_json=as_json)
    triples = [(m.run, m.system, m.op) for m in multi]
    base = cat.fabric(triples[0][1].fabric)
    ident = f"{base.id}-calibrated" if new_id is None else new_id
    from fabricplan.nccltests.calibrate import calibrate  # scipy.optimize: load only when fitting

    try:
        fit = calibrate(
            triples, base, new_id=ident, source=f"{results.name}, {len(triples)} run(s)"
        )
    except ValueError as exc:
        fail(str(exc), as_json=as_json)
    toml = entries_to_toml(
        [fit.fabric], header=f"Written by fabricplan calibrate from {results.name}."
    )
    try:
        write_out(out, toml, force=force)
    except OutFileError as exc:
        fail(str(exc), as_json=as_json)
    per_channel = fit.bandwidth == "channel"
    summary = {
        "fabric": fit.fabric.id,
        "base": base.id,
        "out": str(out),
        "points": fit.points,
        # what was fitted: a NIC's goodput, or one NCCL channel's where the plugin limits them
        "bandwidth_fitted": fit.bandwidth,
        "nic_goodput_GBps": fit.nic_GBps if fit.nic_identified and not per_channel else None,
        "channel_goodput_GBps": fit.nic_GBps if fit.nic_identified and per_channel else None,
        "net_step_latency_delta_us": fit.step_delta_us if fit.latency_identified else None,
        "rdma_latency_us": fit.fabric.rdma_latency_us.nominal,
        "nic_goodput_sigma_GBps": None if per_channel else fit.nic_sigma_GBps,
        "channel_goodput_sigma_GBps": fit.nic_sigma_GBps if per_channel else None,
        "net_step_latency_delta_sigma_us": fit.step_delta_sigma_us,
        "at_bounds": list(fit.at_bounds),
        "rms_log_error_before": fit.rms_log_error_before,
        "rms_log_error_after": fit.rms_log_error_after,
    }
    if as_json:
        emit_json(summary)
        return
    # with --out -, the TOML is standard output: the summary goes beside it, to the errors'
    shown = err_console if out == STDOUT else console
    shown.print(
        kv_table(
            f"Calibrated {base.id} -> {fit.fabric.id}",
            [
                (
                    "goodput per NCCL channel" if fit.bandwidth == "channel" else "NIC goodput",
                    f"{fit.nic_GBps:.2f}{_pm(fit.nic_sigma_GBps)} GB/s"
                    if fit.nic_identified
                    else f"not identifiable from these sizes; kept {fit.nic_GBps:g} GB/s",
                ),
                (
                    "network step latency",
                    f"{fit.step_delta_us:+.2f}{_pm(fit.step_delta_sigma_us)} us vs InfiniBand NDR"
                    if fit.latency_identified
                    else "not identifiable from these sizes; kept the catalog's",
                ),
                *(("at a bound", hit) for hit in fit.at_bounds),
                (
                    "fit",
                    f"{fit.points} sizes; rms log-time error {fit.rms_log_error_before:.3f} -> "
                    f"{fit.rms_log_error_after:.3f}",
                ),
                ("written", f"{out}  (use: --catalog {out} --fabric {fit.fabric.id})"),
            ],
        )
    )


def _pm(sigma: float | None) -> str:
    """' +/- 0.42' (one standard error), or nothing when there is none."""
    return "" if sigma is None else f" +/- {sigma:.2g}"


def _refuse_broken(measured: list[Measured], *, force: bool, as_json: bool) -> None:
    """Refuse runs grade finds broken: rows that cannot be real always, and a setup that did
    not measure the fabric (GPUDirect off, TCP fallback, NICs missing) unless --force."""
    from fabricplan.nccltests.compare import compare
    from fabricplan.nccltests.grade import SETUP_FAULTS, grade

    problems, impossible = [], False
    for i, m in enumerate(measured, start=1):
        g = grade(m.run, m.system, compare(m.run, m.system, m.op))
        for f in g.findings:
            if f.code in SETUP_FAULTS:
                impossible |= f.code == "impossible_rows"
                quoted = "".join(f"\n    {q}" for q in f.evidence)
                problems.append(
                    f"run {i} ({m.run.label or f'line {m.run.first_line}'}): "
                    f"{f.code}: {f.message}{quoted}"
                )
    if problems and (impossible or not force):
        hint = (
            ""
            if impossible
            else "\nA fabric fitted to these runs would describe the fault, not the fabric; "
            "fix the setup, or pass --force to fit them anyway."
        )
        fail("grade finds the log broken:\n  " + "\n  ".join(problems) + hint, as_json=as_json)
