"""Topology: designs, hop counts and (later) the bill of materials and explicit graph."""

from fabricplan.topology.hops import switch_hops

__all__ = ["switch_hops"]
