"""Congestion layer: flow-level simulation of collectives on a fabric, and the backends that
hand its slowdowns to the collective model."""
