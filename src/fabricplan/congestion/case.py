"""A congestion case: what the simulator is asked (``Case``, checked with clear errors), the
guards on what it may ask, and what one run answers (``CaseResult``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from fabricplan.congestion import traffic as T
from fabricplan.congestion.dcqcn import qualities
from fabricplan.congestion.dragonfly_routes import DRAGONFLY_ROUTINGS
from fabricplan.congestion.flowfile import FlowList
from fabricplan.congestion.network import (
    ADAPTIVE_PIECES,
    ADAPTIVE_ROUNDS,
    ROUTE_BYTES_PER_PIECE_PORT,
    ROUTINGS,
)
from fabricplan.congestion.settings import FlowSettings
from fabricplan.topology import DESIGNS
from fabricplan.topology.layout import Layout

# Assumption: ranks enter a collective a few microseconds apart (host scheduling and kernel
# launch; a CUDA launch alone costs ~2-4 us). Exponential skew with this mean per node.
DEFAULT_JITTER_US = 2.0
# NCCL_IB_QPS_PER_CONNECTION default (NCCL environment-variable documentation).
DEFAULT_QPS = 1
# A fragmented job is scattered over a fabric this many times its size (unless told otherwise).
FRAGMENTED_CLUSTER_FACTOR = 2


# The budget is the simulator's own target for one 16k-GPU case (4 GiB, benchmarks/congestion.py);
# a case whose routing would need more (``ROUTE_BYTES_PER_PIECE_PORT`` per piece and switch
# port) is refused before any work.
ROUTE_MEMORY_BUDGET_BYTES = 4 * 2**30
# Spraying splits each flow over every closer port at every hop, so its (lane, flow) pairs
# depend on the fabric's fan-out and are counted while routing, not foreseen. Everything after
# routing (flow control, max-min rates, completion) scales with them: a 2,048-GPU all-to-all
# peaked at 4.68 GB for 66.1 M pairs, 71 bytes a pair (measured, one seed).
SPRAY_BYTES_PER_ENTRY = 72
# Input guards (what a case may ask for), not physical limits: seeds per case, queue pairs per
# connection (NCCL_IB_QPS_PER_CONNECTION; NCCL's default is 1) and start jitter in microseconds.
MAX_SEEDS = 100_000
MAX_QPS = 64
MAX_JITTER_US = 1e6
MAX_SHIFT = 10**7
FCT_UNTIL = ("received", "acknowledged")


class CaseError(ValueError):
    """An impossible or out-of-range congestion case; the message names the field.

    ``reason`` says what is wrong; ``hint`` (may be empty) what to run instead, which only a
    direct user of the simulator can act on."""

    def __init__(self, reason: str, hint: str = "") -> None:
        self.reason, self.hint = reason, hint
        super().__init__(f"{reason}: {hint}" if hint else reason)


@dataclass(frozen=True)
class Case:
    gpu: str = "h100"
    gpus: int = 1024
    fabric: str = "roce-400g"
    design: str = "fat-tree"
    oversubscription: float = 1.0
    spine_oversubscription: float = 1.0
    routing: str | None = None  # None: the fabric's default
    roce_quality: str = "tuned"
    pattern: str = "ring-allreduce"
    size_bytes: float = float(1 << 30)
    seeds: int = 10
    placement: str = "contiguous"
    cluster_gpus: int | None = None  # None: the job's GPUs (x2 when fragmented)
    background: float = 0.0  # load of other tenants' NICs, share of their goodput
    qps: int = DEFAULT_QPS
    jitter_us: float = DEFAULT_JITTER_US
    gpus_per_node: int | None = None
    nics_per_node: int | None = None
    switch: str | None = None
    seed: int = 0
    flow: FlowSettings = field(default_factory=FlowSettings)  # over the RoCE quality preset
    shift: int | None = None  # permutation: NIC i sends to NIC i + shift; None: random
    flows: FlowList | None = None  # pattern "flows": the list (NICs in host order)
    polarized: bool = False  # ECMP: every tier hashes alike (hash polarization)
    dragonfly: str = "minimal"  # between dragonfly groups: minimal | valiant | ugal
    # a flow's completion time runs until its last byte is received, or until the sender has
    # its acknowledgement (as packet simulators such as htsim log it)
    fct_until: str = "received"

    def check(self) -> None:
        def bad(name: str, value: object, allowed: str) -> CaseError:
            return CaseError(f"{name}: {value!r} is not allowed; {allowed}")

        if self.pattern not in T.PATTERNS:
            raise bad("pattern", self.pattern, f"known: {', '.join(T.PATTERNS)}")
        if self.placement not in T.PLACEMENTS:
            raise bad("placement", self.placement, f"known: {', '.join(T.PLACEMENTS)}")
        if self.routing is not None and self.routing not in ROUTINGS:
            raise bad("routing", self.routing, f"known: {', '.join(ROUTINGS)}")
        if self.design not in DESIGNS:
            raise bad("design", self.design, f"known: {', '.join(DESIGNS)}")
        if not 1 <= self.seeds <= MAX_SEEDS:
            raise bad("seeds", self.seeds, f"between 1 and {MAX_SEEDS}")
        if not 1 <= self.qps <= MAX_QPS:
            raise bad("qps", self.qps, f"between 1 and {MAX_QPS} queue pairs per connection")
        if not 0.0 <= self.background <= 1.0:
            raise bad("background", self.background, "a share of NIC goodput, 0 to 1")
        if not (self.size_bytes > 0 and np.isfinite(self.size_bytes)):
            raise bad("size", self.size_bytes, "a positive number of bytes")
        if not 0.0 <= self.jitter_us <= MAX_JITTER_US:
            raise bad("jitter_us", self.jitter_us, f"0 to {MAX_JITTER_US:,.0f} microseconds")
        if self.dragonfly not in DRAGONFLY_ROUTINGS:
            raise bad("dragonfly", self.dragonfly, f"one of {', '.join(DRAGONFLY_ROUTINGS)}")
        if self.fct_until not in FCT_UNTIL:
            raise bad("fct_until", self.fct_until, f"one of {', '.join(FCT_UNTIL)}")
        if self.pattern == "flows" and self.flows is None:
            raise CaseError("flows: pattern 'flows' needs a flow list (--flows FILE)")
        if self.shift is not None and not 1 <= self.shift <= MAX_SHIFT:
            raise bad("shift", self.shift, f"1 to {MAX_SHIFT:,} NICs")
        if self.gpus < 2:
            raise bad("gpus", self.gpus, "at least 2")
        if self.cluster_gpus is not None and self.cluster_gpus < self.gpus:
            raise bad("cluster_gpus", self.cluster_gpus, f"at least the job's {self.gpus} GPUs")
        if self.roce_quality not in qualities():
            raise bad("roce_quality", self.roce_quality, f"known: {', '.join(qualities())}")
        for name, value, allowed in self.flow.problems():
            raise bad(name, value, allowed)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    nodes: int
    routing: str
    flow_control: str
    ideal_time_us: float
    times_us: np.ndarray  # per seed
    network_slowdowns: np.ndarray  # per seed: simulated / ideal network transfer time
    busbw_ideal_GBps: float
    bus_factor: float
    paused_fraction: float
    victim_flows: float  # mean per seed
    hottest_links: list[dict]
    latency_us: dict[str, float]
    fct_us: dict[str, float] = field(default_factory=dict)  # p50, p99, max over the job's flows
    not_modelled: list[str] = field(default_factory=list)  # mechanisms the run leaves out
    layout: dict = field(default_factory=dict)
    # median over seeds of the bytes flowlet moves made go-back-N send again (0: no moves)
    resent_bytes: float = 0.0

    def pct(self, q: float) -> float:
        return float(np.percentile(self.times_us, q))

    @property
    def p50_time_us(self) -> float:
        return self.pct(50)

    @property
    def p99_time_us(self) -> float:
        return self.pct(99)

    @property
    def network_slowdown_p50(self) -> float:
        return float(np.median(self.network_slowdowns))

    def busbw_GBps(self, time_us: float) -> float | None:
        """The bus bandwidth at a collective time; None for a flow list (no one size)."""
        if self.case.flows is not None:
            return None
        return self.case.size_bytes * self.bus_factor / (time_us * 1e3)

    @property
    def busbw_ideal(self) -> float | None:
        return None if self.case.flows is not None else self.busbw_ideal_GBps

    def to_dict(self) -> dict:
        p50, p99 = self.p50_time_us, self.p99_time_us
        return {
            "case": {k: v for k, v in asdict(self.case).items() if k != "flows"}
            | ({"flows": self.case.flows.name} if self.case.flows is not None else {}),
            "nodes": self.nodes,
            "routing": self.routing,
            "flow_control": self.flow_control,
            "ideal_time_us": self.ideal_time_us,
            "p50_time_us": p50,
            "p99_time_us": p99,
            "p50_slowdown": p50 / self.ideal_time_us,
            "p99_slowdown": p99 / self.ideal_time_us,
            "network_slowdown_p50": self.network_slowdown_p50,
            # a flow list has no one collective size: no bus bandwidth
            "busbw_ideal_GBps": self.busbw_ideal,
            "busbw_p50_GBps": self.busbw_GBps(p50),
            "busbw_p99_GBps": self.busbw_GBps(p99),
            "paused_fraction": self.paused_fraction,
            "victim_flows": self.victim_flows,
            "hottest_links": self.hottest_links,
            "latency_under_load_us": self.latency_us,
            "fct_p50_us": self.fct_us.get("p50"),
            "fct_p99_us": self.fct_us.get("p99"),
            "fct_max_us": self.fct_us.get("max"),
            "resent_bytes": self.resent_bytes,
            "seeds": len(self.times_us),
            "not_modelled": self.not_modelled,
            "fabric_layout": self.layout,
        }


def spray_too_large(case: Case, nodes: int, entries: int) -> CaseError:
    """The refusal for a sprayed case whose routing passed the memory budget."""
    gib = entries * SPRAY_BYTES_PER_ENTRY / 2**30
    return CaseError(
        f"gpus: {case.pattern} over {nodes:,} nodes with routing spray splits its flows over "
        f"more than {entries:,} (lane, flow) pairs, about {gib:.1f} GiB, over the "
        f"{ROUTE_MEMORY_BUDGET_BYTES / 2**30:.0f} GiB budget",
        "simulate a smaller group, or routing adaptive (per-packet load balancing in "
        f"{ADAPTIVE_PIECES} pieces per flow)",
    )


def check_route_memory(case: Case, routing: str, nodes: int, layout: Layout) -> None:
    """Refuse a case of ``nodes`` on the fabric ``layout`` whose routing tables alone would
    outgrow the memory budget."""
    nics = layout.nics_per_node
    listed = len(case.flows) if case.flows is not None else 0
    flows = T.flow_count(case.pattern, nodes, nics, listed=listed) + (layout.nodes - nodes) * nics
    # pieces routed at once: every queue pair's (ECMP), one round's share (adaptive), one (spray)
    adaptive = -(-flows * ADAPTIVE_PIECES // ADAPTIVE_ROUNDS)
    per_round = {
        "ecmp": flows * case.qps,
        "flowlet": flows * case.qps,
        "adaptive": adaptive,
        "spray": flows,
    }
    need = per_round[routing] * layout.radix * ROUTE_BYTES_PER_PIECE_PORT
    if need > ROUTE_MEMORY_BUDGET_BYTES:
        raise CaseError(
            f"gpus: {case.pattern} over {nodes:,} nodes makes {flows:,} flows; routing them "
            f"needs about {need / 2**30:.0f} GiB, over the {ROUTE_MEMORY_BUDGET_BYTES / 2**30:.0f}"
            " GiB budget",
            "simulate a smaller group (congestion within one group repeats across groups of the"
            " same size)",
        )
