"""When flowlet-routed flows next find a better port, compiled: the state and the draws of
:meth:`.flowlet.FlowletMoves.next_change_us`, once per event of a run that moves flows.

The same float operations in the same order as the array code it replaced, and the same
draws from the run's generator (Numba's ``Generator.geometric`` gives NumPy's values and
advances the generator it is given), so runs give, bit for bit, what they gave with the array
code.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import by_group, clip01, jit, levels


@jit
def _state(
    rate: np.ndarray,
    held: np.ndarray,
    routed: tuple[np.ndarray, np.ndarray, np.ndarray],
    lanes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    hot_lanes: np.ndarray,
    hot_kb: np.ndarray,
    level_kb: np.ndarray,
    band_kb: float,
    paced: bool,
) -> tuple[np.ndarray, ...]:
    """``FlowletMoves._state``: per lane its share of time paused, the queue a switch sees
    on it, the deepest queue level on the paths of the held flows it carries, and its load;
    and ``held`` (per hop flow) cut to the flows a move could free (in place)."""
    lane, flow, weight = routed
    capacity, last_pause, into_nic, _ = lanes
    n_lanes, n = len(capacity), len(held)
    load = np.zeros(n_lanes)
    n_held = np.zeros(n_lanes, np.int64)
    for k in range(len(lane)):
        load[lane[k]] += weight[k] * rate[flow[k]]
        if held[flow[k]]:
            n_held[lane[k]] += 1
    phi = np.zeros(n_lanes)
    queue = np.zeros(n_lanes)
    queued = np.zeros(n_lanes, np.bool_)
    for j in range(n_lanes):
        if n_held[j] > 0 and capacity[j] > 0:
            phi[j] = clip01(1 - load[j] / max(capacity[j], 1e-300))
        if paced:
            phi[j] = min(phi[j], last_pause[j])
        if last_pause[j] > 0:
            queue[j] = band_kb
            queued[j] = True
    for i in range(len(hot_lanes)):
        queue[hot_lanes[i]] = hot_kb[i]
        queued[hot_lanes[i]] = True
    level = levels(queue, level_kb)
    avoidable = np.zeros(n, np.bool_)
    worst = np.zeros(n)
    for k in range(len(lane)):
        j = lane[k]
        if queued[j] and not into_nic[j] and level[j] > 0:
            avoidable[flow[k]] = True
        worst[flow[k]] = max(worst[flow[k]], level[j])
    behind = np.zeros(n_lanes)
    for k in range(len(lane)):
        if held[flow[k]]:  # held before the cut: the lanes its collision is on
            behind[lane[k]] = max(behind[lane[k]], worst[flow[k]])
    for f in range(n):
        held[f] = held[f] and avoidable[f]
    return phi, queue, behind, load


@jit
def seen_paused(
    last_pause: np.ndarray,
    held_col: np.ndarray,
    running: np.ndarray,
    feeds: tuple[np.ndarray, np.ndarray, np.ndarray],
    up_lane: np.ndarray,
) -> np.ndarray:
    """Per lane, the pause a switch sees on it when it chooses a port: the lane's own pause
    (its next switch's ingress is the feeder of a hot port), and on an up port whose next
    switch pauses the held flows it carries further on, that pause, where two ingress ports
    or more feed it (``feeds``: every port pair's egress and ingress lane and column).

    Why two: a flowlet switch (htsim ``FatTreeSwitch::getNextHop``) moves a flow when its
    first packet after a gap finds the flow's port on a higher quantised queue than another.
    A gap comes when the flow's sender was paused, and by its end the flow's own packets have
    left that port (its sender resumes once they drain to XON): what stays queued there is
    what other ingress ports keep sending into it. Counted in htsim (seed 1) at the senders'
    leaves of a 16-to-1 incast whose senders (two leaves) send three more flows each, of an
    8-to-1 one with one remote sender and of a 7-to-1 one with one sender a leaf: gaps of
    over 10 us 1,033, 30 and 213, moves 87, 0 and 0; a port with a single feeder held 0-1
    packets when a gap ended."""
    n = len(last_pause)
    paused_next = np.zeros(n)
    out, into, col = feeds
    for q in range(len(out)):
        c = col[q]
        if last_pause[out[q]] > 0 and up_lane[into[q]] and held_col[c]:
            paused_next[into[q]] = max(paused_next[into[q]], last_pause[out[q]])
    first_in = np.full(n, -1, np.int64)
    two = np.zeros(n, np.bool_)
    for q in range(len(out)):
        j = out[q]
        if paused_next[j] > 0 and running[col[q]]:
            if first_in[j] < 0:
                first_in[j] = into[q]
            elif first_in[j] != into[q]:
                two[j] = True
    seen = last_pause.copy()
    for j in range(n):
        if two[j]:
            seen[j] = max(seen[j], paused_next[j])
    return seen


@jit
def due_moves(
    rates: tuple[np.ndarray, np.ndarray, np.ndarray],
    col_of: np.ndarray,
    routed: tuple[np.ndarray, np.ndarray, np.ndarray],
    lanes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    hot: tuple[np.ndarray, np.ndarray],
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    feeds: tuple[np.ndarray, np.ndarray, np.ndarray],
    switches: tuple[np.ndarray, np.ndarray, np.ndarray],
    flows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    policy: tuple[np.ndarray, float, float, float, float, float, float, bool],
    limits: tuple[float, int],
    now_us: float,
    rng: np.random.Generator,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """``FlowletMoves.next_change_us``: draw when the flows held back by a queue they could
    avoid next find a better port (a geometric number of chances, one per pause cycle or per
    packet), at the lowest switch on their way up; a flow already waiting keeps its draw, one
    whose collision has ended waits no more. Updates ``flows``' due times, switches and shares
    in place.

    ``rates``: per column the last event's rates, running flags and pushes; ``routed``: lane,
    flow, weight of each routed entry; ``lanes``: capacity, last pause share, whether the lane
    enters a NIC, whether it goes up; ``hot``: the hot lanes and their queues (KB); ``pairs``:
    per hop flow leaving a switch upwards, its flow, egress and ingress lanes, switch;
    ``feeds``: every port pair's egress and ingress lane and column (:func:`seen_paused`);
    ``switches``: the switches' up lanes, each lane's tail, each vertex's tier; ``flows``: per
    hop flow its due time, moves made, when its last move was due, switch, share; ``policy``:
    queue levels, XOFF + XON over 2, headroom, timeout, MTU, move share, load tie weight,
    paced; ``limits``: the share below its push at which a flow is held, the most moves a flow
    makes.

    Returns the next due time, and per lane the queue, the deepest level behind it and the
    weight a moved flow's new path gives its use."""
    last_rates, last_running, push = rates
    capacity, last_pause, into_nic, up_lane = lanes
    p_flow, p_out, p_in, p_switch = pairs
    switch_ups, tail, tier = switches
    due, moved, moved_due, at, share_of = flows
    level_kb, band_kb, headroom_kb, timeout_us, mtu, move_share, load_tie, paced = policy
    held_share, max_moves = limits
    n = len(col_of)
    held_col = np.empty(len(push), np.bool_)
    for c in range(len(push)):
        held_col[c] = last_running[c] and last_rates[c] < push[c] * (1 - held_share)
    rate = np.empty(n)
    held = np.empty(n, np.bool_)
    for f in range(n):
        rate[f] = last_rates[col_of[f]]
        held[f] = held_col[col_of[f]]
    seen = seen_paused(last_pause, held_col, last_running, feeds, up_lane)
    pause, queue, behind, load = _state(
        rate,
        held,
        routed,
        (capacity, seen, into_nic, up_lane),
        hot[0],
        hot[1],
        level_kb,
        band_kb,
        paced,
    )
    used = np.zeros(len(capacity))
    for j in range(len(capacity)):
        if not up_lane[j]:
            used[j] = clip01(load[j] / max(capacity[j], 1e-300)) * load_tie
    level = levels(queue, level_kb)
    best = np.full(len(tier), np.inf)
    for u in switch_ups:
        best[tail[u]] = min(best[tail[u]], level[u])
    m = len(p_flow)
    can = np.zeros(m, np.bool_)
    cycle = np.zeros(m)
    share = np.zeros(m)
    eligible = np.zeros(n, np.bool_)
    for i in range(m):
        f = p_flow[i]
        phi = pause[p_in[i]] if held[f] else 0.0
        # a PFC pause: the ingress drains its queue above XON at its share of the port
        pause_gap = headroom_kb * 1024 / (capacity[p_in[i]] * 1e3 * (1 - phi))
        # a NIC that interleaves many flows sends each one packet at a time, this far apart
        spacing = mtu / (rate[f] * 1e3)
        share[i] = clip01(rate[f] / load[p_in[i]])
        by_pause = phi > 0 and pause_gap > timeout_us
        by_packet = held[f] and spacing > timeout_us
        # the time between chances to move: a pause cycle, or every packet
        cycle[i] = pause_gap / max(phi, 1e-300) if by_pause else spacing
        can[i] = (by_pause or by_packet) and best[p_switch[i]] < level[p_out[i]]
        if can[i]:
            eligible[f] = True
    # the new waits (a flow already waiting keeps its draw), each at the flow's lowest switch:
    # a flow waits at one switch at a time (by flow, then tier, then place)
    new = np.zeros(m, np.bool_)
    for i in range(m):
        f = p_flow[i]
        new[i] = can[i] and due[f] == np.inf and moved[f] < max_moves
    idx = np.flatnonzero(new)
    if len(idx):
        idx = by_group(by_group(idx, tier[p_switch], len(tier)), p_flow, n)
        first = np.ones(len(idx), np.bool_)
        for k in range(1, len(idx)):
            first[k] = p_flow[idx[k]] != p_flow[idx[k - 1]]
        idx = idx[first]
        cycles = rng.geometric(move_share, len(idx))
        for k in range(len(idx)):
            i = idx[k]
            f = p_flow[i]
            since = max(now_us, moved_due[f])
            due[f] = since + cycles[k] * cycle[i]
            at[f] = p_switch[i]
            share_of[f] = share[i]
    soonest = np.inf
    for f in range(n):
        if not eligible[f]:  # its collision ended before the gap came
            due[f] = np.inf
        soonest = min(soonest, due[f])
    return soonest, queue, behind, used
