"""The small compiled pieces of a flowlet seed's run (:mod:`.seed_kernel`): NumPy's pairwise
sum, sums per lane, the tables of a set of paths, the loops over a run's columns and the steps
of a batch of moves, each making the float operations of the Python it stands for in its order.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.fill_links import lane_links
from fabricplan.congestion.jitted import jit
from fabricplan.congestion.rebuild_kernel import depth_of, entry_levels

# NumPy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src, ``pairwise_sum``):
# below this many items a plain loop, up to the block size eight running sums, above it halves.
_PAIRWISE_UNROLL = 8
_PAIRWISE_BLOCK = 128


@jit
def _block(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's pairwise sum of at most a block: a plain loop, or eight running sums."""
    if n < _PAIRWISE_UNROLL:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r = a[lo : lo + _PAIRWISE_UNROLL].copy()
    end = lo + n - n % _PAIRWISE_UNROLL
    for i in range(lo + _PAIRWISE_UNROLL, end, _PAIRWISE_UNROLL):
        for j in range(_PAIRWISE_UNROLL):
            r[j] += a[i + j]
    res = (r[0] + r[1]) + (r[2] + r[3]) + ((r[4] + r[5]) + (r[6] + r[7]))
    for i in range(end, lo + n):
        res += a[i]
    return res


@jit
def _pairwise(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's pairwise sum of ``a[lo:lo + n]``: above a block, the sum of its halves (the first
    a multiple of eight), with a stack instead of recursion (which Numba's cache mishandles)."""
    depth = 128
    t_lo = np.empty(depth, np.int64)
    t_n = np.empty(depth, np.int64)  # -1: add the last two sums
    sums = np.empty(depth)
    tasks, n_sums = 1, 0
    t_lo[0], t_n[0] = lo, n
    while tasks:
        tasks -= 1
        k_lo, k_n = t_lo[tasks], t_n[tasks]
        if k_n < 0:
            n_sums -= 1
            sums[n_sums - 1] = sums[n_sums - 1] + sums[n_sums]
        elif k_n <= _PAIRWISE_BLOCK:
            sums[n_sums] = _block(a, k_lo, k_n)
            n_sums += 1
        else:
            half = k_n // 2
            half -= half % _PAIRWISE_UNROLL
            t_lo[tasks], t_n[tasks] = 0, -1
            t_lo[tasks + 1], t_n[tasks + 1] = k_lo + half, k_n - half
            t_lo[tasks + 2], t_n[tasks + 2] = k_lo, half
            tasks += 3
    return sums[0]


@jit
def add_reduce(a: np.ndarray) -> float:
    """``np.add.reduce`` of a 1-D float array, bit for bit (tested)."""
    return _pairwise(a, 0, len(a)) if len(a) else 0.0


@jit
def per_lane(matrix: tuple, x: np.ndarray) -> np.ndarray:
    """``a @ x`` of the lane x column CSR arrays, each lane summed in entry order."""
    indptr, indices, data = matrix
    out = np.zeros(len(indptr) - 1)
    for j in range(len(indptr) - 1):
        for k in range(indptr[j], indptr[j + 1]):
            out[j] += data[k] * x[indices[k]]
    return out


@jit
def up_pairs(lane, pp_flow, e_out, e_in, up_lane, movable, tail) -> tuple:
    """``FlowletMoves._use``: per hop flow leaving a switch upwards, the flow, the lanes it
    leaves by and came in on, and that switch."""
    up = np.empty(len(pp_flow), np.bool_)
    for i in range(len(pp_flow)):
        up[i] = up_lane[lane[e_out[i]]] and movable[pp_flow[i]]
    p_out = lane[e_out[up]]
    return pp_flow[up], p_out, lane[e_in[up]], tail[p_out]


@jit
def tables_of(built: tuple, col_of: np.ndarray, sizes: tuple, levels_from: int, most: int) -> tuple:
    """What the events read of :func:`.rebuild_kernel.rebuild`'s tables: the paths, the port
    pairs as :func:`.pfc_kernel.pfc_rates` takes them (egress, ingress, column, weight, entries
    in and out, upstream pair, port id), each pair's hop flow, the ports (keys, open-loop,
    window), the routed entries (lane, leaves a NIC, column, weight), the passes, the matrix;
    and, built once for the events on these paths, the entries and pairs by level for the
    arrivals' sweep (from ``levels_from`` entries, chains of at most ``most`` pairs, as
    ``ports.PathArrivals`` sweeps; empty below) and the lanes' links of the fill (``sizes``:
    lanes, columns, as :func:`.rebuild_kernel.rebuild` takes them)."""
    lanes, n_cols = sizes[0], sizes[1]
    routed, new, matrix, keys, first, upstream, win = built
    r_lane, r_flow, r_weight = routed
    pairs = (new[0], new[1], col_of[new[2]], new[3], new[5], new[4], upstream, keys[1])
    ports = (keys[0], win[0], win[1])
    entries = (r_lane, first, col_of[r_flow], r_weight)
    none = np.zeros(0, np.int64)
    levels = (none, none, none, none)
    if len(r_lane) >= levels_from:
        levels = entry_levels(r_lane, new[5], keys[0], lanes, most)
    passes = 0
    if len(levels[1]) == 0:  # no sweep by level: the arrivals take as many passes as the paths
        passes = depth_of(len(r_lane), new[4], new[5]) + 1
    links = lane_links(matrix, n_cols)
    return routed, pairs, new[2], ports, entries, passes, levels, matrix, links


# The loops over a run's columns and entries sit in functions of their own: inline in the long
# seed_kernel.run_seed, the compiled run of an all-to-all's 4,032 columns took a third more time
# (measured: 137-184 against 87-105 ms a seed; Numba's code for one long function, not the sums).


@jit
def add_resend(
    left: np.ndarray, resend: np.ndarray, running: np.ndarray, finite: np.ndarray
) -> None:
    """What moved flows send again joins what they have left."""
    for c in range(len(left)):
        if running[c] and finite[c]:
            left[c] = left[c] + resend[c]


@jit
def time_to_end(
    left: np.ndarray, rates: np.ndarray, running: np.ndarray, finite: np.ndarray
) -> tuple[np.ndarray, float]:
    """Each moving column's time to its last byte at its rate (us; inf for the others: not
    running, endless or at rate 0), and the least of them."""
    out = np.full(len(left), np.inf)
    least = np.inf
    for c in range(len(left)):
        if running[c] and finite[c] and rates[c] > 0:
            out[c] = left[c] / (rates[c] * 1e3)
            least = min(least, out[c])
    return out, least


@jit
def running_at(start: np.ndarray, done: np.ndarray, limit: float) -> np.ndarray:
    """The columns started by ``limit`` (us) and not done."""
    out = np.empty(len(start), np.bool_)
    for c in range(len(start)):
        out[c] = start[c] <= limit and not done[c]
    return out


@jit
def any_open(finite: np.ndarray, done: np.ndarray) -> bool:
    """Whether a column with bytes to send is not done."""
    found = False  # (a loop with an early end: Numba compiles no generator to any())
    for c in range(len(finite)):
        if finite[c] and not done[c]:
            found = True
            break
    return found


@jit
def same_flags(a: np.ndarray, b: np.ndarray) -> bool:
    """``(a == b).all()`` of two flag arrays of one length."""
    same = True
    for c in range(len(a)):
        if a[c] != b[c]:
            same = False
            break
    return same


@jit
def next_start(start: np.ndarray, done: np.ndarray, now: float) -> float:
    """The earliest start after ``now`` of a column not done (inf: none)."""
    soonest = np.inf
    for c in range(len(start)):
        if start[c] > now and not done[c]:
            soonest = min(soonest, start[c])
    return soonest


@jit
def latest_start_by(start: np.ndarray, done: np.ndarray, now: float, limit: float) -> float:
    """The latest start after ``now`` and by ``limit`` of a column not done (the starts taken
    together with the next one)."""
    latest = -np.inf
    for c in range(len(start)):
        if start[c] > now and not done[c] and start[c] <= limit:
            latest = max(latest, start[c])
    return latest


@jit
def ending_by(to_end: np.ndarray, limit: float, ending: np.ndarray) -> float:
    """Marks in ``ending`` the columns whose last byte goes by ``limit`` us from now (the ends
    taken together with the first one), and returns the latest of those times."""
    latest = -np.inf
    for c in range(len(to_end)):
        ending[c] = to_end[c] <= limit
        if ending[c]:
            latest = max(latest, to_end[c])
    return latest


@jit
def advance(
    left: np.ndarray, rates: np.ndarray, running: np.ndarray, finite: np.ndarray, dt: float
) -> None:
    """The bytes the running columns send in ``dt`` us."""
    for c in range(len(left)):
        if running[c] and finite[c]:
            left[c] = left[c] - rates[c] * 1e3 * dt


@jit
def close_step(
    ending: np.ndarray,
    to_end: np.ndarray,
    then: float,
    now: float,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    finish: np.ndarray,
    done: np.ndarray,
    roundoff: float,
) -> None:
    """The end of a step from ``then`` to ``now``: the columns ``ending`` end at their own
    times (``then`` + ``to_end``); the running ones left with round-off of their bytes only
    (``columns``: left, sizes, running, endless or not) end now. Both are done, with nothing
    left."""
    left, size_bytes, running, finite = columns
    for c in range(len(left)):
        if ending[c]:
            finish[c] = then + to_end[c]
        elif running[c] and finite[c] and left[c] <= roundoff * max(size_bytes[c], 1):
            ending[c] = True
            finish[c] = now
        if ending[c]:
            done[c] = True
            left[c] = 0.0


@jit
def current_ports(
    at_of: np.ndarray, p_flow: np.ndarray, p_out: np.ndarray, p_switch: np.ndarray
) -> np.ndarray:
    """Per hop flow, the port it leaves the switch of its due move by (-1: none due)."""
    current = np.full(len(at_of), -1, np.int64)
    for i in range(len(p_flow)):
        if at_of[p_flow[i]] == p_switch[i]:
            current[p_flow[i]] = p_out[i]
    return current


@jit
def beyond_switch(
    c_flow: np.ndarray,
    c_lane: np.ndarray,
    at_of: np.ndarray,
    tier: np.ndarray,
    head: np.ndarray,
    up_lane: np.ndarray,
) -> np.ndarray:
    """Per routed entry of a due flow, whether it lies past the switch of the move (what a
    move replaces)."""
    out = np.empty(len(c_flow), np.bool_)
    for k in range(len(c_flow)):
        j = c_lane[k]
        below = tier[head[j]] <= tier[max(at_of[c_flow[k]], 0)]
        out[k] = not (up_lane[j] and below)
    return out


@jit
def resend_bytes(
    resend: np.ndarray,
    went: np.ndarray,
    fresh: tuple[np.ndarray, np.ndarray],
    behind: np.ndarray,
    col_of: np.ndarray,
    share_of: np.ndarray,
    push: np.ndarray,
    kb: tuple[float, float, float],
) -> None:
    """``FlowletPolicy.resend_kb`` of the flows that moved (``went``, on their ``fresh``
    entries), added to their columns' ``resend`` bytes."""
    f_lane, f_flow = fresh
    xon_kb, xoff_kb, rtt_us = kb
    worst = np.zeros(len(col_of))
    for k in range(len(f_flow)):
        worst[f_flow[k]] = max(worst[f_flow[k]], behind[f_lane[k]])
    for f in went:
        c = col_of[f]
        s = share_of[f]
        sent = push[c] * 1e3 / 1024 * rtt_us
        if worst[f] > 0:
            sent = min(sent, xoff_kb * s)
        resend[c] += (xon_kb * s + sent) * 1024


@jit
def group_bounds(n_due: int, groups: int) -> np.ndarray:
    """``np.linspace(0, n_due, min(n_due, groups) + 1).astype(np.int64)``, as NumPy computes it
    (``i * step``, the last one the end itself)."""
    k = min(n_due, groups)
    step = n_due / k
    out = np.empty(k + 1, np.int64)
    for i in range(k):
        out[i] = np.int64(i * step)
    out[k] = n_due
    return out
