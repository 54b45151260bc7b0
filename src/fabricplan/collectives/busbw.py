"""algbw and busbw exactly as nccl-tests defines them (doc/PERFORMANCE.md)."""

from __future__ import annotations

import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
OP_ALIASES = {
    **{op: op for op in OPS},
    **{op.replace("_", ""): op for op in OPS},
    **{op + "_perf": op for op in OPS},
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "all2all": "alltoall",
    "bcast": "broadcast",
}


def resolve_op(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    op = OP_ALIASES.get(key) or OP_ALIASES.get(key.replace("_", ""))
    if op is None:
        raise ValueError(f"unknown collective '{name}'; known: {', '.join(OPS)}")
    return op


def bus_factor(op: str, nranks: int | np.ndarray) -> float | np.ndarray:
    """busbw / algbw: what each rank must move relative to the buffer size.

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce and
    sendrecv 1 (their bottleneck is one link, not the ring).
    """
    n = np.asarray(nranks, dtype=float)
    if op == "all_reduce":
        f = 2 * (n - 1) / n
    elif op in ("all_gather", "reduce_scatter", "alltoall"):
        f = (n - 1) / n
    else:
        f = np.ones_like(n)
    return float(f) if f.ndim == 0 else f


def algbw_GBps(size_bytes: np.ndarray | float, time_us: np.ndarray | float) -> np.ndarray:
    """Buffer size over time, in GB/s (1 GB = 1e9 bytes)."""
    return np.asarray(size_bytes, dtype=float) / (np.asarray(time_us, dtype=float) * 1e3)
