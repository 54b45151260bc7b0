"""The flow simulator's inner loops, compiled: they run at every event of every seed.

Max-min sharing by progressive filling, one bottleneck at a time (Bertsekas & Gallager,
*Data Networks*, 2nd ed., section 6.5.2): raise every unsettled flow's rate together; the
link whose fair share (residual capacity / weight of its unsettled flows) is least saturates
first and settles its flows at that share. Taken link by link from a heap, each flow settles
once and each settlement updates only the links on its own path, so the whole fill costs
O(non-zeros x log links), against a round of sparse products per bottleneck level in array
code (an all-to-all over 1,024 GPUs has about 80 such levels per event): in
:mod:`~fabricplan.congestion.fill_kernel`.

What each ingress port brings to the egress port after it, settled pass by pass along the
paths (:class:`fabricplan.congestion.ports.PathArrivals`).

Numba compiles each on first use and keeps the machine code beside this file, so later
processes load it.
"""

from __future__ import annotations

from functools import cache

import numpy as np

# Problems (non-zeros of the flow x link matrix, routed entries) from which the compiled
# kernels are used. Numba costs a process about 0.35 s the first time (0.14 s to import, 0.2 s
# to set up and load a cached kernel): array code is faster below this size, where advise's
# congestion cases all fall (at most ~10k non-zeros on 16k GPUs); an all-to-all over 128 hosts
# (65k) is above it. A seed's whole compiled run (seed_kernel), taken at any size in a process
# that holds the kernels, sweeps the arrivals level by level from this size, as the array code.
COMPILED_MIN_SIZE = 20_000


def _brought(
    lane: np.ndarray,
    first: np.ndarray,
    col: np.ndarray,
    weight: np.ndarray,
    push: np.ndarray,
    capacity: np.ndarray,
    pair_in: np.ndarray,
    pair_out: np.ndarray,
    pair_weight: np.ndarray,
    sel: np.ndarray,
    passes: int,
    levels: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """Per selected port pair: what its ingress entry delivers to its egress entry.

    Routed entries (``lane``, column ``col``, share ``weight`` of the column's rate) start with
    what their senders push into the fabric (``first``: the entry leaves a NIC) plus what their
    feeding pairs deliver; a lane fed more than its capacity delivers each of its entries in
    proportion (FIFO). A pair gets ``pair_weight / weight[pair_in]`` of its ingress entry.

    ``levels`` (entries grouped by their lane's level, pairs by their ingress lane's: orders
    and group pointers, see ``ports.lane_levels``), when lanes feed each other without loops
    (up/down routing): one sweep, level by level, since a lane's load is whole once every lower
    level has delivered into it. Empty pointers: ``passes`` passes over every pair instead."""
    entry_order, entry_ptr, pair_order, pair_ptr = levels
    n = len(lane)
    start = np.zeros(n)
    for i in range(n):
        if first[i]:
            start[i] = push[col[i]] * weight[i]
    arr = start.copy()
    load = np.zeros(len(capacity))
    m = len(sel)
    bring = np.zeros(m)
    if len(entry_ptr) > 1:
        slot = np.full(len(pair_in), -1, np.int64)  # each selected pair's place in ``sel``
        for k in range(m):
            slot[sel[k]] = k
        for level in range(len(entry_ptr) - 1):
            for t in range(entry_ptr[level], entry_ptr[level + 1]):
                load[lane[entry_order[t]]] += arr[entry_order[t]]
            for t in range(pair_ptr[level], pair_ptr[level + 1]):
                k = pair_order[t]
                if slot[k] < 0:
                    continue
                e = pair_in[k]
                fifo = min(1.0, capacity[lane[e]] / max(load[lane[e]], 1e-300))
                bring[slot[k]] = arr[e] * fifo * pair_weight[k] / max(weight[e], 1e-300)
                arr[pair_out[k]] += bring[slot[k]]
        return bring
    e_in = np.empty(m, np.int64)
    e_out = np.empty(m, np.int64)
    part = np.empty(m)
    for k in range(m):
        e_in[k] = pair_in[sel[k]]
        e_out[k] = pair_out[sel[k]]
        part[k] = pair_weight[sel[k]] / max(weight[e_in[k]], 1e-300)
    fifo = np.ones(len(capacity))
    for _ in range(passes):
        load[:] = 0.0
        for i in range(n):
            load[lane[i]] += arr[i]
        for j in range(len(capacity)):
            fifo[j] = min(1.0, capacity[j] / max(load[j], 1e-300))
        for k in range(m):
            bring[k] = arr[e_in[k]] * fifo[lane[e_in[k]]] * part[k]
        arr[:] = start
        for k in range(m):
            arr[e_out[k]] += bring[k]
    return bring


def _dcqcn_fluid(
    n: np.ndarray,
    cap: np.ndarray,
    r_max: np.ndarray,
    pause_at: np.ndarray,
    params: np.ndarray,
    flags: np.ndarray,
    sizes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The DCQCN fluid model of ``dcqcn._integrate``, key by key (each key is independent).

    ``params``: kmin, kmax, pmax, limit, b, tau, tau_a, timer, r_ai, g, fast_recovery, dt,
    min_rate, certain_mark_log, exp_limit, KB per packet (packets and microseconds);
    ``flags``: ecn, pfc; ``sizes``: steps, lag, every. Returns the cumulative sums (4, steps
    + 1, keys) of pause share, utilisation, dropped and sent, and the queue samples (KB)."""
    kmin, kmax, pmax, limit, b, tau, tau_a, timer = params[:8]
    r_ai, g, f, dt, min_rate, certain, exp_limit, pkt = params[8:16]
    ecn, pfc = flags[0], flags[1]
    steps, lag, every = sizes[0], sizes[1], sizes[2]
    k = len(n)
    cum = np.zeros((4, steps + 1, k))
    n_samples = (steps + every - 1) // every
    samples = np.zeros((n_samples, k))
    hist_p = np.zeros(lag)
    hist_r = np.zeros(lag)
    for j in range(k):
        rc = r_max[j]
        rt = r_max[j]
        alpha = 1.0
        queue = 0.0
        hist_p[:] = 0.0
        hist_r[:] = rc
        s_pause = s_util = s_drop = s_sent = 0.0
        for i in range(steps):
            p_now = 0.0
            if ecn and queue > kmin:
                p_now = 1.0 if queue > kmax else (queue - kmin) / (kmax - kmin) * pmax
            p = hist_p[i % lag]
            r = hist_r[i % lag]
            hist_p[i % lag] = p_now
            hist_r[i % lag] = rc
            if p > 0:
                lp = certain if p >= 1 else np.log1p(-min(p, 1 - 1e-12))
                cut = -np.expm1(tau * r * lp)
                # p / ((1 - p)^-m - 1) for m = b and m = timer x r packets: the rate of "m
                # packets in a row unmarked" events per packet (0 once marks are certain)
                e_b, e_t = -b * lp, -timer * r * lp
                den_b = np.expm1(e_b) if e_b <= exp_limit else 0.0
                den_t = np.expm1(e_t) if e_t <= exp_limit else 0.0
                inc_b = p / den_b if den_b > 0 else 0.0
                inc_t = p / den_t if den_t > 0 else 0.0
                ai_b = np.exp(f * b * lp) * inc_b
                ai_t = np.exp(f * timer * r * lp) * inc_t
                mark = -np.expm1(tau_a * r * lp)
            else:
                cut = 0.0
                mark = 0.0
                inc_b = 1.0 / b
                ai_b = inc_b
                inc_t = 1.0 / (timer * max(r, min_rate))
                ai_t = inc_t
            d_alpha = g / tau_a * (mark - alpha)
            d_rt = -(rt - rc) / tau * cut + r_ai * r * (ai_b + ai_t)
            d_rc = -rc * alpha / (2 * tau) * cut + (rt - rc) / 2 * r * (inc_b + inc_t)
            alpha = min(max(alpha + d_alpha * dt, 0.0), 1.0)
            rt = min(max(rt + d_rt * dt, 0.0), r_max[j])
            rc = min(max(rc + d_rc * dt, min_rate), rt if rt > 0 else r_max[j])
            sent = n[j] * rc
            over = sent > cap[j]
            paused = 0.0
            dropped = 0.0
            arrive = sent
            if pfc:  # feeding ports held back this share of the time
                if queue >= pause_at[j] and over:
                    paused = 1.0 - cap[j] / sent
                    arrive = cap[j]
            elif queue >= limit and over:
                dropped = 1.0 - cap[j] / sent
            out = cap[j] if queue > 0 else min(arrive, cap[j])
            queue = max(queue + (arrive * (1 - dropped) - out) * dt, 0.0)
            if not pfc:
                queue = min(queue, limit)
            s_pause += paused
            s_util += out / cap[j]
            s_drop += dropped * sent
            s_sent += sent
            cum[0, i + 1, j] = s_pause
            cum[1, i + 1, j] = s_util
            cum[2, i + 1, j] = s_drop
            cum[3, i + 1, j] = s_sent
            if i % every == 0:
                samples[i // every, j] = queue * pkt
    return cum, samples


def _jit(fn):
    import numba  # here, not at module level: the CLI's start-up never pays for it

    return numba.njit(cache=True, nogil=True)(fn)


@cache
def fill():
    """The max-min fill, compiled (:func:`.fill_kernel.fill`)."""
    from fabricplan.congestion.fill_kernel import fill as compiled  # imports Numba

    return compiled


def loaded() -> bool:
    """Whether this process holds the compiled max-min fill already (a large run, or a
    long-lived process that had one): small problems then use it too, at no start-up cost."""
    return fill.cache_info().currsize > 0


@cache
def brought():
    """:func:`_brought`, compiled."""
    return _jit(_brought)


@cache
def dcqcn_fluid():
    """:func:`_dcqcn_fluid`, compiled."""
    return _jit(_dcqcn_fluid)
