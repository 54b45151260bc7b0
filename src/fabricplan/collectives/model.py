"""NCCL-style cost model: every algorithm x protocol, then the fastest, as NCCL's tuner picks.

For each (algorithm, protocol) NCCL's tuner keeps a latency (us) and a bandwidth (GB/s) and
estimates ``time = latency + bytes / bandwidth``; it runs the pair with the least time
(``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime``, src/graph/tuning.cc, NCCL 2.30). The formulas
below follow it; the graph each algorithm runs on (channels and per-channel bandwidth) comes
from the cluster's NICs and NVLink instead of NCCL's topology search.

Everything is vectorised: ``SystemArrays`` holds N configurations and ``sizes`` any shape that
broadcasts against (N, 1), so sweeps evaluate many (configuration, size) points in one call.
Point-to-point collectives (alltoall, sendrecv) are in :mod:`fabricplan.collectives.p2p`, the
chunking and pipeline fill of the trees in :mod:`fabricplan.collectives.pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.channels import few_channels_us
from fabricplan.collectives.indices import (
    CN_CHAIN,
    CN_DIRECT,
    LL,
    LL128,
    NVLS,
    NVLS_TREE,
    PAT,
    RING,
    SIMPLE,
    TREE,
    A,
    P,
)
from fabricplan.collectives.latency import latencies, ring_steps
from fabricplan.collectives.pipeline import nvls_tree_rates, tree_fill_us
from fabricplan.collectives.system import CommSystem

# the (algorithm, protocol) indices are read from here by the modules that price collectives
__all__ = [
    "CN_CHAIN",
    "CN_DIRECT",
    "LL",
    "LL128",
    "NVLS",
    "NVLS_TREE",
    "PAT",
    "PRICED_ALIKE",
    "RING",
    "SIMPLE",
    "TABLE_OPS",
    "TREE",
    "A",
    "P",
    "SystemArrays",
    "as_sizes",
    "best",
    "tables",
    "times",
    "times_and_estimate",
]

TABLE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
# Ops this model prices exactly alike (the same steps, algorithms and protocols, so the same
# tables and times): a caller may price the one's collectives in the other's call.
PRICED_ALIKE = {"reduce_scatter": "all_gather"}


@dataclass(frozen=True)
class SystemArrays:
    """N cluster configurations as parallel arrays (shape (N,))."""

    nodes: np.ndarray
    k: np.ndarray  # GPUs per node
    m: np.ndarray  # NICs per node
    nic: np.ndarray  # GB/s per NIC
    nvl: np.ndarray  # GB/s per GPU scale-up, one direction
    nvls_ch: np.ndarray  # GB/s per NVLS channel
    delta: np.ndarray  # us added per network step (physical)
    tuner_delta: np.ndarray  # us NCCL's tuner adds per network step (the plugin's figure)
    arch: np.ndarray  # NCCL compCap row
    nvls: np.ndarray  # bool
    sharp: np.ndarray  # bool
    nvls_nch: np.ndarray  # NVLS channels (CTAs) at run time
    min_ctas: np.ndarray  # NCCL_MIN_CTAS: the fewest channels a collective runs
    max_ctas: np.ndarray  # NCCL_MAX_CTAS: the most
    ch_bw: np.ndarray  # GB/s one channel carries through the network plugin (inf: no limit)
    algo_ok: np.ndarray  # (N, A) bool: the algorithms the network plugin lets NCCL run
    proto_ok: np.ndarray  # (N, P) bool: the protocols

    @classmethod
    def of(cls, systems: Sequence[CommSystem]) -> SystemArrays:
        def col(get, dtype=float):  # type: ignore[no-untyped-def]
            return np.array([get(s) for s in systems], dtype=dtype)

        def allowed(names: tuple[str, ...] | None, known: tuple[str, ...]) -> list[bool]:
            return [names is None or x in names for x in known]

        return cls(
            nodes=col(lambda s: s.nodes),
            k=col(lambda s: s.gpus_per_node),
            m=col(lambda s: s.nics_per_node),
            nic=col(lambda s: s.nic_GBps),
            nvl=col(lambda s: s.nvlink_GBps),
            nvls_ch=col(lambda s: s.nvls_channel_GBps),
            delta=col(lambda s: s.net_step_delta_us),
            tuner_delta=col(lambda s: s.tuner_step_delta_us),
            arch=col(lambda s: K.ARCH_INDEX[s.arch], int),
            nvls=col(lambda s: s.nvls, bool),
            sharp=col(lambda s: s.sharp, bool),
            nvls_nch=col(lambda s: s.nvls_channels),
            min_ctas=col(lambda s: s.min_ctas),
            max_ctas=col(lambda s: s.max_ctas),
            ch_bw=col(lambda s: s.channel_GBps),
            algo_ok=np.array([allowed(s.algorithms, K.ALGORITHMS) for s in systems], bool),
            proto_ok=np.array([allowed(s.protocols, K.PROTOCOLS) for s in systems], bool),
        )

    def __len__(self) -> int:
        return len(self.nodes)

    def take(self, idx: np.ndarray) -> SystemArrays:
        return SystemArrays(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


# Up to this many configurations, ``tables`` reads each configuration's tables from a cache by
# its exact values: a plan search or a planner evaluating one plan after another asks about the
# same few communicators again and again, and one configuration's tables cost as much to
# compute as a few hundred's. Above it, they are computed for all at once.
TABLE_CACHE_MAX_ROWS = 16
# Configurations whose tables are kept (an entry is two (A, P) arrays).
TABLE_CACHE_ENTRIES = 4096


def tables(
    sa: SystemArrays, op: str, delta: np.ndarray | None = None, tuner: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Latency (us), algorithm bandwidth (GB/s; 0 = not available) per (N, algo, proto), and
    the runtime channel count (N,) used by the ring plateau rule. ``delta`` (us per network
    step, (N,)) defaults to the physical one; NCCL's tuner sees ``sa.tuner_delta``.
    ``tuner``: the latency as NCCL's tuner counts it (its ring crosses the network fewer times
    than the ring's critical path does), else as the critical path has it.
    The arrays may be shared with other calls' answers: do not write into them."""
    delta = sa.delta if delta is None else delta
    if op not in TABLE_OPS:
        raise ValueError(f"no NCCL table for {op}")
    if len(sa) > TABLE_CACHE_MAX_ROWS:
        return _tables(sa, op, delta, tuner)
    # every input of _tables, one row per configuration
    columns = (
        sa.nodes,
        sa.k,
        sa.m,
        sa.nic,
        sa.nvl,
        sa.nvls_ch,
        delta,
        sa.arch,
        sa.nvls,
        sa.sharp,
        sa.min_ctas,
        sa.max_ctas,
        sa.ch_bw,
    )
    rows = [
        _row_tables(op, tuner, *key) for key in zip(*[c.tolist() for c in columns], strict=True)
    ]
    if len(rows) == 1:
        return rows[0]
    return (
        np.concatenate([r[0] for r in rows]),
        np.concatenate([r[1] for r in rows]),
        np.concatenate([r[2] for r in rows]),
    )


def latency_table(
    sa: SystemArrays, op: str, delta: np.ndarray | None = None, tuner: bool = False
) -> np.ndarray:
    """``tables``' latency alone (N, algo, proto), without computing the bandwidths where
    the tables are computed for all configurations at once."""
    if len(sa) > TABLE_CACHE_MAX_ROWS:
        return latencies(sa, op, sa.delta if delta is None else delta, tuner)
    return tables(sa, op, delta, tuner)[0]


@lru_cache(maxsize=TABLE_CACHE_ENTRIES)
def _row_tables(
    op: str,
    tuner: bool,
    nodes: float,
    k: float,
    m: float,
    nic: float,
    nvl: float,
    nvls_ch: float,
    delta: float,
    arch: float,
    nvls: float,
    sharp: float,
    min_ctas: float,
    max_ctas: float,
    ch_bw: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_tables`` of one configuration (read-only arrays with one row)."""

    def one(value: float, dtype: type = float) -> np.ndarray:
        return np.array([value], dtype=dtype)

    sa = SystemArrays(
        nodes=one(nodes),
        k=one(k),
        m=one(m),
        nic=one(nic),
        nvl=one(nvl),
        nvls_ch=one(nvls_ch),
        delta=one(delta),
        tuner_delta=one(delta),  # not read by _tables
        arch=one(arch, int),
        nvls=one(nvls, bool),
        sharp=one(sharp, bool),
        nvls_nch=one(0.0),  # not read by _tables
        min_ctas=one(min_ctas),
        max_ctas=one(max_ctas),
        ch_bw=one(ch_bw),
        algo_ok=np.ones((1, A), bool),  # not read by _tables
        proto_ok=np.ones((1, P), bool),  # not read by _tables
    )
    out = _tables(sa, op, sa.delta, tuner)
    for a in out:
        a.flags.writeable = False
    return out


def _tables(
    sa: SystemArrays, op: str, delta: np.ndarray, tuner: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tables``, computed for every configuration."""
    bw = np.zeros((len(sa), A, P))
    nodes, k, m = sa.nodes, sa.k, sa.m
    n = nodes * k
    single = nodes == 1
    multi = ~single
    scale = np.minimum(nodes, 3).astype(int) - 1
    arch = sa.arch
    ar = op == "all_reduce"
    agrs = op in ("all_gather", "reduce_scatter")
    nsteps = ring_steps(op, n)
    ring_ratio = n / nsteps  # bus -> algorithm bandwidth (1 / the nccl-tests bus factor)
    llmax = np.where(single, K.LL_MAX_BW[arch, 0], K.LL_MAX_BW[K.LL_MAX_BW_MULTINODE_ROW, scale])

    # --- bandwidth -------------------------------------------------------------------------
    # Ring: one channel per NIC across nodes; within one node, one per GPU over NVLink. A GPU's
    # NVLink carries (k-1)/k of a multi-node ring's traffic, the NIC the rest.
    nch = np.where(single, k, np.maximum(m, 1))
    # NCCL doubles the channels its search found (connect.cc) within NCCL_MIN/MAX_CTAS; where a
    # network plugin limits each channel's throughput, a NIC carries at most its channels' sum
    runtime_channels = K.runtime_channels(nch, sa.min_ctas, sa.max_ctas)
    nic = K.nic_through_channels(sa.nic, runtime_channels, m, sa.ch_bw)
    nvl_share = np.where(k > 1, sa.nvl * k / np.maximum(k - 1, 1), np.inf)
    ring_ch = np.where(single, sa.nvl / k, np.minimum(nic, nvl_share / nch))
    bus_ring = nch * ring_ch
    bw[:, RING, LL] = np.minimum(llmax, K.RING_LL_FACTOR * bus_ring) * ring_ratio
    bw[:, RING, LL128] = (
        np.minimum(K.RING_LL128_FACTOR * bus_ring, nch * K.PER_CH_MAX_RING_LL128_BW[arch, scale])
        * ring_ratio
    )
    bw[:, RING, SIMPLE] = bus_ring * ring_ratio

    if ar:
        # Tree (double binary tree between nodes, chains inside): same channels as the ring.
        # With two nodes each tree sends half the data up and half down, so each direction of
        # the network carries each byte once, not a ring's ~2x: the network side counts
        # twice, as for NVLS-Tree below.
        two_node = nodes <= K.NVLS_TREE_TWO_NODE_MAX_NODES
        tree_nic = nic * np.where(multi & two_node, K.NVLS_TREE_TWO_NODE_INTER, 1.0)
        tree_ch = np.where(single, sa.nvl / k, np.minimum(tree_nic, nvl_share / nch))
        tree = np.minimum(
            K.TREE_SIMPLE_FACTOR * nch * tree_ch, nch * K.PER_CH_MAX_TREE_BW[arch, scale]
        )
        bw[:, TREE, LL] = np.minimum(tree / K.TREE_LL_DIVISOR, llmax) * K.TREE_ALG_RATIO
        ll128 = tree * np.where(single, K.TREE_LL128_FACTOR_ONE_NODE, K.TREE_LL128_FACTOR_MULTINODE)
        ll128_cap = nch * K.PER_CH_MAX_TREE_LL128_BW[arch, scale]
        bw[:, TREE, LL128] = np.minimum(ll128, ll128_cap) * K.TREE_ALG_RATIO
        bw[:, TREE, SIMPLE] = tree * K.TREE_ALG_RATIO

        # NVLS-Tree: NVLink SHARP inside each node, a tree of NICs between nodes (the rates
        # per channel: nvls_tree_rates)
        nvls_ch = np.maximum(m, 1)
        per_ch = np.minimum.reduce(nvls_tree_rates(sa, nic))
        ok = multi & sa.nvls & (nvls_ch >= 2)
        bw[:, NVLS_TREE, SIMPLE] = np.where(ok, nvls_ch * per_ch * ring_ratio, 0.0)

        # CollNet (InfiniBand SHARP): reductions in the switches, when enabled.
        cn = multi & sa.sharp
        bus_cn = np.maximum(m, 1) * nic
        ratio = k / np.maximum(m, 1)
        ratio = ratio - (ratio - 1) * K.COLLNET_SHARED_NIC_RELIEF
        direct = bus_cn / ratio * np.where(arch >= K.ARCH_INDEX["hopper"], K.COLLNET_SM90_FACTOR, 1)
        bw[:, CN_DIRECT, SIMPLE] = np.where(cn, direct * K.TREE_ALG_RATIO, 0.0)
        bw[:, CN_CHAIN, SIMPLE] = np.where(cn, bus_cn * K.TREE_ALG_RATIO, 0.0)

    if ar or agrs:
        # NVLS inside one node: one channel per GPU at the NVLS graph's per-channel speed.
        heads = k
        part = K.NVLS_ALLREDUCE_PIPELINE if ar else (k - 1) / k
        nvls_bus = heads * sa.nvls_ch * K.NVLS_EFFICIENCY[arch] * (heads - 1) / heads * part
        ok = single & sa.nvls & (heads >= 2)
        bw[:, NVLS, SIMPLE] = np.where(ok, nvls_bus * (ring_ratio if ar else 1.0), 0.0)
    if agrs:
        # PAT: with one GPU per node, a logarithmic all-gather / reduce-scatter.
        ok = multi & (k == 1)
        bw[:, PAT, SIMPLE] = np.where(ok, bus_ring * K.PAT_FACTOR, 0.0)

    return latencies(sa, op, delta, tuner), bw, runtime_channels


def _tree_correction(sizes: np.ndarray) -> np.ndarray:
    """NCCL's size-dependent tree efficiency, (..., P)."""
    idx = np.floor(np.log2(np.maximum(sizes, 64) / 64)).astype(int)
    inside = (idx >= 0) & (idx < K.TREE_CORRECTION_MAX_INDEX)
    at = np.minimum(np.maximum(idx, 0), _TREE_CORRECTION_BY_INDEX.shape[0] - 1)
    return np.where(inside[..., None], _TREE_CORRECTION_BY_INDEX[at], 1.0)


# NCCL's tree correction by size index, (index, P)
_TREE_CORRECTION_BY_INDEX = np.ascontiguousarray(K.TREE_CORRECTION.T)


def as_sizes(sizes: np.ndarray | float, n: int) -> np.ndarray:
    """``sizes`` as a float array of shape (n, S), from anything that broadcasts to it."""
    sizes = np.asarray(sizes, dtype=float)
    if sizes.ndim == 2 and sizes.shape[0] == n:
        return sizes
    return np.broadcast_to(sizes, (n, np.shape(sizes)[-1]))


def _times(
    sa: SystemArrays,
    op: str,
    sizes: np.ndarray,
    slowdown: np.ndarray | float,
    step_latencies: Sequence[tuple[np.ndarray | None, bool]],
) -> tuple[list[np.ndarray], np.ndarray, list[tuple[int, np.ndarray]]]:
    """NCCL's estimate (N, S, A, P) with each of ``step_latencies`` (the per-step network latency,
    None: the physical one; whether counted as the tuner counts steps), and what it leaves
    out: the tree's pipeline fill (N, S, P) and the time a small message adds on fewer
    channels (``few_channels_us``). Only the latencies depend on these: the rest is computed
    once for all of them."""
    lat, bw, nch_rt = tables(sa, op, *step_latencies[0])
    lats = [lat] + [latency_table(sa, op, *d) for d in step_latencies[1:]]
    sizes = as_sizes(sizes, len(sa))
    s = sizes[:, :, None, None]
    eff_bw = np.empty((len(sa), sizes.shape[1], A, P))
    eff_bw[...] = bw[:, None]
    if op == "all_reduce":
        eff_bw[:, :, TREE, :] *= _tree_correction(sizes)
    tree_fill = np.zeros((*sizes.shape, P))
    if op == "all_reduce":
        plateau = (sa.nodes > 1)[:, None] & (
            sizes / (nch_rt[:, None] * (sa.nodes * sa.k)[:, None])
            >= K.RING_PLATEAU_BYTES_PER_RANK_CHANNEL
        )
        plateau_factor = np.where(plateau, K.RING_PLATEAU_LAT_FACTOR, 1.0)
        tree_fill, nvls_tree_fill = tree_fill_us(sa, sizes, bw, nch_rt)
    slow = np.asarray(slowdown, dtype=float)
    if slow.ndim == 2:  # (N, A): one factor per configuration and algorithm
        slow = slow[:, None, :, None]
    with np.errstate(divide="ignore"):
        bw_term = s * slow / (1000.0 * eff_bw)
    available = eff_bw > 0
    out = []
    for lat in lats:
        lat_s = np.empty(eff_bw.shape)
        lat_s[...] = lat[:, None]
        if op == "all_reduce":
            lat_s[:, :, RING, SIMPLE] *= plateau_factor
            # NVLS-Tree's fill counts in the choice too, though NCCL's estimate has none: left
            # out, the estimate alone picks NVLS-Tree from 4 MiB on two nodes, where the
            # published runs match the tree's LL128 times (and are 20-50 % faster than
            # NVLS-Tree with its fill), so NCCL's own NVLS-Tree figure there is higher than
            # latency + bytes / bandwidth; the fill stands in for what it adds
            lat_s[:, :, NVLS_TREE, SIMPLE] += nvls_tree_fill
        out.append(np.where(available, lat_s + bw_term, np.inf))
    return out, tree_fill, few_channels_us(sa.nodes * sa.k, sizes, bw_term, nch_rt)


def times(
    sa: SystemArrays,
    op: str,
    sizes: np.ndarray,
    slowdown: np.ndarray | float = 1.0,
    delta: np.ndarray | None = None,
    mechanics: bool = True,
) -> np.ndarray:
    """Time (us) of every (algorithm, protocol) for each configuration and size.

    ``sizes`` has shape (N, S) (or broadcasts to it); the result is (N, S, A, P), with ``inf``
    where an algorithm/protocol is not available. ``slowdown`` (>= 1, scalar or (N, A)) stretches
    the bandwidth term: this is where a congestion backend's factor enters. ``delta`` replaces
    the physical per-step network latency (NCCL's tuner reads ``sa.tuner_delta``).
    ``mechanics=False`` leaves out the tree's pipeline fill and the channels a small message
    loses, as NCCL's own estimate does.
    """
    (t,), tree_fill, few_channels = _times(sa, op, sizes, slowdown, [(delta, False)])
    if mechanics:
        t[:, :, TREE] += tree_fill
        for algo, extra in few_channels:
            t[:, :, algo] += extra
    return t


def times_and_estimate(
    sa: SystemArrays, op: str, sizes: np.ndarray, slowdown: np.ndarray | float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The time (as ``times``) and NCCL's own estimate, which reads the plugin's reported
    latency, counts the ring's network steps as NCCL's tuner does and leaves out the tree's
    pipeline fill and the channels a small message loses."""
    step_latencies = [(sa.tuner_delta, True), (None, False)]
    (estimate, t), tree_fill, few = _times(sa, op, sizes, slowdown, step_latencies)
    t[:, :, TREE] += tree_fill
    for algo, extra in few:
        t[:, :, algo] += extra
    return t, estimate


def best(
    t: np.ndarray, judged: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (algorithm, protocol) per (N, S) that is fastest by ``judged`` (NCCL's own estimate;
    default ``t``): its time in ``t``, algorithm index, protocol index."""
    flat = t.reshape((*t.shape[:-2], A * P))
    by = flat if judged is None else judged.reshape(flat.shape)
    choice = np.argmin(by, axis=-1)
    # flat[..., choice], one element per (N, S)
    picked = flat.reshape(-1, A * P)[np.arange(choice.size), choice.ravel()]
    return picked.reshape(choice.shape), choice // P, choice % P
