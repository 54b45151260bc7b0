"""Switch hops between two nodes of a folded Clos, from the switch radix alone.

A leaf gives half its ports to endpoints and half to uplinks (non-blocking), so one leaf serves
radix/2 endpoints, two tiers serve radix^2/2 and three tiers radix^3/4 (Al-Fares et al.,
SIGCOMM 2008). In a rail-optimised fabric each node puts one NIC on every rail, so a rail's
leaves see one endpoint per node. The topology issue replaces this with the explicit design.
"""

from __future__ import annotations


def switch_hops(nodes: int, radix: int) -> int:
    """Switches crossed between the two farthest nodes (1 = same leaf, 3 = via a spine, ...)."""
    if nodes <= 1:
        return 0
    half = radix // 2
    if nodes <= half:
        return 1
    if nodes <= half * radix:
        return 3
    return 5
