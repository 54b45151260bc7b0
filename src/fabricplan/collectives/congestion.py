"""The seam between the collective model and congestion: one backend interface.

A backend returns, per configuration and algorithm, a factor >= 1 by which congestion stretches
the bandwidth term (ECMP collisions, incast, PFC pauses...). The default backend derates
nothing; the congestion layer provides analytical and simulated backends behind this interface.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from fabricplan.collectives.model import A, SystemArrays


class CongestionBackend(Protocol):
    name: str

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        """Factor >= 1 per (configuration, algorithm), shape (N, number of algorithms). For
        the point-to-point ops (sendrecv, alltoall), which run outside NCCL's algorithms, the
        ring column is read."""
        ...


class NoCongestion:
    """An ideal fabric: every flow gets its share of the links (the default until measured)."""

    name = "none"

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        return np.ones((len(sa), A))
