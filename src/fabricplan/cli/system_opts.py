"""Options shared by commands that describe one cluster: flags, or a scenario file, or both."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import typer

from fabricplan.catalog import Catalog, UnknownIdError
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import JSON_OPT as JSON_OPT
from fabricplan.cli.output import fail
from fabricplan.cli.scenario_cmd import load_or_fail
from fabricplan.collectives import CommSystem, build_system, resolve_op
from fabricplan.inputs import MIB, short_repr
from fabricplan.nccltests import ParseError, Run, parse_file
from fabricplan.nccltests.layout import Layout, resolve_layout
from fabricplan.nccltests.parse import DEFAULT_MAX_LOG_BYTES, MAX_SIZE_BYTES
from fabricplan.scenario import default_fabric
from fabricplan.scenario.models import MAX_GPUS
from fabricplan.topology.layout import MAX_OVERSUBSCRIPTION

# Ranges of the cluster flags, as the scenario file takes them: a node has at least one GPU, so
# no job has more nodes than the largest cluster has GPUs; a node has at most 1,024 GPUs and 64
# NICs (scenario.models). Switch hops: a three-tier Clos crosses 5, a dragonfly's Valiant route
# about 7; 16 is beyond any fabric and catches typos.
MAX_NODES = MAX_GPUS
MAX_GPUS_PER_NODE = 1024
MAX_NICS_PER_NODE = 64
MAX_HOPS = 16
# Sizes one table may list: 4,096 rows print in about 3 s (a table of 10,000 took 30); nccl-tests'
# usual sweep (1 B to 16 GiB by doubling) is 35.
MAX_SIZES = 4096
# Largest step between sizes: beyond it a sweep has one or two sizes.
MAX_FACTOR = 1024.0

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


def pick_runs(runs: list, wanted: list[int] | None, as_json: bool) -> list:
    """The runs a command should use; --run N picks by position in the file."""
    if not wanted:
        return runs
    if max(wanted) > len(runs):
        fail(f"--run {max(wanted)}: the file has {len(runs)} run(s)", as_json=as_json)
    return [runs[i - 1] for i in wanted]


_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# at most 20 digits before the point: 2**40 has 13
_SIZE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8', '1K', '64M', '16G' (binary units, as nccl-tests reads them) -> bytes, 1 B to 1 TiB."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{short_repr(text)} is not a size; use bytes or K, M, G, T (e.g. 64M)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1 or value != int(value):
        raise ValueError(f"{short_repr(text)} is not a whole number of bytes >= 1")
    if value > MAX_SIZE_BYTES:
        raise ValueError(
            f"{short_repr(text)} is over 1T ({MAX_SIZE_BYTES:,} bytes): more than any GPU holds"
        )
    return int(value)


def size_list(sizes: str | None, lo: str, hi: str, factor: float) -> list[int]:
    """The sizes of ``--sizes``, or of the sweep ``--min``, ``--max``, ``--factor``; at most
    MAX_SIZES of them."""
    if sizes:
        items = [s for s in sizes.split(",") if s.strip()]
        if len(items) > MAX_SIZES:
            raise ValueError(f"--sizes lists {len(items):,} sizes; at most {MAX_SIZES:,}")
        return [parse_size(s) for s in items]
    start, stop = parse_size(lo), parse_size(hi)
    if stop < start:
        raise ValueError(f"--max ({hi}) is below --min ({lo})")
    if not (math.isfinite(factor) and 1 < factor <= MAX_FACTOR):
        raise ValueError(f"--factor must be above 1 and at most {MAX_FACTOR:g}, got {factor:g}")
    count = math.floor(math.log(stop / start) / math.log(factor) + 1e-9) + 1
    if count > MAX_SIZES:
        raise ValueError(
            f"--min {lo} to --max {hi} by --factor {factor:g} makes {count:,} sizes; at most "
            f"{MAX_SIZES:,} (raise --factor)"
        )
    out, s = [], float(start)
    while s <= stop:
        out.append(int(s))
        s *= factor
    return out


def parse_ratios(text: str) -> tuple[float, float]:
    """'2' -> leaf 2, spine 1; '2,1.5' -> leaf 2, spine 1.5; each from 1 (non-blocking) to
    MAX_OVERSUBSCRIPTION."""
    parts = [p.strip() for p in text.split(",")]
    usage = f"--oversubscription {short_repr(text)}: give a number or LEAF,SPINE"
    try:
        values = [float(p) for p in parts if p]
    except ValueError:
        raise ValueError(usage) from None
    if not 1 <= len(values) <= 2:
        raise ValueError(usage)
    for v in values:
        if not (math.isfinite(v) and 1 <= v <= MAX_OVERSUBSCRIPTION):
            raise ValueError(
                f"--oversubscription {short_repr(text)}: each ratio must be from 1 "
                f"(non-blocking) to {MAX_OVERSUBSCRIPTION:g}; below 1 would mean more uplinks "
                "than node ports, which buys nothing"
            )
    return values[0], values[1] if len(values) == 2 else 1.0


def _fill_from_scenario(flags: dict[str, Any], scenario: Path, overrides: list[str] | None,
                        catalog: Catalog, as_json: bool) -> tuple[dict[str, Any], int]:  # fmt: skip
    """``flags`` (gpu, gpus_per_node, nics_per_node, fabric) with the scenario's cluster where a
    flag is not given, and the scenario's node count. The scenario's topology design comes
    along, its switch only with its own fabric (``switch``; None: the fabric's default)."""
    c = load_or_fail(scenario, overrides, as_json, catalog).cluster
    cluster = {"gpu": c.gpu, "gpus_per_node": c.gpus_per_node, "nics_per_node": c.nics_per_node,
               "fabric": c.fabrics[0]}  # fmt: skip
    filled = {**flags, **{k: flags.get(k) or cluster[k] for k in cluster}}
    t = c.topology
    return {**filled, "switch": c.switch_for(filled["fabric"]), "design": t.design,
            "oversubscription": t.oversubscription}, c.nodes  # fmt: skip


def system_from(
    *,
    gpu: str | None,
    nodes: int | None,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    fabric: str | None,
    hops: int | None,
    sharp: bool,
    scenario: Path | None,
    overrides: list[str] | None,
    catalog: Catalog,
    as_json: bool,
    switch: str | None = None,
    design: str = "rail-optimized",
    oversubscription: float = 1.0,
) -> CommSystem:
    """Flags win over the scenario; the scenario wins over catalog defaults."""
    if scenario is not None:
        flags = {"gpu": gpu, "gpus_per_node": gpus_per_node, "nics_per_node": nics_per_node,
                 "fabric": fabric}  # fmt: skip
        filled, scenario_nodes = _fill_from_scenario(flags, scenario, overrides, catalog, as_json)
        gpu, gpus_per_node, nics_per_node, fabric = (filled[k] for k in flags)
        switch, design = switch or filled["switch"], filled["design"]
        oversubscription = filled["oversubscription"]
        nodes = nodes or scenario_nodes
    if nodes is None:
        fail("give --nodes (or --scenario)", as_json=as_json)
    try:
        gpu = gpu or "h100"
        return build_system(
            gpu, nodes, fabric or default_fabric(catalog, gpu, "infiniband"),
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node, hops=hops, sharp=sharp, switch=switch, design=design,
            oversubscription=oversubscription, catalog=catalog,
        )  # fmt: skip
    except UnknownIdError as exc:
        fail(str(exc), as_json=as_json)


class Measured(NamedTuple):
    """A run of RESULTS, the system it ran on, its collective and its shape from the log."""

    run: Run
    system: CommSystem
    op: str
    layout: Layout


def measured_runs(
    results: Path,
    *,
    op: str | None,
    run_index: list[int] | None,
    catalog: Catalog,
    as_json: bool,
    max_file_mb: int = DEFAULT_MAX_LOG_BYTES // MIB,
    **system: Any,
) -> list[Measured]:
    """Parse RESULTS and pair each run with the system it ran on and its collective.

    Each run's ranks, nodes and GPUs per node come from its own log (one file may hold runs of
    several sizes); --nodes, --gpus-per-node and --nics-per-node fill what it does not say, and
    a disagreement is kept as a warning on the run's layout.
    """
    try:
        parsed = parse_file(results, max_bytes=max_file_mb * MIB, raise_with="--max-file-mb")
        runs = pick_runs(parsed, run_index, as_json)
        forced_op = resolve_op(op) if op else None
    except (ParseError, ValueError) as exc:
        fail(f"{results}: {exc}", as_json=as_json)
    out = []
    scenario_nodes = None
    if system.get("scenario") is not None:  # read the scenario once, not once per run
        path, overrides = system["scenario"], system.get("overrides")
        system, scenario_nodes = _fill_from_scenario(system, path, overrides, catalog, as_json)
        system["scenario"] = None
    try:
        node = catalog.gpu(system.get("gpu") or "h100").node
    except UnknownIdError as exc:
        fail(str(exc), as_json=as_json)
    for run in runs:
        layout = resolve_layout(
            run,
            nodes_flag=system.get("nodes") or scenario_nodes,
            gpn_flag=system.get("gpus_per_node"),
            nics_flag=system.get("nics_per_node"),
            reference_gpn=node.gpus_per_node,
            reference_nics=node.nics_per_node,
        )
        if layout.ranks == 1:
            fail(
                f"{results}: {run.label or f'run at line {run.first_line}'} has 1 rank: "
                "nccl-tests measured no communication, so there is nothing to compare",
                as_json=as_json,
            )
        shape = {
            "nodes": layout.nodes,
            "gpus_per_node": layout.gpus_per_node,
            "nics_per_node": layout.nics_per_node,
        }
        s = system_from(**{**system, **shape}, catalog=catalog, as_json=as_json)
        out.append(Measured(run, s, forced_op or run.op or "all_reduce", layout))
    return out
