"""Tensor-parallel collectives hidden behind the GEMMs next to them (``tp_comm_overlap``).

Megatron-Core's ``--tp-comm-overlap`` hands the sequence-parallel all-gathers and
reduce-scatters to Transformer Engine's userbuffers, which split each GEMM so that its
communication runs while the GEMM computes (TransformerEngine ``initialize_ub``, 2024 defaults):

- ring exchange (QKV and FC1 forward, output-projection and FC2 input-gradient): the all-gather
  becomes tp - 1 point-to-point steps on the copy engines; each step's transfer runs while the
  GEMM works on the chunk already there, starting with the local one;
- pipeline (output projection and FC2 forward): the GEMM is cut in ``UB_SPLITS`` pieces and
  each piece's reduce-scatter runs while the next piece computes; the last one cannot hide;
- bulk (QKV and FC1 backward): the reduce-scatter of the input gradient runs beside the
  weight-gradient GEMM, with no dependency between them.

Pipeline and bulk communicators run on ``UB_COMM_SMS`` SMs, which the GEMM beside them loses
for as long as they run. Every function takes the collective's time alone and the GEMM's time
alone and returns the time added to the layer beyond the GEMM, so 0 means fully hidden.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec
from fabricplan.workload.overlap import sm_tax

# Pieces a pipelined GEMM + reduce-scatter is cut into (TransformerEngine initialize_ub default
# num_splits = 4).
UB_SPLITS = 4
# SMs a pipeline or bulk communicator occupies (TransformerEngine initialize_ub default
# num_sm = 16); ring exchange moves data with the copy engines and takes none.
UB_COMM_SMS = 16


def ring_exchange(comm: ArrayLike, gemm: ArrayLike, tp: ArrayLike) -> np.ndarray:
    """All-gather as tp - 1 transfers, each behind one of the tp GEMM chunks before it."""
    comm, gemm, tp = (vec.floats(x) for x in (comm, gemm, tp))
    steps = vec.maximum(tp - 1, 1)
    return steps * vec.maximum(comm / steps - gemm / vec.maximum(tp, 1), 0.0)


def pipelined(comm: ArrayLike, gemm: ArrayLike, sm_share: float) -> np.ndarray:
    """GEMM in ``UB_SPLITS`` pieces, each piece's reduce-scatter behind the next piece."""
    comm, gemm = vec.floats(comm), vec.floats(gemm)
    n = UB_SPLITS
    hidden = (n - 1) / n
    return (
        (n - 1) * vec.maximum(comm - gemm, 0.0) / n
        + comm / n
        + sm_tax(comm * hidden, gemm * hidden, sm_share)
    )


def bulk(comm: ArrayLike, gemm: ArrayLike, sm_share: float) -> np.ndarray:
    """A collective beside an independent GEMM: only what outlasts the GEMM shows."""
    comm, gemm = vec.floats(comm), vec.floats(gemm)
    return vec.maximum(comm - gemm, 0.0) + sm_tax(comm, gemm, sm_share)


def exposed_per_layer(
    ag: ArrayLike,
    rs: ArrayLike,
    gemm_qkv: ArrayLike,
    gemm_out: ArrayLike,
    gemm_fc1: ArrayLike,
    gemm_fc2: ArrayLike,
    tp: ArrayLike,
    sm_share: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Exposed TP time of one layer's forward and backward pass.

    ``ag`` and ``rs`` are one all-gather and one reduce-scatter of the layer's activations;
    the ``gemm_*`` times are the forward GEMMs (each backward GEMM does the same work).
    Forward: all-gather into QKV and FC1, reduce-scatter out of the output projection and FC2.
    Backward: the output-gradient all-gathers into the FC2 and output-projection input-gradient
    GEMMs, and the input-gradient reduce-scatters of FC1 and QKV beside their weight gradients.
    """
    fwd = (
        ring_exchange(ag, gemm_qkv, tp)
        + pipelined(rs, gemm_out, sm_share)
        + ring_exchange(ag, gemm_fc1, tp)
        + pipelined(rs, gemm_fc2, sm_share)
    )
    bwd = (
        ring_exchange(ag, gemm_fc2, tp)
        + bulk(rs, gemm_fc1, sm_share)
        + ring_exchange(ag, gemm_out, tp)
        + bulk(rs, gemm_qkv, sm_share)
    )
    return fwd, bwd
