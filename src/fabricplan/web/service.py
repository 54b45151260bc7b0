"""Each API operation: a request in, the document the command's ``--json`` prints out.

These compose :mod:`fabricplan.ops` exactly as the commands do; bad input is raised as
:class:`~fabricplan.ops.BadInput` (or the model's own WorkloadError and CostError, which the
commands also report as bad input), for the API to answer 422.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from fabricplan.ops import BadInput
from fabricplan.ops.scenario import check_document, scenario_from

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.scenario import Scenario
    from fabricplan.web.models import (
        AdviseRequest,
        CollectiveRequest,
        GradeOptions,
        ReportRequest,
        ScenarioRequest,
        StepRequest,
        TopologyRequest,
    )

# How messages name the scenario and the log a request sent (a file name on the command line).
SCENARIO_ORIGIN = "scenario"
LOG_SOURCE = "log"


def _scenario(text: str, overrides: list[str], cat: Catalog) -> Scenario:
    return scenario_from(text, overrides, cat, origin=SCENARIO_ORIGIN)


def _backend(name: str | None) -> NetworkBackend:
    from fabricplan.congestion.network_backend import DEFAULT_BACKEND, backend

    return DEFAULT_BACKEND if name is None else backend(name)


def check(req: ScenarioRequest, cat: Catalog) -> dict[str, Any]:
    """`scenario check --json`."""
    return check_document(_scenario(req.scenario, req.set, cat), cat)


def step(req: StepRequest, cat: Catalog) -> list[dict[str, Any]]:
    """`step --json`."""
    from fabricplan.ops.step import step_fabrics, step_results

    backend = _backend(req.congestion)
    sc = _scenario(req.scenario, req.set, cat)
    return step_results(sc, cat, step_fabrics(sc, cat, req.fabric), backend)


def advise(req: AdviseRequest, cat: Catalog) -> dict[str, Any]:
    """`advise --json`."""
    from fabricplan.advise import advise as advise_scenario

    backend = _backend(req.congestion)
    sc = _scenario(req.scenario, req.set, cat)
    a = advise_scenario(sc, cat, backend=backend, seed=req.seed, break_even=req.break_even)
    return a.to_dict()


def report(req: ReportRequest, cat: Catalog) -> str:
    """`report`: the advice as one self-contained HTML page."""
    from fabricplan.ops.scenario import text_with_overrides
    from fabricplan.report import scenario_report_html

    backend = _backend(req.congestion)
    sc = _scenario(req.scenario, req.set, cat)
    text = text_with_overrides(req.scenario, req.set)
    return scenario_report_html(sc, cat, backend=backend, seed=req.seed, scenario_text=text)


def collective(req: CollectiveRequest, cat: Catalog) -> dict[str, Any]:
    """`collective --json`."""
    from fabricplan.ops.cluster import ClusterFlags, comm_system
    from fabricplan.ops.collective import collective_table, op_and_sizes

    op, sizes = op_and_sizes(req.op, req.sizes, req.min, req.max, req.factor)
    sc = _scenario(req.scenario, req.set, cat) if req.scenario is not None else None
    flags = ClusterFlags(
        gpu=req.gpu,
        nodes=req.nodes,
        gpus_per_node=req.gpus_per_node,
        nics_per_node=req.nics_per_node,
        fabric=req.fabric,
        hops=req.hops,
        sharp=req.sharp,
    )
    system = comm_system(flags, scenario=sc, catalog=cat)
    table = collective_table(
        system,
        op,
        sizes,
        algo=req.algo,
        proto=req.proto,
        min_ctas=req.min_ctas,
        max_ctas=req.max_ctas,
    )
    return table.to_dict()


def topology(req: TopologyRequest, cat: Catalog) -> dict[str, Any]:
    """`topology --json`."""
    from fabricplan.ops.topology import design_fabrics, topology_document

    sc = _scenario(req.scenario, req.set, cat) if req.scenario is not None else None
    designs = design_fabrics(
        gpus=req.gpus,
        gpu=req.gpu,
        design=req.design,
        fabric=req.fabric,
        switch=req.switch,
        oversubscription=req.oversubscription,
        gpus_per_node=req.gpus_per_node,
        nics_per_node=req.nics_per_node,
        cable_length=req.cable_length,
        compatible_optics=req.compatible_optics,
        scenario=sc,
        catalog=cat,
    )
    return topology_document(designs)


def grade(log: bytes, opts: GradeOptions, cat: Catalog) -> dict[str, Any]:
    """`grade --json` of a log's bytes (text or nccl-tests' -J JSON)."""
    from fabricplan.inputs import CappedLines
    from fabricplan.nccltests import ParseError
    from fabricplan.nccltests.parse import parse_stream
    from fabricplan.ops.cluster import ClusterFlags
    from fabricplan.ops.grade import forced_op, grade_document, grade_runs, pair_runs, pick_runs

    # read as the command reads a file (the body's size was bounded before it arrived)
    lines = CappedLines(io.BytesIO(log), len(log), "the log")
    try:
        parsed = parse_stream(lines)
    except ParseError as exc:
        raise BadInput(f"{LOG_SOURCE}: {exc}") from None
    runs = pick_runs(parsed, opts.run)
    op = forced_op(opts.op, LOG_SOURCE)
    sc = _scenario(opts.scenario, opts.set, cat) if opts.scenario is not None else None
    measured = pair_runs(
        runs,
        op=op,
        source=LOG_SOURCE,
        catalog=cat,
        scenario=sc,
        flags=ClusterFlags(
            gpu=opts.gpu,
            nodes=opts.nodes,
            gpus_per_node=opts.gpus_per_node,
            nics_per_node=opts.nics_per_node,
            fabric=opts.fabric,
            hops=opts.hops,
            sharp=opts.sharp,
        ),
    )
    return grade_document(grade_runs(measured))
