"""Communication of a parallel plan, priced by the collective model and the congestion layer.

Ranks are laid out as Megatron-LM does by default (tensor fastest, then context, expert/data,
pipeline outermost), so a group of ``size`` ranks ``stride`` apart lies inside one node when
``size * stride <= gpus_per_node`` and otherwise spreads over nodes, one GPU (and its NIC) per
node once ``stride >= gpus_per_node``. Each group becomes a communicator for the collective
model; groups that cross the network also get the slowdown of the traffic pattern they create
across the job's nodes, from the congestion layer's network backend that the caller hands down
(:mod:`fabricplan.congestion.network_backend`; the flow-level simulator by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.collectives import CommSystem, SystemArrays, build_system
from fabricplan.collectives.model import PRICED_ALIKE, A
from fabricplan.collectives.nccl_constants import runtime_channels
from fabricplan.collectives.predict import fastest
from fabricplan.congestion.network_backend import (
    DEFAULT_BACKEND,
    NO_CONGESTION,
    BackendError,
    NetworkBackend,
    NotCovered,
    TooLarge,
    network_factor,
)
from fabricplan.topology import TopologyError
from fabricplan.workload import vec
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.plan import Hardware


@dataclass(frozen=True)
class ConstantSlowdown:
    """A congestion backend that stretches every algorithm's bandwidth term by one factor."""

    factor: np.ndarray  # (N,)
    name: str = "constant"

    def slowdown(self, sa: SystemArrays, op: str) -> np.ndarray:
        return np.repeat(np.asarray(self.factor, dtype=float)[:, None], A, axis=1)


@lru_cache(maxsize=64)
def base_system(hw: Hardware) -> CommSystem:
    """The whole cluster as one communicator: NIC goodput, NVLink, per-step latency, hops.
    A design the fabric cannot build is the scenario's error, not the model's."""
    try:
        return build_system(
            hw.gpu.id,
            max(hw.nodes, 1),
            hw.fabric,
            gpus_per_node=hw.gpus_per_node,
            nics_per_node=hw.nics_per_node,
            switch=hw.switch,
            design=hw.design,
            oversubscription=hw.oversubscription,
            catalog=hw.catalog,
        )
    except TopologyError as exc:
        raise WorkloadError(str(exc)) from None


@lru_cache(maxsize=64)
def _base_arrays(hw: Hardware) -> SystemArrays:
    return SystemArrays.of([base_system(hw)])


def _spread(hw: Hardware, size: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks per node and nodes of groups of ``size`` ranks ``stride`` apart (see _layout)."""
    per_node = vec.maximum(vec.floor(hw.gpus_per_node / vec.maximum(stride, 1)), 1)
    per_node = vec.minimum(per_node, size)
    return per_node, vec.maximum(vec.ceil(size / per_node), 1)


def _layout(hw: Hardware, size: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, ...]:
    """Ranks per node, nodes, NICs used per node and the NIC share each of those carries, of
    groups of ``size`` ranks ``stride`` apart (all groups run at once, each on its own share
    of the node's NICs)."""
    k, m = float(hw.gpus_per_node), float(hw.nics_per_node)
    per_node, nodes = _spread(hw, size, stride)
    nic_share = m * per_node / k
    nics = vec.maximum(vec.floor(nic_share), 1)
    return per_node, nodes, nics, vec.minimum(nic_share / nics, 1.0)


def group_arrays(hw: Hardware, size: np.ndarray, stride: np.ndarray) -> SystemArrays:
    """Communicators of ``size`` ranks ``stride`` apart, one per plan (arrays of shape (N,))."""
    base = _base_arrays(hw)
    per_node, nodes, nics, nic_part = _layout(hw, size, stride)
    each = np.zeros(len(size), dtype=int)
    return SystemArrays(
        nodes=nodes,
        k=per_node,
        m=nics,
        nic=base.nic[0] * nic_part,
        nvl=base.nvl[each],
        nvls_ch=base.nvls_ch[each],
        delta=base.delta[each],
        tuner_delta=base.tuner_delta[each],
        arch=base.arch[each],
        nvls=base.nvls[each],
        sharp=base.sharp[each],
        nvls_nch=base.nvls_nch[each],
        min_ctas=base.min_ctas[each],
        max_ctas=base.max_ctas[each],
        ch_bw=base.ch_bw[each],
        algo_ok=base.algo_ok[each],
        proto_ok=base.proto_ok[each],
    )


def _groups(size: ArrayLike, stride: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``size`` and ``stride`` as float arrays of one shape (N,), or as two scalars (one plan's,
    see vec)."""
    size, stride = vec.floats(size), vec.floats(stride)
    if not (vec.is_batch(size) or vec.is_batch(stride)):
        return size, stride
    if size.ndim == 1 and size.shape == stride.shape:
        return size, stride
    size, stride = np.atleast_1d(size), np.atleast_1d(stride)
    return np.broadcast_arrays(size, stride)  # type: ignore[return-value]


def group_nodes(hw: Hardware, size: ArrayLike, stride: ArrayLike) -> np.ndarray:
    """Nodes each group of ``size`` ranks ``stride`` apart spans (shape (N,); a scalar for
    scalars)."""
    size, stride = _groups(size, stride)
    return _spread(hw, size, stride)[1]


def spans_nodes(hw: Hardware, size: ArrayLike, stride: ArrayLike) -> np.ndarray:
    """Whether groups of ``size`` ranks ``stride`` apart cross the network (shape (N,); a
    scalar for scalars)."""
    size, stride = _groups(size, stride)
    return (size > 1) & (_spread(hw, size, stride)[1] > 1)


def nccl_sm_share(hw: Hardware, size: ArrayLike, stride: ArrayLike) -> np.ndarray:
    """Share of the GPU's SMs a collective of such a group holds while it runs: one thread
    block per channel (NCCL launches a CTA per channel), with the ring channels the collective
    model gives the group (one per NIC across nodes, one per GPU inside a node, doubled at run
    time, ``RUNTIME_CHANNEL_FACTOR``), within the channels the fabric's deployment sets (NCCL's
    own limits, 1 to NCCL_MAX_CTAS, where it sets none). 0 where the group has one rank. Shape
    (N,), or a scalar for scalars."""
    size, stride = _groups(size, stride)
    per_node, nodes, nics, _ = _layout(hw, size, stride)
    found = vec.where(nodes > 1, nics, per_node)
    base = base_system(hw)
    channels = runtime_channels(found, base.min_ctas, base.max_ctas)
    return vec.where(size > 1, channels / hw.gpu.sm_count, 0.0)


def congestion_factor(
    hw: Hardware, pattern: str, nodes: int, backend: NetworkBackend = DEFAULT_BACKEND
) -> float:
    """Expected network slowdown of ``pattern`` over ``nodes`` whole nodes of this cluster, as
    ``backend`` answers it (cached in :func:`network_factor`). A backend that cannot answer
    makes the plan a WorkloadError that says what would work."""
    if nodes < 2:
        return 1.0
    try:
        return network_factor(backend, hw.network, pattern, nodes)
    except TopologyError as exc:
        raise WorkloadError(str(exc)) from None
    except TooLarge as exc:  # e.g. a group too large to route within the memory budget
        raise WorkloadError(
            f"workload.parallel: the {pattern} traffic of a group over {nodes:,} nodes cannot be "
            f"simulated for its congestion ({exc.reason}); use a plan whose groups span fewer "
            "nodes"
        ) from None
    except NotCovered as exc:
        raise WorkloadError(
            f"--congestion {exc.backend}: {exc.reason} (here: the {pattern} traffic of a group "
            f"over {nodes:,} nodes); use --congestion {exc.instead}"
        ) from None
    except BackendError as exc:
        raise WorkloadError(
            f"cluster: the {exc.backend} congestion backend cannot price this network "
            f"({exc.reason})"
        ) from None


# congestion_factor of the hardware a step is evaluated on, kept by the hardware itself: its
# answer is network_factor's (cached), asked without building the network's description and
# hashing it again
_factor = lru_cache(maxsize=512)(congestion_factor)

Request = tuple[str, np.ndarray, np.ndarray, np.ndarray, str | None]

# Up to this many plans, the collectives of ops the model prices alike (PRICED_ALIKE) are priced
# in one call, which saves a call's fixed cost; above it, sorting out the equal collectives
# (_distinct) of each op on its own costs less than of both together.
ALIKE_MAX_PLANS = 1500


def collectives_s(
    hw: Hardware, requests: list[Request], backend: NetworkBackend
) -> list[np.ndarray]:
    """Seconds per plan for each ``(op, ranks, stride, nbytes, pattern)`` request: one collective
    of ``nbytes`` (nccl-tests size) over groups of ``ranks`` ranks ``stride`` apart; 0 where a
    group has one rank. The three arrays of a request have one shape (N,). Requests for the
    same op (or, up to ``ALIKE_MAX_PLANS`` plans, ops the model prices alike) are priced in
    one vectorised call; groups that cross the network are stretched by ``backend``'s factor
    for their pattern."""
    if not requests:
        return []
    if not vec.is_batch(requests[0][1]) or len(requests[0][1]) == 1:
        return _one_plan(hw, requests, backend)
    return _batched(hw, requests, backend)


# Prices of single collectives, kept across calls: one plan at a time (a scenario's step, a
# sweep's variants of one cluster) asks for the same groups and sizes over and over, and a
# look-up costs a microsecond where pricing one costs tens. Keyed by everything the price
# depends on: the hardware, the backend and the request itself.
ONE_PLAN_MEMO_ENTRIES = 65_536  # per hardware and backend
ONE_PLAN_MEMO_HARDWARE = 64
_one_memo: dict[tuple[Hardware, NetworkBackend], dict[tuple[object, ...], np.float64]] = {}


def _one_plan(hw: Hardware, requests: list[Request], backend: NetworkBackend) -> list[np.ndarray]:
    """collectives_s of one plan (arrays of one, or one plan's scalars: answered alike): each
    request's price from the memo, pricing the rest."""
    memo = _one_memo.get((hw, backend))
    if memo is None or len(memo) + len(requests) > ONE_PLAN_MEMO_ENTRIES:
        if len(_one_memo) >= ONE_PLAN_MEMO_HARDWARE:
            _one_memo.clear()
        memo = _one_memo[hw, backend] = {}
    batch = vec.is_batch(requests[0][1])
    first = (lambda x: float(x[0])) if batch else float
    keys = [(op, first(n), first(st), first(b), pat) for op, n, st, b, pat in requests]
    missing = []
    for i, k in enumerate(keys):
        if k in memo:
            continue
        if k[1] <= 1 or k[3] <= 0:  # one rank or nothing to send: 0, as _batched gives it
            memo[k] = np.float64(0.0)
        else:
            missing.append(i)
    if missing:
        asked = [requests[i] for i in missing]
        rows = [(op, vec.rows(n), vec.rows(st), vec.rows(b), pat) for op, n, st, b, pat in asked]
        for i, t in zip(missing, _batched(hw, rows, backend), strict=True):
            memo[keys[i]] = t[0]
    if batch:
        return [np.array([memo[k]]) for k in keys]
    return [memo[k] for k in keys]


def forget_one_plan_prices() -> None:
    """Forget every kept price of a single collective (benchmarks, tests)."""
    _one_memo.clear()


def _batched(hw: Hardware, requests: list[Request], backend: NetworkBackend) -> list[np.ndarray]:
    """collectives_s of many plans, priced in one vectorised call per op."""
    alike = PRICED_ALIKE if len(requests[0][1]) <= ALIKE_MAX_PLANS else {}
    by_op: dict[str, list[int]] = {}
    for i, (op, *_rest) in enumerate(requests):
        by_op.setdefault(alike.get(op, op), []).append(i)
    patterns: list[str | None] = [None]
    out: list[np.ndarray] = [np.zeros(0)] * len(requests)
    for op, asked in by_op.items():
        # a request of one-rank groups only (a dimension the plans do not use) is all zeros:
        # left out before the concatenation, which would otherwise copy it
        which: list[int] = []
        for i in asked:
            if requests[i][1].max() > 1:
                which.append(i)
            else:
                out[i] = np.zeros(len(requests[i][1]))
        if not which:
            continue
        # the op's requests one after another, then the rows with something to price
        lengths, pats = [], []
        for i in which:
            pattern = requests[i][4]
            if pattern not in patterns:
                patterns.append(pattern)
            lengths.append(len(requests[i][1]))
            pats.append(patterns.index(pattern))
        size = np.concatenate([requests[i][1] for i in which], dtype=float)
        stride = np.concatenate([requests[i][2] for i in which], dtype=float)
        nbytes = np.concatenate([requests[i][3] for i in which], dtype=float)
        live = np.flatnonzero((size > 1) & (nbytes > 0))
        every = np.zeros(len(size))
        if len(live):
            size, stride, nbytes = size[live], stride[live], nbytes[live]
            pat = np.repeat(pats, lengths)[live]
            rows, back = _distinct(hw, pat, size, stride, nbytes)
            if rows is not None:
                size, stride, nbytes, pat = size[rows], stride[rows], nbytes[rows], pat[rows]
            t = _priced(hw, op, size, stride, nbytes, pat, patterns, backend)
            every[live] = t if back is None else t[back]
        start = 0
        for i, n in zip(which, lengths, strict=True):
            out[i] = every[start : start + n]
            start += n
    return out


# From this many collectives of one op on, equal ones are priced once: a search or sweep repeats
# the same group and size across many plans, and sorting them out costs less than pricing each
# (below it, the sort's fixed cost is more than it saves).
DISTINCT_MIN_ROWS = 256


def _distinct(
    hw: Hardware, pat: np.ndarray, size: np.ndarray, stride: np.ndarray, nbytes: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The rows that are distinct in (pattern, ranks, stride, bytes), and for every row the
    index of its distinct row; (None, None) when there are too few rows to be worth it."""
    if len(size) < DISTINCT_MIN_ROWS:
        return None, None
    # one exact integer per (pattern, ranks, stride): both are whole numbers up to the cluster
    width = float(hw.gpus + 1)
    group = (pat * width + size) * width + stride
    _, by_bytes = np.unique(nbytes, return_inverse=True)
    key = group.astype(np.int64) * (int(by_bytes.max()) + 1) + by_bytes
    _, rows, back = np.unique(key, return_index=True, return_inverse=True)
    return rows, back


def _priced(
    hw: Hardware,
    op: str,
    size: np.ndarray,
    stride: np.ndarray,
    nbytes: np.ndarray,
    pat: np.ndarray,
    patterns: list[str | None],
    backend: NetworkBackend,
) -> np.ndarray:
    """Seconds of each collective (one row each), congestion included."""
    sa = group_arrays(hw, size, stride)
    factor = np.ones(len(size))
    # an ideal fabric stretches nothing: skip asking it, so that its trivial answers do not
    # take the cache's room from simulated ones
    if backend != NO_CONGESTION:
        crossing = (sa.nodes > 1) & (pat > 0)
        for k, n in set(zip(pat[crossing].tolist(), sa.nodes[crossing].tolist(), strict=True)):
            # the pattern runs on every rail at once, across the nodes a group spans
            pattern = patterns[k]
            assert pattern is not None
            factor[(pat == k) & (sa.nodes == n)] = _factor(hw, pattern, int(n), backend)
    t_us = fastest(sa, op, nbytes[:, None], backend=ConstantSlowdown(factor))[0]
    return t_us[:, 0] * 1e-6
