"""Public entry points: an nccl-tests-shaped table for one system, and a vectorised sweep."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.busbw import algbw_GBps, bus_factor
from fabricplan.collectives.congestion import CongestionBackend, NoCongestion
from fabricplan.collectives.model import (
    RING,
    TABLE_OPS,
    SystemArrays,
    as_sizes,
    best,
    times_and_estimate,
)
from fabricplan.collectives.p2p import p2p_times
from fabricplan.collectives.system import CommSystem

# nccl-tests' usual sweep: -b 8 -e 16G -f 2
DEFAULT_SIZES = tuple(2**i for i in range(3, 35))

ALGO_NAMES = {a.replace("_", ""): i for i, a in enumerate(K.ALGORITHMS)} | {
    "collnet": K.ALGO_INDEX["collnet_direct"],
}


def _mask(names: Iterable[str] | None, index: dict[str, int], size: int, what: str) -> np.ndarray:
    if names is None:
        return np.ones(size, dtype=bool)
    mask = np.zeros(size, dtype=bool)
    for name in names:
        key = name.strip().lower().replace("_", "")
        if key not in index:
            raise ValueError(f"unknown {what} '{name}'; known: {', '.join(sorted(index))}")
        mask[index[key]] = True
        if key == "collnet":
            mask[K.ALGO_INDEX["collnet_chain"]] = True
    return mask


@dataclass(frozen=True)
class SweepResult:
    """Arrays of shape (N, S): the chosen algorithm's time and bandwidths per point."""

    time_us: np.ndarray
    algbw_GBps: np.ndarray
    busbw_GBps: np.ndarray
    algorithm: np.ndarray  # index into ALGORITHMS, or -1 for point-to-point
    protocol: np.ndarray  # index into PROTOCOLS


def fastest(
    sa: SystemArrays,
    op: str,
    sizes: np.ndarray,
    *,
    backend: CongestionBackend | None = None,
    algorithms: Iterable[str] | None = None,
    protocols: Iterable[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The time (us) of ``op`` for N configurations at sizes of shape (S,) or (N, S), by the
    algorithm and protocol NCCL runs (their indices; algorithm -1 for point-to-point), each
    of shape (N, S): :func:`sweep` without the bandwidths."""
    sizes = as_sizes(sizes, len(sa))
    # None allows all: no mask then (np.where over an all-true mask changes nothing)
    proto_mask = None
    if protocols is not None:
        proto_index = {p.lower(): i for i, p in enumerate(K.PROTOCOLS)}
        proto_mask = _mask(protocols, proto_index, 3, "protocol")
    # else what each system's deployment sets (the fabric's NCCL_ALGO / NCCL_PROTO, (N, A) and
    # (N, P)): a selection given here replaces it, as an environment variable set by hand does
    sys_algo = None if algorithms is not None or sa.algo_ok.all() else sa.algo_ok
    sys_proto = None if protocols is not None or sa.proto_ok.all() else sa.proto_ok
    slow = (backend or NoCongestion()).slowdown(sa, op)
    if op in TABLE_OPS:
        # NCCL picks by its own estimate (ncclTopoGetAlgoTime: latency + bytes / bandwidth),
        # which has the plugin's reported latency and none of the tree's fill and drain
        t, judged = times_and_estimate(sa, op, sizes, slow)
        if algorithms is not None or proto_mask is not None:
            algo_mask = _mask(algorithms, ALGO_NAMES, len(K.ALGORITHMS), "algorithm")
            allowed = algo_mask[:, None] & (True if proto_mask is None else proto_mask[None, :])
            t = np.where(allowed, t, np.inf)
            judged = np.where(allowed, judged, np.inf)
        if sys_algo is not None or sys_proto is not None:
            ok_a = True if sys_algo is None else sys_algo[:, None, :, None]  # (N, 1, A, 1)
            ok_p = True if sys_proto is None else sys_proto[:, None, None, :]  # (N, 1, 1, P)
            t = np.where(ok_a & ok_p, t, np.inf)
            judged = np.where(ok_a & ok_p, judged, np.inf)
        return best(t, judged)
    # point-to-point runs outside NCCL's algorithms: one factor, the ring column's
    t = p2p_times(sa, op, sizes, slow[:, RING])
    if proto_mask is not None:
        t = np.where(proto_mask, t, np.inf)
    if sys_proto is not None:
        t = np.where(sys_proto[:, None, :], t, np.inf)
    proto = np.argmin(t, axis=-1)
    # t[..., proto], one element per (N, S)
    t_best = t.reshape(-1, t.shape[-1])[np.arange(proto.size), proto.ravel()].reshape(proto.shape)
    return t_best, np.full(proto.shape, -1), proto


def sweep(
    sa: SystemArrays,
    op: str,
    sizes: np.ndarray,
    *,
    backend: CongestionBackend | None = None,
    algorithms: Iterable[str] | None = None,
    protocols: Iterable[str] | None = None,
) -> SweepResult:
    """Predict ``op`` for N configurations at sizes of shape (S,) or (N, S) in one call."""
    sizes = as_sizes(sizes, len(sa))
    t_best, algo, proto = fastest(
        sa, op, sizes, backend=backend, algorithms=algorithms, protocols=protocols
    )
    alg = algbw_GBps(sizes, t_best)
    bus = alg * np.asarray(bus_factor(op, sa.nodes * sa.k))[:, None]
    return SweepResult(t_best, alg, bus, algo, proto)


@dataclass(frozen=True)
class CollectiveRow:
    size_bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str


@dataclass(frozen=True)
class CollectiveTable:
    op: str
    system: CommSystem
    rows: tuple[CollectiveRow, ...]
    backend: str
    warnings: tuple[str, ...] = ()  # what the caller should know about the system asked for

    def to_dict(self) -> dict:
        return {
            "op": self.op,
            "system": asdict(self.system),
            "nranks": self.system.nranks,
            "p2p_latency_us": self.system.p2p_latency_us,
            "congestion_backend": self.backend,
            "rows": [asdict(r) for r in self.rows],
            "warnings": list(self.warnings),
        }


def predict(
    system: CommSystem,
    op: str,
    sizes: Sequence[int] | None = None,
    *,
    backend: CongestionBackend | None = None,
    algorithms: Iterable[str] | None = None,
    protocols: Iterable[str] | None = None,
) -> CollectiveTable:
    """What nccl-tests should report for ``op`` on ``system`` (one row per size)."""
    if system.nranks < 2:
        raise ValueError("a collective needs at least 2 GPUs")
    sizes = list(sizes or DEFAULT_SIZES)
    sa = SystemArrays.of([system])
    r = sweep(
        sa,
        op,
        np.array(sizes, dtype=float),
        backend=backend,
        algorithms=algorithms,
        protocols=protocols,
    )
    rows = tuple(
        CollectiveRow(
            size_bytes=int(size),
            time_us=float(r.time_us[0, i]),
            algbw_GBps=float(r.algbw_GBps[0, i]),
            busbw_GBps=float(r.busbw_GBps[0, i]),
            algorithm=K.ALGO_DISPLAY[K.ALGORITHMS[r.algorithm[0, i]]]
            if r.algorithm[0, i] >= 0
            else "P2P",
            protocol=K.PROTOCOLS[r.protocol[0, i]],
        )
        for i, size in enumerate(sizes)
    )
    return CollectiveTable(op, system, rows, (backend or NoCongestion()).name)
