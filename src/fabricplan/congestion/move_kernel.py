"""A batch of flowlet moves, compiled: the groups of :meth:`.flowlet.FlowletMoves.change`, each
judging its flows on the queues the groups before it left, and the new paths of the flows that
move, chosen as :meth:`.network.Network.route` chooses them for flowlet routing (up-down paths,
one queue pair: the switch sends a new flowlet to its least-loaded closer port, equal ones split
at random).

It draws from the run's generator exactly what the array code it replaced drew, in the same
order (Numba's ``Generator`` methods advance the generator they are given and give the values
NumPy's do), so runs give, bit for bit, what they gave with the array code. A batch of an
incast's moves was a few dozen array calls per group and a route call of about 0.1 ms each
(about 1 ms a batch); in one compiled call it is 30-40 us.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import by_group, jit, level_of, wrap


@jit
def _route_into(
    go: np.ndarray,
    start: np.ndarray,
    target: np.ndarray,
    standing: tuple[np.ndarray, np.ndarray, np.ndarray],
    tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    jitter_gbps: float,
    rng: np.random.Generator,
    entries: tuple[np.ndarray, np.ndarray],
    scratch: np.ndarray,
) -> int:
    """New paths of flows ``go`` from switch ``start`` (local numbers) towards row ``target``
    of the hop counts ``dist`` (``tables``: ``dist``, each switch's ports ``out`` and the
    switches they lead to ``heads``, each flow's receiver's downlink): the downlinks, then hop
    by hop each flow still short of its leaf takes the closer port with the least standing
    load, a lane's queue level plus its ``used`` weight (``standing``: queues, level
    thresholds, ``used``; ``+ jitter_gbps`` x a uniform draw per port, drawn per hop for the
    flows still moving, flow by flow, port by port: the order of one (flows, ports) array of
    draws). Entries (lane, index into ``go``) in the order the array router gives them,
    written into ``entries`` (room for every flow's hops), with ``scratch`` (2 x at least
    ``len(go)``) for the flows' switches and the flows still moving: a batch of moves routes
    group after group into arrays it makes once. Returns how many entries it wrote."""
    dist, out, heads, down_lane = tables
    queue, level_kb, used = standing
    lanes, flows = entries
    n = len(go)
    width = out.shape[1]
    for i in range(n):
        lanes[i] = down_lane[go[i]]
        flows[i] = i
    k = n
    at = scratch[0]
    moving = scratch[1]
    for i in range(n):
        at[i] = start[i]
        moving[i] = i
    n_moving = n
    while True:
        keep = 0
        for j in range(n_moving):
            i = moving[j]
            if dist[target[i], at[i]] > 0:
                moving[keep] = i
                keep += 1
        n_moving = keep
        if keep == 0:
            break
        # the draws in the order of one (flows, ports) array of them: flow by flow, port by port
        for j in range(keep):
            i = moving[j]
            v, d = at[i], dist[target[i], at[i]]
            best, col = np.inf, -1
            for c in range(width):
                lane = out[v, c]
                closer = lane >= 0 and dist[target[i], heads[v, c]] == d - 1
                load = level_of(queue[lane], level_kb) + used[lane] if closer else np.inf
                score = load + rng.random() * jitter_gbps
                if col < 0 or score < best:
                    best, col = score, c
            if not (out[v, col] >= 0 and dist[target[i], heads[v, col]] == d - 1):
                raise ValueError("no route between two NICs of the fabric")
            lanes[k], flows[k] = out[v, col], i
            at[i] = heads[v, col]
            k += 1
    return k


@jit
def ups_by_switch(switch_ups: np.ndarray, tail: np.ndarray, vertices: int) -> tuple:
    """Per switch its up ports (``switch_ups`` grouped by their tail, in order) and where each
    switch's ports start among them (``vertices + 1`` pointers): the same for a whole run, so
    a run makes them once, not at every batch of moves."""
    ups_of = by_group(switch_ups, tail, vertices)
    return ups_of, np.searchsorted(tail[ups_of], np.arange(vertices + 1))


@jit
def move_groups(
    due: np.ndarray,
    bounds: np.ndarray,
    at_of: np.ndarray,
    current: np.ndarray,
    vertices: int,
    queue_kb: np.ndarray,
    level_kb: np.ndarray,
    used: np.ndarray,
    ups: tuple[np.ndarray, np.ndarray],
    tail: np.ndarray,
    is_switch_up: np.ndarray,
    c_flow: np.ndarray,
    c_lane: np.ndarray,
    c_beyond: np.ndarray,
    xon_kb: float,
    sw0: int,
    target: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    jitter_gbps: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The moves of the due flows ``due`` (shuffled), group by group (``bounds``): a flow goes
    when its switch ``at_of`` has an up port on a lower queue level than its own port
    ``current`` (-1: none); what it leaves behind past its switch (routed entries ``c_*``)
    takes XON off those queues first, and its new path adds XON to the ones it joins, so the
    next group sees both. A flow whose best port is still its own stays, and its old queues
    get their XON back. ``target``: each flow's row of the hop counts in ``tables``
    (:func:`_route_into`).

    Returns the new entries (lane, flow) of the flows that moved, those flows in order, and
    which of the entries ``c_*`` they left."""
    n_lanes = len(queue_kb)
    queue = queue_kb.copy()
    in_go = np.zeros(len(at_of), np.bool_)  # per flow: in the group at hand (then: moving)
    c_leave = np.zeros(len(c_flow), np.bool_)
    past = np.zeros(len(c_flow), np.bool_)
    # per switch its up ports (:func:`ups_by_switch`), so that a group's flows are judged at
    # their own switches only
    ups_of, ups_ptr = ups
    dist = tables[0]
    # what the groups write, made once for the batch (a group's arrays, one after the other,
    # were most of a small batch's time): the moved flows' entries and the flows, a group's
    # flows and their switches, targets and entries
    widest = 0
    most = 0
    for g in range(len(bounds) - 1):
        widest = max(widest, bounds[g + 1] - bounds[g])
    for f in due:  # a flow goes only from a switch (its port ``current`` is one of it)
        if at_of[f] >= sw0:
            most = max(most, dist[target[f], at_of[f] - sw0])
    room = widest * (most + 1)
    fresh_lane = np.empty(len(due) * (most + 1), np.int64)
    fresh_flow = np.empty(len(due) * (most + 1), np.int64)
    went = np.empty(len(due), np.int64)
    n_fresh = 0
    n_went = 0
    go = np.empty(widest, np.int64)
    start = np.empty(widest, np.int64)
    tgt = np.empty(widest, np.int64)
    same = np.empty(widest, np.bool_)
    lanes = np.empty(room, np.int64)
    flows = np.empty(room, np.int64)
    scratch = np.empty((2, widest), np.int64)
    clamped = False  # every queue clamped at 0 once: then only those a group lowered
    for g in range(len(bounds) - 1):
        # queue levels where they are read (the flow's switch's up ports, its own port)
        n_go = 0
        for q in range(bounds[g], bounds[g + 1]):
            f = due[q]
            v = wrap(at_of[f], vertices)
            best = np.inf  # its switch's emptiest up port's level
            for k in range(ups_ptr[v], ups_ptr[v + 1]):
                best = min(best, level_of(queue[ups_of[k]], level_kb))
            own = level_of(queue[max(current[f], 0)], level_kb)
            if best < own and current[f] >= 0:
                go[n_go] = f
                n_go += 1
        if n_go == 0:
            continue
        for i in range(n_go):
            in_go[go[i]] = True
        for k in range(len(c_flow)):
            past[k] = in_go[c_flow[k]] and c_beyond[k]
            if past[k]:
                queue[c_lane[k]] -= xon_kb
        if not clamped:
            for j in range(n_lanes):
                if queue[j] < 0.0:
                    queue[j] = 0.0
            clamped = True
        for k in range(len(c_flow)):
            if past[k] and queue[c_lane[k]] < 0.0:
                queue[c_lane[k]] = 0.0
        for i in range(n_go):
            start[i] = at_of[go[i]] - sw0
            tgt[i] = target[go[i]]
        n_e = _route_into(
            go[:n_go],
            start[:n_go],
            tgt[:n_go],
            (queue, level_kb, used),
            tables,
            jitter_gbps,
            rng,
            (lanes, flows),
            scratch,
        )
        for i in range(n_go):
            same[i] = False
        for k in range(n_e):
            i = flows[k]
            if is_switch_up[lanes[k]] and tail[lanes[k]] == at_of[go[i]]:
                same[i] = lanes[k] == current[go[i]]
        for k in range(n_e):
            if not same[flows[k]]:
                queue[lanes[k]] += xon_kb
        # what the group's flows left past their switch: a flow that stays gets its XON back,
        # a flow that moves leaves those entries
        for i in range(n_go):
            in_go[go[i]] = not same[i]  # now: moves
        for k in range(len(c_flow)):
            if past[k] and not in_go[c_flow[k]]:
                queue[c_lane[k]] += xon_kb
            elif past[k]:
                c_leave[k] = True
        for i in range(n_go):
            in_go[go[i]] = False
            if not same[i]:
                went[n_went] = go[i]
                n_went += 1
        for k in range(n_e):
            if not same[flows[k]]:
                fresh_lane[n_fresh] = lanes[k]
                fresh_flow[n_fresh] = go[flows[k]]
                n_fresh += 1
    return fresh_lane[:n_fresh], fresh_flow[:n_fresh], went[:n_went], c_leave
