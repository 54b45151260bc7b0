"""Switch hops a job's collectives cross, from the design that connects its nodes."""

from __future__ import annotations

from fabricplan.topology.clos import MAX_TIERS, size_clos, worst_hops
from fabricplan.topology.dragonfly import size_dragonfly
from fabricplan.topology.layout import TopologyError


def job_hops(
    nodes: int,
    nics_per_node: int,
    gpus_per_node: int,
    radix: int,
    line_rate_gbps: float,
    design: str = "rail-optimized",
    oversubscription: float = 1.0,
) -> int:
    """Worst-case switches crossed between two of the job's nodes on the same rail.

    NCCL's rings and trees join NIC k of one node to NIC k of the next (with PXN moving data
    over NVLink to the right rail first), so on rail designs the same-rail figure is the one
    collectives see; on a fat-tree or dragonfly every rail pair looks alike.
    """
    if nodes <= 1:
        return 0
    try:
        if design == "dragonfly":
            lay = size_dragonfly(
                nodes, nics_per_node, gpus_per_node, radix, line_rate_gbps, oversubscription
            )
        else:
            lay = size_clos(
                design, nodes, nics_per_node, gpus_per_node, radix, line_rate_gbps, oversubscription
            )
    except TopologyError:
        return worst_hops(MAX_TIERS + 1)  # beyond reach: as if a tier were added on top
    return lay.hops.same_rail
