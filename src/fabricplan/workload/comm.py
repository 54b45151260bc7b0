"""Communication of a parallel plan, priced by the collective model and the congestion layer.

Ranks are laid out as Megatron-LM does by default (tensor fastest, then context, expert/data,
pipeline outermost), so a group of ``size`` ranks ``stride`` apart lies inside one node when
``size * stride <= gpus_per_node`` and otherwise spreads over nodes, one GPU (and its NIC) per
node once ``stride >= gpus_per_node``. Each group becomes a communicator for the collective
model; groups that cross the network also get the congestion layer's slowdown for the traffic
pattern they create across the job's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.collectives import CommSystem, SystemArrays, build_system, sweep
from fabricplan.collectives.model import A
from fabricplan.topology import TopologyError
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.plan import Hardware

# Seeds of the congestion simulation per (fabric, pattern, nodes): enough for a stable median.
CONGESTION_SEEDS = 5
# Message size of that simulation: 256 MiB, a gradient bucket's order of magnitude, large enough
# that the slowdown is the bandwidth regime's (it is applied to the bandwidth term).
CONGESTION_PROBE_BYTES = float(1 << 28)


@dataclass(frozen=True)
class ConstantSlowdown:
    """A congestion backend that stretches every algorithm's bandwidth term by one factor."""

    factor: np.ndarray  # (N,)
    name: str = "constant"

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        return np.repeat(np.asarray(self.factor, dtype=float)[:, None], A, axis=1)


@lru_cache(maxsize=64)
def base_system(hw: Hardware) -> CommSystem:
    """The whole cluster as one communicator: NIC goodput, NVLink, per-step latency, hops.
    A design the fabric cannot build is the scenario's error, not the model's."""
    try:
        return build_system(hw.gpu.id, max(hw.nodes, 1), hw.fabric,
                            gpus_per_node=hw.gpus_per_node, nics_per_node=hw.nics_per_node,
                            switch=hw.switch, design=hw.design,
                            oversubscription=hw.oversubscription, catalog=hw.catalog)  # fmt: skip
    except TopologyError as exc:
        raise WorkloadError(str(exc)) from None


@lru_cache(maxsize=64)
def _base_arrays(hw: Hardware) -> SystemArrays:
    return SystemArrays.of([base_system(hw)])


def group_arrays(hw: Hardware, size: np.ndarray, stride: np.ndarray) -> SystemArrays:
    """Communicators of ``size`` ranks ``stride`` apart, one per plan (arrays of shape (N,))."""
    base = _base_arrays(hw)
    n = len(size)
    k, m = float(hw.gpus_per_node), float(hw.nics_per_node)
    per_node = np.clip(np.floor(k / np.maximum(stride, 1)), 1, None)  # group ranks per node
    per_node = np.minimum(per_node, size)
    nodes = np.maximum(np.ceil(size / per_node), 1)
    # the group's ranks use their own share of the node's NICs (all groups run at once)
    nic_share = m * per_node / k
    nics = np.maximum(np.floor(nic_share), 1)
    nic_bw = base.nic[0] * np.minimum(nic_share / nics, 1.0)
    return replace(base.take(np.zeros(n, dtype=int)), nodes=nodes, k=per_node, m=nics, nic=nic_bw)


def congestion_factor(hw: Hardware, pattern: str, nodes: int) -> float:
    """Median network slowdown of ``pattern`` over ``nodes`` whole nodes of this cluster."""
    if nodes < 2:
        return 1.0
    return _simulated_slowdown(hw.gpu.id, hw.fabric, hw.design, hw.oversubscription,
                               hw.spine_oversubscription, hw.switch, hw.roce_quality,
                               hw.placement, hw.gpus_per_node, hw.nics_per_node, pattern, nodes,
                               hw.catalog)  # fmt: skip


# Cached on exactly what the simulation reads. The cluster's size is not among them (the
# simulated fabric is sized to the group's nodes), so evaluating the same cluster at other sizes
# (break-even) reuses the runs of groups whose span did not change: each run is tens of ms.
# Fields, not the Hardware: the GPU by id, so GPUs that differ only in compute (the validation's
# matmul-ceiling variants) share runs. A new Hardware field the simulator reads goes here.
@lru_cache(maxsize=512)
def _simulated_slowdown(gpu: str, fabric: str, design: str, oversubscription: float,
                        spine_oversubscription: float, switch: str | None, roce_quality: str,
                        placement: str, gpus_per_node: int, nics_per_node: int, pattern: str,
                        nodes: int, catalog: Catalog | None = None) -> float:  # fmt: skip
    # heavy imports: only when a group crosses the network
    from fabricplan.congestion.backends import SimulatedCongestion
    from fabricplan.congestion.case import Case, CaseError

    case = Case(
        gpu=gpu,
        fabric=fabric,
        design=design,
        oversubscription=oversubscription,
        spine_oversubscription=spine_oversubscription,
        switch=switch,
        roce_quality=roce_quality,
        placement=placement,
        seeds=CONGESTION_SEEDS,
        jitter_us=0.0,
        size_bytes=CONGESTION_PROBE_BYTES,
    )
    sim = SimulatedCongestion(case=case, catalog=catalog)
    try:
        return sim.factor(nodes, gpus_per_node, nics_per_node, pattern)
    except TopologyError as exc:
        raise WorkloadError(str(exc)) from None
    except CaseError as exc:  # e.g. a group too large to route within the memory budget
        raise WorkloadError(
            f"workload.parallel: the {pattern} traffic of a group over {nodes:,} nodes cannot be "
            f"simulated for its congestion ({exc.reason}); use a plan whose groups span fewer "
            "nodes"
        ) from None


Request = tuple[str, np.ndarray, np.ndarray, np.ndarray, str | None]


def collectives_s(hw: Hardware, requests: list[Request], congestion: bool) -> list[np.ndarray]:
    """Seconds per plan for each ``(op, ranks, stride, nbytes, pattern)`` request: one collective
    of ``nbytes`` (nccl-tests size) over groups of ``ranks`` ranks ``stride`` apart; 0 where a
    group has one rank. Requests for the same op are priced in one vectorised call."""
    out = [np.zeros(np.shape(r[1])) for r in requests]
    by_op: dict[str, list[int]] = {}
    for i, (op, *_rest) in enumerate(requests):
        by_op.setdefault(op, []).append(i)
    for op, which in by_op.items():
        parts = []
        for i in which:
            _, size, stride, nbytes, pattern = requests[i]
            live = np.flatnonzero((np.asarray(size) > 1) & (np.asarray(nbytes) > 0))
            parts.append((i, live, size, stride, nbytes, pattern))
        parts = [x for x in parts if len(x[1])]
        if not parts:
            continue
        size = np.concatenate([np.asarray(x[2], dtype=float)[x[1]] for x in parts])
        stride = np.concatenate([np.asarray(x[3], dtype=float)[x[1]] for x in parts])
        nbytes = np.concatenate([np.asarray(x[4], dtype=float)[x[1]] for x in parts])
        sa = group_arrays(hw, size, stride)
        factor = np.ones(len(size))
        if congestion:
            start = 0
            for _, live, *_r, pattern in parts:
                sel = slice(start, start + len(live))
                start += len(live)
                if pattern is None:
                    continue
                nodes = sa.nodes[sel]
                f = factor[sel]
                for n in np.unique(nodes[nodes > 1]):
                    # the pattern runs on every rail at once, across the nodes a group spans
                    f[nodes == n] = congestion_factor(hw, pattern, int(n))
        res = sweep(sa, op, nbytes[:, None], backend=ConstantSlowdown(factor))
        t = res.time_us[:, 0] * 1e-6
        start = 0
        for i, live, *_r in parts:
            out[i][live] = t[start : start + len(live)]
            start += len(live)
    return out
