"""``fabricplan congestion``: what collisions, incast and flow control do to a collective."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fabricplan.catalog import UnknownIdError
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.output import console, emit_json, err_console, fail, kv_table, progress_bar
from fabricplan.cli.system_opts import (
    GPN_OPT,
    JSON_OPT,
    NICS_OPT,
    SWITCH_OPT,
)
from fabricplan.congestion.budget import (
    DEFAULT_MEMORY_BUDGET_GB,
    DEFAULT_TIME_BUDGET_S,
    MAX_MEMORY_BUDGET_GB,
    MAX_TIME_BUDGET_S,
    estimate_case,
    over_budget,
)
from fabricplan.congestion.case import DEFAULT_JITTER_US, DEFAULT_QPS, MAX_SEEDS, Case
from fabricplan.congestion.dcqcn import qualities
from fabricplan.congestion.flowfile import read_flows
from fabricplan.congestion.network import ROUTINGS
from fabricplan.congestion.settings import CONGESTION_CONTROLS, FlowSettings
from fabricplan.congestion.simulate import run_case
from fabricplan.congestion.traffic import PATTERNS, PLACEMENTS
from fabricplan.ops.cluster import parse_ratios, parse_size
from fabricplan.scenario import default_fabric
from fabricplan.scenario.models import MAX_GPUS
from fabricplan.topology import DESIGNS

if TYPE_CHECKING:
    from rich.progress import Progress

# A progress bar is shown when a run is expected to take longer than this (seconds): after the
# first seed, or from the start when there are many seeds.
PROGRESS_AFTER_S = 2.0
PROGRESS_MIN_SEEDS = 10


def _kb(flag: str, what: str) -> float | None:
    """A flow-control queue setting; unset keeps the RoCE quality preset's."""
    return typer.Option(None, flag, help=f"{what} (KB; default: the RoCE quality's preset).")


def congestion(
    gpu: str = typer.Option("h100", "--gpu", help="GPU id."),
    gpus: int = typer.Option(1024, "--gpus", callback=within(2, MAX_GPUS), help="GPUs in the job."),
    fabric: str | None = typer.Option(
        None, "--fabric", help="Fabric id (default: RoCE at the GPU's NIC speed)."
    ),
    roce_quality: str = typer.Option(
        "tuned", "--roce-quality", help=f"RoCE tuning: {', '.join(qualities())}."
    ),
    design: str = typer.Option("fat-tree", "--design", help=f"One of: {', '.join(DESIGNS)}."),
    oversubscription: str = typer.Option(
        "1", "--oversubscription", help="Leaf down:up ratio, or LEAF,SPINE."
    ),
    routing: str | None = typer.Option(
        None, "--routing", help=f"{' | '.join(ROUTINGS)} (default: the fabric's own)."
    ),
    pattern: str = typer.Option("ring-allreduce", "--pattern", help=" | ".join(PATTERNS)),
    size: str = typer.Option("1G", "--size", help="Collective size in bytes (K/M/G suffixes)."),
    seeds: int = typer.Option(
        10, "--seeds", callback=within(1, MAX_SEEDS), help="Monte Carlo runs."
    ),
    placement: str = typer.Option("contiguous", "--placement", help=" | ".join(PLACEMENTS)),
    cluster_gpus: int | None = typer.Option(
        None,
        "--cluster-gpus",
        callback=within(2, MAX_GPUS),
        help="GPUs in the whole fabric (default: the job, x2 if fragmented).",
    ),
    background: float = typer.Option(
        0.0, "--background", help="Other tenants' load on idle nodes' NICs, 0 to 1."
    ),
    qps: int = typer.Option(
        DEFAULT_QPS, "--qps", help="Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION)."
    ),
    jitter_us: float = typer.Option(
        DEFAULT_JITTER_US, "--jitter-us", help="Mean start skew between nodes (us)."
    ),
    gpus_per_node: int | None = GPN_OPT,
    nics_per_node: int | None = NICS_OPT,
    switch: str | None = SWITCH_OPT,
    seed: int = typer.Option(0, "--seed", help="Random seed of the first run."),
    shift: int | None = typer.Option(
        None, "--shift", help="permutation: NIC i sends to NIC i + K (default: a random one)."
    ),
    flows: Path | None = typer.Option(
        None,
        "--flows",
        help="CSV of flows 'src,dst,bytes[,start_us]' (NICs from 0 in host order); sets the "
        "pattern to 'flows'.",
    ),
    dragonfly_routing: str = typer.Option(
        "minimal",
        "--dragonfly-routing",
        help="Between dragonfly groups: minimal | valiant | ugal (UGAL-G in fluid form).",
    ),
    polarized: bool = typer.Option(
        False, "--hash-polarization", help="ECMP hashes alike at every tier (polarization)."
    ),
    pfc_xoff_kb: float | None = _kb("--pfc-xoff-kb", "PFC pause threshold per ingress port"),
    pfc_xon_kb: float | None = _kb("--pfc-xon-kb", "PFC resume threshold"),
    buffer_kb: float | None = _kb("--buffer-kb", "Queue one egress port may hold"),
    ecn_kmin_kb: float | None = _kb("--ecn-kmin-kb", "ECN marking starts"),
    ecn_kmax_kb: float | None = _kb("--ecn-kmax-kb", "ECN marks every packet"),
    congestion_control: str | None = typer.Option(
        None,
        "--congestion-control",
        help=f"{' | '.join(CONGESTION_CONTROLS)} (none: PFC only; default: preset).",
    ),
    time_budget_s: float = typer.Option(
        DEFAULT_TIME_BUDGET_S,
        "--time-budget-s",
        help="Refuse a case estimated to run longer (seconds).",
    ),
    memory_budget_gb: float = typer.Option(
        DEFAULT_MEMORY_BUDGET_GB,
        "--memory-budget-gb",
        help="Refuse a case estimated to need more memory (GB).",
    ),
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Simulate a collective under congestion: ECMP collisions, incast, PFC/DCQCN or credits.

    Prints ideal vs simulated time (p50, p99), slowdown, busbw, paused time, victim flows, the
    hottest links and small-message latency under load.
    """
    cat = catalog_from(catalog, as_json)
    try:
        size_bytes = float(parse_size(size))
        leaf, spine = parse_ratios(oversubscription)
        fabric = fabric or default_fabric(cat, gpu, "roce")
        flow_list = read_flows(flows) if flows is not None else None
        if flow_list is not None:
            pattern = "flows"
        settings = FlowSettings(
            pfc_xoff_kb, pfc_xon_kb, buffer_kb, ecn_kmin_kb, ecn_kmax_kb, congestion_control
        )
        case = Case(
            gpu=gpu,
            gpus=gpus,
            fabric=fabric,
            design=design,
            oversubscription=leaf,
            spine_oversubscription=spine,
            routing=routing,
            roce_quality=roce_quality,
            pattern=pattern,
            size_bytes=size_bytes,
            seeds=seeds,
            placement=placement,
            cluster_gpus=cluster_gpus,
            background=background,
            qps=qps,
            jitter_us=jitter_us,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            switch=switch,
            seed=seed,
            flow=settings,
            shift=shift,
            flows=flow_list,
            polarized=polarized,
            dragonfly=dragonfly_routing,
        )
        case.check()
        _check_budgets(case, cat, time_budget_s, memory_budget_gb)
        result = _run_with_progress(case, cat, quiet=as_json)
    except (UnknownIdError, ValueError) as exc:  # CaseError, TopologyError: bad input too
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json(result.to_dict())
        return
    r = result
    lat = r.latency_us
    what = (
        f"{len(flow_list):,} flows from {flow_list.name}"
        if flow_list is not None
        else f"{pattern} of {size}"
    )
    p50, p99 = r.p50_time_us, r.p99_time_us
    busbw = (
        []
        if r.busbw_ideal is None
        else [("busbw ideal / p50 (GB/s)", (r.busbw_ideal, r.busbw_GBps(p50)))]
    )
    fct = r.fct_us
    console.print(
        kv_table(
            f"{what} on {gpus} x {gpu}, {fabric} ({r.routing}, {r.flow_control}), {design}",
            [
                ("nodes", r.nodes),
                ("ideal time (us)", r.ideal_time_us),
                ("p50 / p99 time (us)", (p50, p99)),
                ("p50 / p99 slowdown", (p50 / r.ideal_time_us, p99 / r.ideal_time_us)),
                ("network transfer slowdown (p50)", r.network_slowdown_p50),
                *busbw,
                ("paused time (share of job links)", r.paused_fraction),
                ("victim flows (per run)", r.victim_flows),
                *(
                    [("resent after flowlet moves (MB, median per run)", r.resent_bytes / 1e6)]
                    if r.resent_bytes
                    else []
                ),
                (
                    "flow completion p50 / p99 / max (us)",
                    (fct.get("p50"), fct.get("p99"), fct.get("max")),
                ),
                (
                    "small-message latency p50 / p99 / p99.9 (us)",
                    (lat["p50"], lat["p99"], lat["p99.9"]),
                ),
                ("seeds", len(r.times_us)),
            ],
        )
    )
    if r.hottest_links:
        console.print(
            kv_table(
                "hottest links (utilisation)",
                [
                    (f"{h['link']} {h['from']} -> {h['to']}", h["utilisation"])
                    for h in r.hottest_links
                ],
            )
        )
    console.print("[dim]not modelled: " + "; ".join(r.not_modelled) + "[/]", highlight=False)


def _check_budgets(case: Case, cat, time_budget_s: float, memory_budget_gb: float) -> None:
    """Refuse, before any work, a case whose estimate is over a budget (ValueError)."""
    budgets = (
        ("--time-budget-s", time_budget_s, MAX_TIME_BUDGET_S),
        ("--memory-budget-gb", memory_budget_gb, MAX_MEMORY_BUDGET_GB),
    )
    for flag, value, most in budgets:
        if not (math.isfinite(value) and 0 < value <= most):
            raise ValueError(f"{flag}: {value:g} is not allowed; above 0 and at most {most:,g}")
    reason = over_budget(estimate_case(case, cat), time_budget_s, memory_budget_gb)
    if reason:
        raise ValueError(reason)


def _run_with_progress(case: Case, cat, quiet: bool):
    """Run the case; a progress bar on stderr once it is expected to pass PROGRESS_AFTER_S:
    from the start with many seeds, or after a first seed that took long enough."""
    import time

    from fabricplan.congestion.case import CaseResult

    if quiet:
        return run_case(case, cat)
    if case.seeds == 1:  # nothing to count: a spinner, gone when the run ends
        with err_console.status("simulating one seed"):
            return run_case(case, cat)
    bar: Progress | None = None
    task = None
    t0 = time.perf_counter()
    done = 0

    def tick(n: int) -> None:
        nonlocal bar, task, done
        done += n
        elapsed = time.perf_counter() - t0
        if bar is None and elapsed / done * case.seeds > PROGRESS_AFTER_S:
            bar = progress_bar()
            bar.start()
            task = bar.add_task("simulating", total=case.seeds, completed=done)
        elif bar is not None and task is not None:
            bar.advance(task, n)

    try:
        result: CaseResult = run_case(case, cat, tick)
    finally:
        if bar is not None:
            bar.stop()
    return result
