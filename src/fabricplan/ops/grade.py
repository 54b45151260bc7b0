"""``grade``: measured nccl-tests runs paired with the cluster each ran on, and graded."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from fabricplan.catalog import Catalog, UnknownIdError
from fabricplan.catalog.providers import node_nics
from fabricplan.ops import BadInput
from fabricplan.ops.cluster import ClusterFlags, comm_system, fill_from_scenario

if TYPE_CHECKING:
    from fabricplan.collectives import CommSystem
    from fabricplan.nccltests import Run
    from fabricplan.nccltests.grade import Grade
    from fabricplan.nccltests.layout import Layout
    from fabricplan.scenario import Scenario

VERDICT_ORDER = {"pass": 0, "warn": 1, "fail": 2}


class Measured(NamedTuple):
    """A run of a log, the system it ran on, its collective and its shape from the log."""

    run: Run
    system: CommSystem
    op: str
    layout: Layout


def pick_runs(runs: list, wanted: list[int] | None) -> list:
    """The runs a command should use; --run N picks by position in the file."""
    if not wanted:
        return runs
    if max(wanted) > len(runs):
        raise BadInput(f"--run {max(wanted)}: the file has {len(runs)} run(s)")
    return [runs[i - 1] for i in wanted]


def forced_op(op: str | None, source: str) -> str | None:
    """The collective ``--op`` names, if any (the log's own is used otherwise)."""
    from fabricplan.collectives import resolve_op

    try:
        return resolve_op(op) if op else None
    except ValueError as exc:
        raise BadInput(f"{source}: {exc}") from None


def pair_runs(
    runs: list[Run],
    *,
    op: str | None,
    source: str,
    catalog: Catalog,
    flags: ClusterFlags,
    scenario: Scenario | None = None,
) -> list[Measured]:
    """Pair each run with the system it ran on and its collective (``op``: forced, else the
    log's, else all_reduce).

    Each run's ranks, nodes and GPUs per node come from its own log (one file may hold runs of
    several sizes); the nodes, GPUs per node and NICs per node given fill what it does not say,
    and a disagreement is kept as a warning on the run's layout. ``scenario`` fills the
    ``flags`` not given.
    """
    from fabricplan.nccltests.layout import resolve_layout

    scenario_nodes = None
    if scenario is not None:
        flags, scenario_nodes = fill_from_scenario(flags, scenario)
    gpu = flags.gpu or "h100"
    try:
        node = catalog.gpu(gpu).node
        # a fabric only rented comes on the NICs of the node types that rent it
        nics = node_nics(catalog, gpu, flags.fabric) if flags.fabric else node.nics_per_node
    except UnknownIdError as exc:
        raise BadInput(str(exc)) from None
    out = []
    for run in runs:
        layout = resolve_layout(
            run,
            nodes_flag=flags.nodes or scenario_nodes,
            gpn_flag=flags.gpus_per_node,
            nics_flag=flags.nics_per_node,
            reference_gpn=node.gpus_per_node,
            reference_nics=nics,
        )
        if layout.ranks == 1:
            raise BadInput(
                f"{source}: {run.label or f'run at line {run.first_line}'} has 1 rank: "
                "nccl-tests measured no communication, so there is nothing to compare"
            )
        shape = replace(
            flags,
            nodes=layout.nodes,
            gpus_per_node=layout.gpus_per_node,
            nics_per_node=layout.nics_per_node,
        )
        s = comm_system(shape, scenario=None, catalog=catalog)
        out.append(Measured(run, s, op or run.op or "all_reduce", layout))
    return out


def _grade_dict(g: Grade, index: int, label: str) -> dict[str, Any]:
    import numpy as np

    c = g.comparison
    ratio = c.speed_ratio
    return {
        "run": index,
        "label": label,
        "op": c.op,
        "verdict": g.verdict,
        "bandwidth_ratio": g.bandwidth_ratio,
        "latency_ratio": g.latency_ratio,
        "rows": [
            {
                "run": index,
                "size_bytes": int(c.sizes[i]),
                "measured_busbw_GBps": float(c.measured_busbw_GBps[i]),
                "expected_busbw_GBps": float(c.expected_busbw_GBps[i]),
                "ratio": float(ratio[i]) if np.isfinite(ratio[i]) else None,
                "measured_time_us": float(c.measured_time_us[i]),
                "expected_time_us": float(c.expected_time_us[i]),
                "expected_algorithm": c.algorithm[i],
            }
            for i in range(len(c.sizes))
        ],
        "worst": [int(c.sizes[i]) for i in g.worst()],
        "findings": [
            {
                "run": index,
                "code": f.code,
                "severity": f.severity,
                "message": f.message,
                "evidence": [str(q) for q in f.evidence],
            }
            for f in g.findings
        ],
    }


def grade_runs(measured: list[Measured]) -> list[dict[str, Any]]:
    """Each run graded, with what only the runs side by side show (nodes added, repeated runs)
    joined to the run it is about, and the layout it was graded with."""
    from fabricplan.nccltests.compare import compare
    from fabricplan.nccltests.findings import across_runs
    from fabricplan.nccltests.grade import grade

    grades = [
        (run, system, grade(run, system, compare(run, system, run_op), layout_warnings=lw.warnings))
        for run, system, run_op, lw in measured
    ]
    for k, extra in across_runs(grades).items():
        run, system, g = grades[k]
        verdict = "warn" if g.verdict == "pass" else g.verdict
        grades[k] = (run, system, replace(g, verdict=verdict, findings=g.findings + extra))
    graded = []
    for i, ((run, system, g), (*_, layout)) in enumerate(zip(grades, measured, strict=True), 1):
        d = _grade_dict(g, i, run.label or f"run {i} (line {run.first_line})")
        d["layout"] = {
            "nodes": system.nodes,
            "gpus_per_node": system.gpus_per_node,
            "nics_per_node": system.nics_per_node,
            "ranks": system.nranks,
            "read_from": layout.source or "flags",
        }
        graded.append(d)
    return graded


def worst_verdict(graded: list[dict[str, Any]]) -> str:
    return max(graded, key=lambda d: VERDICT_ORDER[d["verdict"]])["verdict"]


def grade_document(graded: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``grade --json`` prints."""
    return {
        "verdict": worst_verdict(graded),
        "rows": [r for d in graded for r in d["rows"]],
        "findings": [f for d in graded for f in d["findings"]],
        "runs": graded,
    }
