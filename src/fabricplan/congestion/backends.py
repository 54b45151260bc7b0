"""Congestion backends for the collective model (the interface in collectives.congestion).

Both answer one question per configuration and algorithm: by what factor does the fabric stretch
the bandwidth term? ``ClosedFormECMP`` uses the balls-into-bins law (fast; ring and tree
traffic on a Clos, contiguous placement, no background); ``SimulatedCongestion`` runs the
flow-level simulator (any routing, placement, background load and flow control).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.collectives.model import NVLS_TREE, RING, TREE, A, SystemArrays
from fabricplan.congestion import traffic as T
from fabricplan.congestion.case import Case
from fabricplan.congestion.network import Network
from fabricplan.congestion.simulate import run_case
from fabricplan.topology import build_graph, size_fabric

# Which traffic pattern stands for each NCCL algorithm's network traffic.
_PATTERN_COLUMNS = (("ring-allreduce", (RING,)), ("tree-allreduce", (TREE, NVLS_TREE)))
# Point-to-point ops run outside NCCL's algorithms; the collective model reads the ring column.
# nccl-tests' sendrecv sends to rank + 1, a ring's neighbour traffic.
_P2P_PATTERN = {"alltoall": "alltoall", "sendrecv": "ring-allreduce"}


def _per_configuration(
    sa: SystemArrays, op: str, factor: Callable[[int, int, int, str], float]
) -> np.ndarray:
    """(N, algorithms) slowdowns: ``factor(nodes, gpus per node, NICs per node, pattern)`` for
    the algorithms each pattern stands for, 1 elsewhere and on single nodes."""
    out = np.ones((len(sa), A))
    columns = ((_P2P_PATTERN[op], tuple(range(A))),) if op in _P2P_PATTERN else _PATTERN_COLUMNS
    for i in range(len(sa)):
        nodes, k, m = int(sa.nodes[i]), int(sa.k[i]), int(sa.m[i])
        if nodes < 2:
            continue
        for pattern, cols in columns:
            out[i, list(cols)] = factor(nodes, k, m, pattern)
    return out


@dataclass(frozen=True)
class ClosedFormECMP:
    """Expected ECMP collision slowdown of ring and tree channels, in closed form."""

    gpu: str = "h100"
    fabric: str = "roce-400g"
    design: str = "fat-tree"
    oversubscription: float = 1.0
    spine_oversubscription: float = 1.0
    switch: str | None = None  # None: the fabric's default
    qps: int = 1
    name: str = "ecmp-closed-form"
    catalog: Catalog | None = None  # None: the default catalog

    def factor(self, nodes: int, k: int, m: int, pattern: str) -> float:
        """Expected slowdown of ``pattern`` over ``nodes`` nodes of ``k`` GPUs and ``m`` NICs."""
        # scipy.stats and scipy.signal: loaded here, not by every user of the simulator
        from fabricplan.congestion.closed_form import collision_slowdown

        d = size_fabric(
            nodes * k,
            self.design,
            self.fabric,
            gpu=self.gpu,
            switch=self.switch,
            oversubscription=self.oversubscription,
            spine_oversubscription=self.spine_oversubscription,
            gpus_per_node=k,
            nics_per_node=m,
            catalog=self.catalog,
        )
        g = build_graph(d.layout, 1.0, 1.0)
        nic = d.fabric.nic_goodput_GBps.nominal
        net = Network(g, nic / (d.fabric.line_rate_gbps / 8))
        tr = T.pattern(pattern, g, np.arange(nodes), 1.0)
        return collision_slowdown(net, tr, self.qps, nic / T.CHANNELS_PER_NIC)

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        # the law counts a few large channels per NIC landing on equal-cost uplinks of a Clos
        if self.design == "dragonfly":
            raise ValueError(
                f"{self.name}: covers Clos designs, not dragonfly; use the "
                "flow-level simulator (fabricplan congestion)"
            )
        if op == "alltoall":
            raise ValueError(
                f"{self.name}: covers ring and tree channels, not alltoall's "
                "many small flows per NIC; use the flow-level simulator"
            )
        return _per_configuration(sa, op, self.factor)


# The expected slowdown to this standard error (of the mean over seeds) before the seeds stop,
# and the most seeds spent on it. ECMP collisions are all or nothing per seed (a
# one-queue-pair ring on a fat-tree runs at 1.0 or 1.5 of its ideal, a spread of 0.25): where
# they are a coin flip, 5 seeds leave the mean ~0.1 off and 20 about 0.06, a few percent of a
# reduction that is partly hidden anyway; where every seed agrees (rails), 5 are exact.
FACTOR_STANDARD_ERROR = 0.06
FACTOR_MAX_SEEDS = 40


@dataclass(frozen=True)
class SimulatedCongestion:
    """Expected network slowdown from the flow-level simulator, per configuration: the mean
    over seeds, without latency probes. The case's seeds come first; while they disagree and
    the mean's standard error is above ``FACTOR_STANDARD_ERROR``, as many again are added (up
    to ``FACTOR_MAX_SEEDS``). A median would flip between a collision's all and nothing with
    the seeds drawn."""

    case: Case = field(default_factory=lambda: Case(seeds=20, jitter_us=0.0))
    name: str = "flow-simulation"
    catalog: Catalog | None = None  # None: the default catalog

    def factor(self, nodes: int, k: int, m: int, pattern: str) -> float:
        """Mean slowdown of ``pattern`` over ``nodes`` nodes of ``k`` GPUs and ``m`` NICs."""
        c = replace(self.case, gpus=nodes * k, gpus_per_node=k, nics_per_node=m, pattern=pattern)
        got = run_case(c, self.catalog, probes=False).network_slowdowns
        while len(got) < FACTOR_MAX_SEEDS and len(got) > 1:
            if np.std(got, ddof=1) / np.sqrt(len(got)) <= FACTOR_STANDARD_ERROR:
                break
            more = replace(
                c, seed=c.seed + len(got), seeds=min(len(got), FACTOR_MAX_SEEDS - len(got))
            )
            got = np.r_[got, run_case(more, self.catalog, probes=False).network_slowdowns]
        return float(np.mean(got))

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        return _per_configuration(sa, op, self.factor)
