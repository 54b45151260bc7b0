"""Topology layer: fabric designs -> switch counts, links, hops, bisection, parts and graph.

Public surface: :func:`design_fabric` (sizing and bill of materials), :func:`build_graph`
(the explicit graph with paths), :class:`TopologyError` and :data:`DESIGNS`.
"""

from fabricplan.topology.bom import FabricDesign, design_fabric
from fabricplan.topology.graph import FabricGraph, build_graph
from fabricplan.topology.hops import job_hops
from fabricplan.topology.layout import DESIGNS, Hops, Layout, TopologyError

__all__ = [
    "DESIGNS",
    "FabricDesign",
    "FabricGraph",
    "Hops",
    "Layout",
    "TopologyError",
    "build_graph",
    "design_fabric",
    "job_hops",
]
