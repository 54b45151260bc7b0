"""ECMP collisions in closed form: the maximum load of m balls in n bins.

Hashing m equal flows onto n equal paths is throwing m balls into n bins. The exact law of the
fullest bin follows from Poisson conditioning: with X_i independent Poisson(m/n),
P(max <= k) = P(all X_i <= k) * P(sum = m | all <= k) / P(sum = m) (Raab & Steger, "Balls
into Bins - A Simple and Tight Analysis", RANDOM 1998, use the same device for their bounds).

A synchronous collective runs at the pace of its worst link, so its expected slowdown is the
expected worst load over every group of links its flows are hashed onto, relative to what one
link carries.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.signal import fftconvolve
from scipy.stats import poisson

from fabricplan.congestion import traffic as T
from fabricplan.congestion.network import Network
from fabricplan.topology.graph import E_LEAF_SPINE

# The law is evaluated for k = ceil(m/n), ... only until it reaches 1 within this tolerance.
CDF_TOLERANCE = 1e-12


def _power(pmf: np.ndarray, times: int, length: int) -> np.ndarray:
    """pmf convolved with itself ``times`` times, truncated to ``length`` entries."""
    out = np.zeros(length)
    out[0] = 1.0
    base = pmf[:length].copy()
    while times:
        if times & 1:
            out = np.clip(fftconvolve(out, base)[:length], 0.0, None)
        times >>= 1
        if times:
            base = np.clip(fftconvolve(base, base)[:length], 0.0, None)
    return out


@lru_cache(maxsize=1024)
def max_load_cdf(m: int, n: int) -> np.ndarray:
    """P(fullest bin <= k) for k = 0..m, m balls thrown uniformly into n bins."""
    out = np.zeros(m + 1)
    if m == 0 or n == 1:
        out[m if n == 1 else 0 :] = 1.0
        return out
    lam = m / n
    p_sum = poisson.pmf(m, m)  # the sum of n Poisson(m/n) is Poisson(m)
    for k in range(int(np.ceil(lam)), m + 1):  # no bin can hold fewer than m/n at most
        f = poisson.cdf(k, lam)
        trunc = poisson.pmf(np.arange(k + 1), lam) / f
        conv = _power(trunc, n, m + 1)
        out[k] = min(1.0, f**n * conv[m] / p_sum)
        if out[k] >= 1 - CDF_TOLERANCE:
            out[k:] = 1.0
            break
    return np.maximum.accumulate(out)


def expected_max_load(m: int, n: int) -> float:
    cdf = max_load_cdf(m, n)
    return float(np.sum(1.0 - cdf[:-1])) if m else 0.0


def _groups(net: Network, tr: T.Traffic, qps: int) -> list[tuple[int, int]]:
    """(balls, bins) of every link group the flows are hashed over: each leaf's uplinks and
    each leaf's downlinks from the spines; in a 3-tier Clos also each pod's spine-core links."""
    sw0, _, heads = net.switch_table
    s_leaf, d_leaf = net.leaf_of(tr.src), net.leaf_of(tr.dst)
    cross = s_leaf != d_leaf
    kinds = net.graph.vertex_kind
    groups = []
    for leaves in (s_leaf[cross], d_leaf[cross]):
        ids, balls = np.unique(leaves, return_counts=True)
        for leaf, b in zip(ids, balls, strict=True):
            ups = heads[leaf - sw0]
            up = (ups >= 0) & (kinds[np.maximum(ups, 0) + sw0] > kinds[leaf])
            groups.append((int(b) * qps, max(int(np.count_nonzero(up)), 1)))
    return groups


def collision_slowdown(net: Network, tr: T.Traffic, qps: int, per_flow_GBps: float) -> float:
    """Expected slowdown of coupled flows hashed by ECMP: E[max(1, worst load / capacity)].

    Only the leaf tier is counted (exact on 2-tier Clos; a lower bound with a core tier)."""
    groups = _groups(net, tr, qps)
    if not groups:
        return 1.0
    top = max(b for b, _ in groups)
    cdf = np.ones(top + 1)
    for balls, bins in groups:
        c = max_load_cdf(balls, bins)
        full = np.ones(top + 1)
        full[: len(c)] = c
        cdf *= full
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    fabric = net.kind == E_LEAF_SPINE
    lane = float(np.median(net.capacity[fabric])) if fabric.any() else per_flow_GBps
    load = np.arange(top + 1) * per_flow_GBps / qps / lane
    return float(np.sum(pmf * np.maximum(load, 1.0)))
