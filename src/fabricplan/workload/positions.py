"""Hardware at positions of the catalog's ranges: a fabric's RDMA latency, its switches' port
latency and its NIC goodput moved from their typical values towards the low or high end.

A position is 0 at the low end of a range, 1 at the high end and 0.5 at the typical value
(linear on each side, so the nominal position gives the typical value however lopsided the
range). These are the variants advise's sensitivity and Monte Carlo, and the claims' latency
cases, are evaluated at; the sweep engine hands them down with the scenario, since they change
the catalog's figures, not what the scenario states.

By default only the workload model's view of the hardware moves: the congestion backend keeps
reading the catalog as given, so a position moves the latency and bandwidth the congestion
factors multiply, not the factors (advise's drivers: one congestion run serves every grid
point). With ``network`` the congestion backend reads the moved figures too (a fabric that
*is* slower, flow control's round trips included: the claims' latency cases).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from fabricplan.catalog import Catalog, Range
from fabricplan.workload.plan import Hardware

NOMINAL_POSITION = 0.5


def at_position(r: Range, pos: float) -> float:
    """The value at ``pos`` of a catalog range (see the module's docstring)."""
    mid = r.nominal
    if pos <= NOMINAL_POSITION:
        return r.low + pos / NOMINAL_POSITION * (mid - r.low)
    return mid + (pos - NOMINAL_POSITION) / (1 - NOMINAL_POSITION) * (r.high - mid)


def _typical(r: Range, pos: float | None) -> Range:
    if pos is None:
        return r
    return r.model_copy(update={"typical": at_position(r, pos)})


@dataclass(frozen=True)
class Positions:
    """Where in their catalog ranges a variant's hardware figures sit; None keeps the typical
    value. ``fabrics`` limits the change to those fabrics (empty: every fabric)."""

    rdma_latency: float | None = None  # the fabric's RDMA latency
    switch_latency: float | None = None  # its switch's port-to-port latency
    goodput: float | None = None  # its NIC goodput
    fabrics: tuple[str, ...] = ()
    network: bool = False  # the congestion backend reads the moved figures too

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fabrics": list(self.fabrics)}

    def apply(self, hw: Hardware, cat: Catalog) -> Hardware:
        """``hw`` with its fabric's figures at these positions; the congestion backend keeps
        reading ``cat`` unless ``network``."""
        if self.fabrics and hw.fabric not in self.fabrics:
            return hw
        f = cat.fabric(hw.fabric)
        sw = cat.switch(hw.switch or f.default_switch)
        fab = f.model_copy(
            update={
                "rdma_latency_us": _typical(f.rdma_latency_us, self.rdma_latency),
                "nic_goodput_GBps": _typical(f.nic_goodput_GBps, self.goodput),
            }
        )
        switch = sw.model_copy(
            update={
                "port_to_port_latency_ns": _typical(sw.port_to_port_latency_ns, self.switch_latency)
            }
        )
        moved = cat.with_entry(fab).with_entry(switch)
        return replace(hw, catalog=moved, network_catalog=None if self.network else cat)


def latency_and_goodput(latency: float, goodput: float) -> Positions:
    """Every fabric's RDMA and switch latency at ``latency``, its NIC goodput at ``goodput``."""
    return Positions(rdma_latency=latency, switch_latency=latency, goodput=goodput)
