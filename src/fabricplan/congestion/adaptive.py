"""Adaptive routing's choice at one hop: each piece takes the least loaded closer port, and
pieces at one switch heading the same way spread over the ports in load order, as successive
per-packet decisions of a switch's adaptive routing would."""

from __future__ import annotations

import numpy as np

# Random tie-break added to a port's load (GB/s) when ranking ports: far below any real load
# difference, so it only orders equal loads.
TIE_JITTER_GBPS = 1e-9


def adaptive_pick(
    ok: np.ndarray,
    cand: np.ndarray,
    count: np.ndarray,
    key: np.ndarray,
    load: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Column of ``ok`` each piece takes: the least loaded candidate (ties broken by a
    nanoscale random jitter), and for pieces at one switch heading the same way (equal
    ``key``) the next ones in load order, as successive per-packet decisions would."""
    jitter = rng.random(ok.shape)  # drawn for every piece, as the other rows need theirs
    col = np.argmax(ok, axis=1)  # the only candidate, where there is one
    # A row's order is its own (each row sorts alone) and pieces with equal keys share
    # their candidates, so the rows with a choice are ranked among themselves.
    multi = np.flatnonzero(count > 1)
    if not len(multi):
        return col
    score = np.where(ok[multi], load[np.maximum(cand[multi], 0)], np.inf)
    order = np.argsort(score + jitter[multi] * TIE_JITTER_GBPS, axis=1)
    k = key[multi]
    srt = np.argsort(k, kind="stable")
    ks = k[srt]
    starts = np.concatenate([[True], ks[1:] != ks[:-1]])
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(multi)), 0))
    rank = np.empty(len(multi), np.int64)
    rank[srt] = np.arange(len(multi)) - group_start
    col[multi] = order[np.arange(len(multi)), rank % count[multi]]
    return col
