"""Pipeline fill: how NCCL chunks a channel's data, and what the step-by-step forwarding of those
chunks adds to the bandwidth time (the tree's and NVLS-Tree's fill and drain), which NCCL's own
estimate leaves out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.indices import LL128, NVLS_TREE, SIMPLE, TREE, P

if TYPE_CHECKING:
    from fabricplan.collectives.model import SystemArrays


def _halve_chunk(
    chunk: float, part: np.ndarray, rules: tuple[tuple[float, int], ...], scale: np.ndarray | float
) -> np.ndarray:
    """NCCL's ``while (part / chunk < mult * scale && chunk > floor) chunk /= 2``, rule by rule
    (calcCollChunking), in closed form: the integer division floors, so a rule asks for
    ceil(mult * scale) chunks and halves just enough to get them, as long as the chunk is
    above its floor. ``part`` is a channel's bytes."""
    out = np.full(part.shape, float(chunk))
    with np.errstate(divide="ignore"):
        for mult, floor in rules:
            want = np.ceil(mult * scale)
            need = np.ceil(np.log2(want * out / np.maximum(part, 1.0)) - 1e-9)
            room = np.ceil(np.log2(np.maximum(out / floor, 1.0)) - 1e-9)
            out = out / 2.0 ** np.maximum(np.minimum(need, room), 0.0)
    return out


def tree_chunk_bytes(
    part: np.ndarray, proto: int, nodes: np.ndarray, ppn: np.ndarray
) -> np.ndarray:
    """The chunk NCCL's tree all-reduce moves per step for a channel's ``part`` bytes (N, S):
    one Simple step, or LL128's step shrunk by its nstepsLL128 rule; never more than the part.
    ``nodes`` and ``ppn`` (GPUs per node) are (N,)."""
    if proto == SIMPLE:
        chunk = np.full(part.shape, float(K.SIMPLE_STEP_BYTES))
    elif proto == LL128:
        nsteps = 1 + np.floor(np.log2(np.maximum(nodes, 1))) + K.TREE_LL128_NSTEPS_PER_PPN * ppn
        chunk = _halve_chunk(
            K.LL128_STEP_DATA_BYTES, part, K.TREE_LL128_CHUNK_RULES, (nsteps / ppn)[:, None]
        )
    else:
        raise ValueError("the tree's chunking is modelled for Simple and LL128")
    return np.minimum(chunk, part)


def _nvls_tree_fill_us(
    sizes: np.ndarray, algbw: np.ndarray, channels: np.ndarray, depth: np.ndarray
) -> np.ndarray:
    """NVLS-Tree's fill and drain: ~2 x depth chunk-times, the chunk halved as in
    NVLS_TREE_FILL_CHUNK_RULES. Shapes: sizes (N, S), others (N,)."""
    chunk = np.full(sizes.shape, float(K.SIMPLE_STEP_BYTES))
    per_channel = sizes / channels[:, None]
    # Each rule can only halve from the previous rule's floor down to its own: a chunk a rule
    # left above its floor was too big to shrink, and the later rules ask less.
    top = K.SIMPLE_STEP_BYTES
    for mult, floor in K.NVLS_TREE_FILL_CHUNK_RULES:
        for _ in range(int(np.log2(top // floor))):
            shrink = (per_channel / chunk < depth[:, None] * mult) & (chunk > floor)
            if not shrink.any():
                break  # nothing changed: the rule's further rounds would not either
            chunk = np.where(shrink, chunk / 2, chunk)
        top = floor
    chunk = np.minimum(chunk, per_channel)
    with np.errstate(divide="ignore", invalid="ignore"):
        chunk_time = chunk * channels[:, None] / (1000.0 * algbw[:, None])
    return np.where(algbw[:, None] > 0, 2 * depth[:, None] * chunk_time, 0.0)


def pipeline_fill_us(
    step_bytes: np.ndarray, channels: np.ndarray, algbw: np.ndarray, stages: np.ndarray
) -> np.ndarray:
    """What a store-and-forward pipeline adds to its bandwidth time: a channel's data crosses
    ``stages`` hops one step at a time, so the last step leaves ``stages - 1`` step-times after
    the bandwidth term alone would have it. ``step_bytes`` (N, S) per channel; ``channels``,
    ``algbw`` (GB/s, all channels) and ``stages`` are (N,)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        step_time = step_bytes * channels[:, None] / (1000.0 * algbw[:, None])
    lag = np.maximum(stages - 1, 0)[:, None]
    return np.where(algbw[:, None] > 0, lag * step_time, 0.0)


def tree_fill_us(
    sa: SystemArrays, sizes: np.ndarray, bw: np.ndarray, channels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pipeline fill and drain of the all-reduce trees, us: the tree's per protocol (N, S, P;
    LL none) and NVLS-Tree's (N, S).

    Tree/Simple stores and forwards whole chunks at every hop: up the chain inside the node
    and the levels between nodes, and down again. Tree/LL128 forwards 128-byte lines over NVLink
    as they land (each line carries its flag), but the network proxy sends a step only once it
    is complete (src/transport/net.cc, sendProxyProgress), so only the network hops store a
    chunk. NVLS-Tree does a node in one hop. NCCL's tuner (ncclTopoGetAlgoTime) counts no fill:
    the tree's is in the time, not in NCCL's choice. ``bw`` is ``tables``' (N, A, P) bandwidth and
    ``channels`` the runtime ring/tree channel count (N,)."""
    tree = np.zeros((*sizes.shape, P))
    levels = np.floor(np.log2(np.maximum(sa.nodes, 1)))
    part = sizes / channels[:, None]
    chain = (sa.k - 1) + levels
    tree[:, :, SIMPLE] = pipeline_fill_us(
        tree_chunk_bytes(part, SIMPLE, sa.nodes, sa.k), channels, bw[:, TREE, SIMPLE], 2 * chain
    )
    tree[:, :, LL128] = pipeline_fill_us(
        tree_chunk_bytes(part, LL128, sa.nodes, sa.k), channels, bw[:, TREE, LL128], 2 * levels
    )
    nvls_tree = _nvls_tree_fill_us(sizes, bw[:, NVLS_TREE, SIMPLE], sa.nvls_nch, 1 + levels)
    return tree, nvls_tree
