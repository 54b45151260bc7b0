"""The job alone on its fabric: its traffic, and what only its NICs would let it do.

Nothing here is random, so every seed that places the job on the same nodes (all of them,
when placement is contiguous) gets the same answer; a case keeps it per placement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.congestion import traffic as T
from fabricplan.congestion.network import Network
from fabricplan.congestion.waterfill import complete, matrix_of, max_min_rates


@dataclass(frozen=True)
class JobAlone:
    traffic: T.Traffic  # the pattern's columns, without background
    ideal_net_us: float  # the job's network time on a fabric where only its NICs limit it
    nic_rates: np.ndarray  # per column: its NIC share, what a sender pushes before CC reacts


def job_alone(net: Network, tr: T.Traffic, starts: np.ndarray | None = None) -> JobAlone:
    """The job's traffic ``tr`` on its own, limited by its NICs only (flows starting at
    ``starts``, us, when given)."""
    ups, downs = net.uplink(tr.src), net.downlink(tr.dst)
    shape = (net.lanes, tr.columns)
    a_up = matrix_of(ups, tr.column, np.ones(len(ups)), shape)
    # up- and downlinks in one matrix (cells that meet add up, as a sum of the two would)
    lanes, cols = np.concatenate([ups, downs]), np.concatenate([tr.column, tr.column])
    a_ideal = matrix_of(lanes, cols, np.ones(len(lanes)), shape)
    ideal = float(complete(a_ideal, net.capacity, tr.column_bytes, starts).finish_us.max())
    return JobAlone(tr, ideal, max_min_rates(a_up, net.capacity))
