"""Topology layer: fabric designs -> switch counts, links, hops, bisection, parts and graph.

Public surface: :func:`design_fabric` (sizing and bill of materials), :func:`size_fabric`
(the sizing alone, for a network simulation), :func:`build_graph`
(the explicit graph with paths), :class:`TopologyError` and :data:`DESIGNS`. The graph module
loads scipy.sparse, so it is imported on first use: every CLI command imports this package
and should not pay for it.
"""

from typing import Any

from fabricplan.topology.bom import FabricDesign, SizedFabric, design_fabric, size_fabric
from fabricplan.topology.hops import job_hops
from fabricplan.topology.layout import DESIGNS, Hops, Layout, TopologyError

__all__ = [
    "DESIGNS",
    "FabricDesign",
    "FabricGraph",
    "Hops",
    "Layout",
    "SizedFabric",
    "TopologyError",
    "build_graph",
    "design_fabric",
    "job_hops",
    "size_fabric",
]


def __getattr__(name: str) -> Any:
    if name in ("FabricGraph", "build_graph"):
        from fabricplan.topology import graph

        return getattr(graph, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
