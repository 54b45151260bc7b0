"""What a congestion case will cost before it runs: an estimate of its time and peak memory,
and the budgets a command refuses to exceed.

The figures are fitted to runs of ``fabricplan congestion`` (one seed and several, 1,024 to
131,072 GPUs, fat-tree) on a 2-core machine; each constant is the highest seen for its pattern,
so the estimate errs long. A faster machine finishes early; the refusal names the budget option
that raises it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricplan.catalog import Catalog
from fabricplan.catalog.providers import node_nics
from fabricplan.congestion import traffic as T
from fabricplan.congestion.case import FRAGMENTED_CLUSTER_FACTOR, Case
from fabricplan.congestion.flowcontrol import FlowControl

# Time per flow per seed, microseconds, by pattern, and the flow count it was measured at: the
# event loop's work grows with the flows and with how many of them finish at distinct times.
# The highest seen per flow (small fabrics cost more per flow): ring 3.1 us at 2k flows (1,024
# GPUs; 1.9 at 16k-33k), pipeline 28 at 1k, tree 8.3 at 14k, all-to-all 23 at 130k (1,024
# GPUs; misconfigured RoCE 16.8, tuned 6.6; PFC alone, below) and 22 at 522k (2,048 GPUs),
# incast 80 at 4k,
# permutation 680 at 1k (fat-tree). A listed flow file is priced as a permutation.
SEED_US_PER_FLOW: dict[str, tuple[float, int]] = {
    "ring-allreduce": (3.2, 2_048),
    "pipeline": (28.0, 1_016),
    "tree-allreduce": (8.5, 131_072),
    "alltoall": (24.0, 130_048),
    "incast": (80.0, 4_096),
    "permutation": (700.0, 1_024),
    "flows": (700.0, 1_024),
}
# A fixed cost per seed beyond the one every pattern has (below): an incast spends ~220 ms a
# seed at 127 and at 449 senders alike (1,024 and 3,600 GPUs), whatever its flow count.
PATTERN_SEED_US: dict[str, float] = {"incast": 250_000.0}
# Routings that split a flow over several paths multiply its routed entries and port pairs, and
# the time per seed with them (all measured against ECMP on the same case): adaptive routing's
# 8 pieces cost 1.5-3x on 512-GPU all-to-alls and 15x on an InfiniBand one over 1,024 GPUs
# before its senders' NICs were held (12.6 s a seed; 26 s now, 3.4x the PFC-only RoCE one), 4-5x
# on rings and trees; spraying over every path 36x on a 512-GPU all-to-all
# (28 s a seed) and 6x on a 4,096-GPU ring. The highest seen, so the estimate errs long.
ROUTING_COST_FACTOR = {"adaptive": 5.0, "spray": 40.0, "packet-spray": 40.0}
# Senders whose NICs are held (credit or PFC-only flow control: nic_turns) cost more where a
# NIC sends many flows: their holds start at events of their own, and an event with a NIC paused
# is worked out twice. All-to-all over 1,024 GPUs on RoCE with PFC alone: 7.6 s a seed (102
# events), 58 us a flow, 2.4x the pattern's figure above; 3x, to err long.
HELD_NICS_COST_FACTOR = {"alltoall": 3.0}
# Time every seed costs whatever its size, microseconds: routing, the event loop's set-up, flow
# control and the latency probes of even a 16-GPU case (1.0-1.25 ms measured quiet, up to 1.45
# ms with the machine's other core busy: 53,446 seeds of a 16-GPU ring took 60-77 s).
SEED_OVERHEAD_US = 1_500.0
# Beyond the measured count, the cost per flow grows as flows ** 0.25: all-to-all over 2,048
# GPUs (522k flows) took ~25 s a seed, 5.5x the time of 1,024 GPUs for 4x the flows.
SEED_FLOW_EXPONENT = 0.25
# Building and routing the fabric, microseconds per GPU of the whole fabric (65,536 GPUs: ~4 s).
SETUP_US_PER_GPU = 64.0
# Peak memory: the interpreter and libraries (~100 MB), the fabric's graph per GPU (131,072
# GPUs: ~450 MB), and per routed flow and queue pair: 6 KB (tree, 262k flows: 1.6 GB), 1.5 KB for
# all-to-all, whose flows share their paths' tables (522k flows: 0.75 GB).
BASE_BYTES = 100 * 2**20
BYTES_PER_GPU = 3 * 2**10
BYTES_PER_FLOW: dict[str, float] = {"alltoall": 1.5 * 2**10}
DEFAULT_BYTES_PER_FLOW = 6 * 2**10

# Default budgets of one `fabricplan congestion` run: a minute (10 seeds of an all-to-all over
# 1,024 GPUs take 4-12 s on 2 cores, tuned to misconfigured RoCE) and 2 GiB (a laptop's share
# for one command).
DEFAULT_TIME_BUDGET_S = 60.0
DEFAULT_MEMORY_BUDGET_GB = 2.0
# How far the budget options go: a day, and 256 GB.
MAX_TIME_BUDGET_S = 86_400.0
MAX_MEMORY_BUDGET_GB = 256.0


@dataclass(frozen=True)
class Estimate:
    """What a case is expected to cost: seconds to set up, seconds per seed, peak bytes."""

    setup_s: float
    per_seed_s: float
    seeds: int
    peak_bytes: float

    @property
    def total_s(self) -> float:
        return self.setup_s + self.per_seed_s * self.seeds


def estimate(
    pattern: str,
    nodes: int,
    nics_per_node: int,
    cluster_gpus: int,
    seeds: int,
    *,
    qps: int = 1,
    listed: int = 0,
    routing: str = "ecmp",
    held_nics: bool = False,
) -> Estimate:
    """The estimate for ``seeds`` runs of ``pattern`` over ``nodes`` nodes in a fabric of
    ``cluster_gpus`` GPUs (``listed``: the flows of a flow file), routed by ``routing``;
    ``held_nics``: flow control holds the senders' NICs (credit or PFC only)."""
    flows = T.flow_count(pattern, nodes, nics_per_node, listed=listed) * qps
    per_flow = BYTES_PER_FLOW.get(pattern, DEFAULT_BYTES_PER_FLOW)
    us, measured_at = SEED_US_PER_FLOW[pattern]
    growth = max(1.0, flows / measured_at) ** SEED_FLOW_EXPONENT
    return Estimate(
        setup_s=SETUP_US_PER_GPU * cluster_gpus * 1e-6,
        per_seed_s=(
            SEED_OVERHEAD_US
            + PATTERN_SEED_US.get(pattern, 0.0)
            + us
            * growth
            * flows
            * ROUTING_COST_FACTOR.get(routing, 1.0)
            * (HELD_NICS_COST_FACTOR.get(pattern, 1.0) if held_nics else 1.0)
        )
        * 1e-6,
        seeds=seeds,
        peak_bytes=BASE_BYTES + BYTES_PER_GPU * cluster_gpus + per_flow * flows,
    )


def estimate_case(case: Case, cat: Catalog) -> Estimate:
    """:func:`estimate` for a checked case (its GPU's reference node fills what it leaves out,
    and a fabric only rented comes on its node types' NICs: ``node_nics``)."""
    node = cat.gpu(case.gpu).node
    k = case.gpus_per_node or node.gpus_per_node
    spread = FRAGMENTED_CLUSTER_FACTOR if case.placement == "fragmented" else 1
    listed = len(case.flows) if case.flows is not None else 0
    nodes = max(1, case.gpus // k)
    nics = case.nics_per_node or node_nics(cat, case.gpu, case.fabric)
    cluster = case.cluster_gpus or case.gpus * spread
    fab = cat.fabric(case.fabric)
    routing = case.routing or fab.default_routing
    fc = FlowControl.of_fabric(fab, case.roce_quality, case.flow)
    return estimate(
        case.pattern,
        nodes,
        nics,
        cluster,
        case.seeds,
        qps=case.qps,
        listed=listed,
        routing=routing,
        held_nics=fc.lossless_open_loop,
    )


def over_budget(est: Estimate, time_budget_s: float, memory_budget_gb: float) -> str | None:
    """Why ``est`` does not fit the budgets (None when it does), with the estimate."""
    gib = est.peak_bytes / 2**30
    if est.total_s > time_budget_s:
        return (
            f"this case is estimated at {_duration(est.total_s)} (setup {_duration(est.setup_s)}, "
            f"{_duration(est.per_seed_s)} per seed x {est.seeds:,} seeds), over the "
            f"{_duration(time_budget_s)} budget; use fewer --seeds or GPUs, or raise "
            "--time-budget-s"
        )
    if gib > memory_budget_gb:
        return (
            f"this case is estimated to need {gib:.1f} GB of memory, over the "
            f"{memory_budget_gb:g} GB budget; simulate a smaller group, or raise "
            "--memory-budget-gb"
        )
    return None


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:,.0f} days"
