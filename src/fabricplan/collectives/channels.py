"""The channels NCCL really runs a collective on, where they are fewer than its estimate assumed.

NCCL picks an algorithm and protocol by an estimate made with all of the communicator's
channels; then, for a small message, it takes channels away while the message is under
channels x threads x a per-thread threshold (``nccl_constants.CHANNEL_MIN_BYTES``; src/enqueue.cc,
topoGetAlgoInfo). The bandwidth term grows by the channels taken away: a 4-32 KiB all_reduce on
two H100 nodes takes about 30 us, where the estimate says 25-28.
"""

from __future__ import annotations

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.indices import LL, RING, TREE, P


def few_channels_us(
    n_ranks: np.ndarray, sizes: np.ndarray, bw_term: np.ndarray, channels: np.ndarray
) -> list[tuple[int, np.ndarray]]:
    """Time (us) Ring and Tree add on the channels a message of ``sizes`` (N, S) really gets,
    out of the communicator's ``channels`` (N,): per algorithm with a message that small,
    (algorithm index, time (N, S, P)). ``bw_term`` (N, S, A, P) is the estimate's bandwidth
    term on all channels; ``n_ranks`` (N,) multiplies the ring's LL threshold (tuning.cc)."""
    need = np.broadcast_to(K.CHANNEL_MIN_BYTES, (len(n_ranks), P))
    ring_need = need.copy()
    ring_need[:, LL] *= n_ranks
    full = channels[:, None, None]
    out = []
    for algo, per_channel in ((TREE, need), (RING, ring_need)):
        used = np.floor(sizes[:, :, None] / per_channel[:, None, :])
        short = used < full
        if not short.any():
            continue
        term = bw_term[:, :, algo]
        lost = np.where(short, full / np.maximum(used, 1) - 1, 0.0)
        out.append((algo, np.where(np.isfinite(term), term, 0.0) * lost))
    return out
