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


def nvls_tree_chunk_bytes(
    sizes: np.ndarray, channels: np.ndarray, heads: np.ndarray, nodes: np.ndarray
) -> np.ndarray:
    """NVLS-Tree's chunk for messages of ``sizes`` bytes (N, S), as NCCL sets it
    (NVLS_TREE_CHUNK_RULES): ``channels`` (NVLS CTAs), ``heads`` (the GPUs that own a NIC,
    each reducing its own chunk of every loop) and ``nodes`` are (N,)."""
    top = np.where(
        nodes >= K.NVLS_TREE_MANY_NODES,
        min(K.NVLS_CHUNK_BYTES, K.NVLS_TREE_MANY_NODES_MAX_CHUNK_BYTES),
        K.NVLS_CHUNK_BYTES,
    ).astype(float)
    chunk = np.broadcast_to(top[:, None], sizes.shape)
    ops = (channels * heads)[:, None]  # chunks in flight at once: NCCL's concurrentOps
    for mult, floor in K.NVLS_TREE_CHUNK_RULES:
        chunk = np.where((sizes < mult * ops * chunk) & (chunk > floor), float(floor), chunk)
    return chunk


def nvls_tree_rates(sa: SystemArrays, nic: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NVLS-Tree's bus rates per channel (GB/s, (N,) each): the node's NVLS reduction and
    broadcast, a network hop (``nic``: what a NIC carries for NCCL), and NCCL's per-channel
    cap. With two nodes each byte crosses the network once per direction instead of a ring's
    ~2x, so the network hop carries twice the bandwidth (the "2-node" effect in real data)."""
    heads = np.maximum(sa.m, 1)
    intra = (
        sa.nvls_ch * K.NVLS_EFFICIENCY[sa.arch] * (heads - 1) / heads * K.NVLS_ALLREDUCE_PIPELINE
    )
    two_node = sa.nodes <= K.NVLS_TREE_TWO_NODE_MAX_NODES
    inter = nic * np.where(two_node, K.NVLS_TREE_TWO_NODE_INTER, 1.0)
    scale = np.minimum(sa.nodes, 3).astype(int) - 1
    return intra, inter, K.PER_CH_MAX_NVLS_TREE_BW[sa.arch, scale]


def nvls_tree_fill_us(
    sizes: np.ndarray,
    algbw: np.ndarray,
    channels: np.ndarray,
    heads: np.ndarray,
    nodes: np.ndarray,
    lag: np.ndarray,
) -> np.ndarray:
    """NVLS-Tree's fill and drain (N, S). A channel works loop by loop, each loop one chunk per
    head (src/device/all_reduce.h, the NVLS_TREE kernel: loopCount = nHeads x chunkCount), and a
    loop passes, one after another, the node's NVLS reduction, each tree level up and down the
    network, and the node's NVLS broadcast. ``lag`` (N,): what the last loop adds after the
    bandwidth term, in loop-times at the bandwidth term's pace (``nvls_tree_lag``)."""
    chunk = nvls_tree_chunk_bytes(sizes, channels, heads, nodes)
    loop = np.minimum(heads[:, None] * chunk, sizes / channels[:, None])
    return pipeline_fill_us(loop, channels, algbw, lag)


def nvls_tree_lag(
    intra: np.ndarray, inter: np.ndarray, cap: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """NVLS-Tree's pipeline lag (N,), in loop-times at its pace. N loops through stages of
    times t_i at a pace T (the slowest stage's time, or NCCL's per-channel cap's if longer)
    end after (N - 1) T + sum t_i: the bandwidth term's N T plus sum t_i - T. The stages run at
    their own rates: the NVLS reduction and broadcast at ``intra``, 2 x ``levels`` network hops
    at ``inter``."""
    pace = np.minimum(np.minimum(intra, inter), cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        stages = 2 * pace / intra + 2 * levels * pace / inter  # sum t_i / T
    return np.where(pace > 0, np.maximum(stages - 1, 0.0), 0.0)


def pipeline_fill_us(
    step_bytes: np.ndarray, channels: np.ndarray, algbw: np.ndarray, lag: np.ndarray
) -> np.ndarray:
    """What a store-and-forward pipeline adds to its bandwidth time: a channel's data crosses
    its hops one step at a time, so the last step leaves ``lag`` step-times (at the bandwidth
    term's pace; stages - 1 when every stage runs at it) after the bandwidth term alone would
    have it. ``step_bytes`` (N, S) per channel; ``channels``, ``algbw`` (GB/s, all channels)
    and ``lag`` are (N,)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        fill = lag[:, None] * step_bytes * channels[:, None] / (1000.0 * algbw[:, None])
    return np.where(algbw[:, None] > 0, fill, 0.0)


def tree_simple_fill_us(
    chunk: np.ndarray,
    channels: np.ndarray,
    algbw: np.ndarray,
    nvlink: np.ndarray,
    ppn: np.ndarray,
    levels: np.ndarray,
) -> np.ndarray:
    """What Tree/Simple's two store-and-forward passes add to the bandwidth term (N, S), us.

    A pass runs a channel's chunks (``chunk`` bytes each, (N, S)) through ``ppn - 1`` NVLink
    hops of the node's chain and ``levels`` network hops; its bandwidth term already counts
    the chunks at the slowest hop's pace, the tree's per-channel bus bandwidth (``algbw`` over
    ``TREE_ALG_RATIO``: every byte goes up, then down, tuning.cc). The last chunk then still
    crosses every other hop once: an NVLink hop at the GPU's NVLink (``nvlink``, GB/s one
    direction) shared by its channels, a network hop at the bus rate. ``channels``, ``algbw``,
    ``nvlink``, ``ppn`` and ``levels`` are (N,)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bus = algbw / K.TREE_ALG_RATIO / channels  # GB/s per channel
        nvl = np.maximum(nvlink / channels, bus)  # an NVLink hop is never the slower one here
        # every hop once, less the slowest one, whose pace the bandwidth term already counts:
        # a network hop, or alone in a node one of the chain's NVLink hops
        slowest = np.where(levels > 0, bus, nvl)
        per_pass = chunk * ((ppn - 1) / nvl + levels / bus - 1 / slowest)[:, None]
    return np.where((algbw > 0)[:, None], 2 * np.maximum(per_pass, 0.0) / 1000.0, 0.0)


def tree_fill_us(
    sa: SystemArrays, sizes: np.ndarray, bw: np.ndarray, channels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pipeline fill and drain of the all-reduce trees, us: the tree's per protocol (N, S, P;
    LL none) and NVLS-Tree's (N, S).

    Tree/Simple stores and forwards whole chunks at every hop: up the chain inside the node
    and the levels between nodes, and down again. Every rank runs its reduce loop over all of a
    channel's chunks before its broadcast loop (src/device/all_reduce.h, runTreeUpDown), so
    each pass is a pipeline of its own, whose last chunk leaves every hop one hop-time after
    the one before: a pass takes its chunks at the slowest hop's pace (the bandwidth term) plus
    one chunk's time on every other hop (``tree_simple_fill_us``).

    Tree/LL128 forwards 128-byte lines over NVLink as they land (each line carries its flag),
    but the network proxy sends a step only once it is complete (src/transport/net.cc,
    sendProxyProgress), so only the network hops store a chunk. NVLS-Tree pipelines loops of
    chunks (``nvls_tree_fill_us``). NCCL's tuner counts no fill: the tree's is in the time, not
    in NCCL's choice (NVLS-Tree's is in both, see ``model._times``). ``bw`` is ``tables``'
    (N, A, P) bandwidth and ``channels`` the runtime ring/tree channel count (N,)."""
    tree = np.zeros((*sizes.shape, P))
    levels = np.floor(np.log2(np.maximum(sa.nodes, 1)))
    part = sizes / channels[:, None]
    tree[:, :, SIMPLE] = tree_simple_fill_us(
        tree_chunk_bytes(part, SIMPLE, sa.nodes, sa.k),
        channels,
        bw[:, TREE, SIMPLE],
        sa.nvl,
        sa.k,
        levels,
    )
    tree[:, :, LL128] = pipeline_fill_us(
        tree_chunk_bytes(part, LL128, sa.nodes, sa.k),
        channels,
        bw[:, TREE, LL128],
        np.maximum(2 * levels - 1, 0),
    )
    heads = np.maximum(sa.m, 1)  # as many heads as NICs: the NVLS graph's channels
    nic = K.nic_through_channels(sa.nic, channels, sa.m, sa.ch_bw)
    lag = nvls_tree_lag(*nvls_tree_rates(sa, nic), levels)
    nvls_tree = nvls_tree_fill_us(
        sizes, bw[:, NVLS_TREE, SIMPLE], sa.nvls_nch, heads, sa.nodes, lag
    )
    return tree, nvls_tree
