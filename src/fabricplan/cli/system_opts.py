"""Options shared by commands that describe one cluster: flags, or a scenario file, or both."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricplan.catalog import Catalog
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import JSON_OPT as JSON_OPT
from fabricplan.cli.output import fail, fail_with
from fabricplan.cli.scenario_cmd import load_or_fail
from fabricplan.collectives import CommSystem
from fabricplan.inputs import MIB
from fabricplan.nccltests import ParseError, parse_file
from fabricplan.nccltests.parse import DEFAULT_MAX_LOG_BYTES
from fabricplan.ops import BadInput
from fabricplan.ops.cluster import (
    MAX_GPUS_PER_NODE,
    MAX_HOPS,
    MAX_NICS_PER_NODE,
    MAX_NODES,
    ClusterFlags,
    comm_system,
)
from fabricplan.ops.cluster import parse_size as parse_size  # where tests have found it
from fabricplan.ops.grade import Measured, forced_op, pair_runs, pick_runs

GPU_OPT = typer.Option(None, "--gpu", help="GPU id (default h100, or the scenario's).")
NODES_OPT = typer.Option(None, "--nodes", callback=within(1, MAX_NODES), help="Nodes in the job.")
GPN_OPT = typer.Option(
    None,
    "--gpus-per-node",
    callback=within(1, MAX_GPUS_PER_NODE),
    help="Default: the GPU's reference node.",
)
NICS_OPT = typer.Option(
    None,
    "--nics-per-node",
    callback=within(1, MAX_NICS_PER_NODE),
    help="Default: the GPU's reference node.",
)
FABRIC_OPT = typer.Option(
    None,
    "--fabric",
    help="Fabric id (default: the scenario's first, else InfiniBand at the GPU's NIC speed).",
)
HOPS_OPT = typer.Option(
    None,
    "--hops",
    callback=within(1, MAX_HOPS),
    help="Switch hops between nodes (default from radix).",
)
SWITCH_OPT = typer.Option(None, "--switch", help="Switch id (default per fabric).")
SHARP_OPT = typer.Option(False, "--sharp", help="Enable in-network reduction (InfiniBand SHARP).")
SCENARIO_OPT = typer.Option(None, "--scenario", help="Take the cluster from a scenario file.")
SET_OPT = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a scenario field.")
RUN_OPT = typer.Option(
    None, "--run", callback=within(1), help="Only run N of the file (1-based; repeatable)."
)
# Most of a log a command reads, in MiB: the parser's default cap; at most 4 GiB, as far as a
# log is worth streaming on a workstation (about 4 MB a second, 300 bytes a kept row).
MAX_FILE_MB_LIMIT = 4096
MAX_FILE_OPT = typer.Option(
    DEFAULT_MAX_LOG_BYTES // MIB,
    "--max-file-mb",
    callback=within(1, MAX_FILE_MB_LIMIT),
    help="Refuse a results file larger than this (MiB).",
)


def system_from(
    flags: ClusterFlags,
    *,
    scenario: Path | None,
    overrides: list[str] | None,
    catalog: Catalog,
    as_json: bool,
) -> CommSystem:
    """Flags win over the scenario file; the scenario wins over catalog defaults."""
    sc = load_or_fail(scenario, overrides, as_json, catalog) if scenario is not None else None
    try:
        return comm_system(flags, scenario=sc, catalog=catalog)
    except BadInput as exc:
        fail_with(exc, as_json)


def measured_runs(
    results: Path,
    *,
    op: str | None,
    run_index: list[int] | None,
    catalog: Catalog,
    as_json: bool,
    max_file_mb: int = DEFAULT_MAX_LOG_BYTES // MIB,
    flags: ClusterFlags,
    scenario: Path | None,
    overrides: list[str] | None,
) -> list[Measured]:
    """Parse RESULTS and pair each run with the system it ran on and its collective
    (:func:`fabricplan.ops.grade.pair_runs`): the cluster ``flags``, filled from the
    ``scenario`` file (with its ``overrides``) where not given."""
    try:
        parsed = parse_file(results, max_bytes=max_file_mb * MIB, raise_with="--max-file-mb")
    except ParseError as exc:
        fail(f"{results}: {exc}", as_json=as_json)
    try:
        runs = pick_runs(parsed, run_index)
        op = forced_op(op, str(results))
    except BadInput as exc:
        fail_with(exc, as_json)
    sc = None
    if scenario is not None:  # read the scenario once, not once per run
        sc = load_or_fail(scenario, overrides, as_json, catalog)
    try:
        return pair_runs(
            runs, op=op, source=str(results), catalog=catalog, flags=flags, scenario=sc
        )
    except BadInput as exc:
        fail_with(exc, as_json)
