"""A whole run of flowlet-routed flows on a lossless fabric without end-to-end congestion
control (credit or PFC only), compiled: :func:`.waterfill.complete` driving
:class:`.flowlet.FlowletMoves` over :class:`.flowcontrol.Phases`, in one call per seed.

Each event of such a run calls the compiled PFC event, the draw of due moves and, when moves
are due, the compiled moves and rebuild (:mod:`.pfc_kernel`, :mod:`.due_kernel`,
:mod:`.move_kernel`, :mod:`.rebuild_kernel`); between them the Python glue cost more than they
did (about 0.2 ms an event, against tens of microseconds of compiled work for an incast).
Here the same calls follow each other in one compiled loop, with the same float operations in
the same order and the same draws from the same generator, so a seed's results are bit for bit
those of the Python loop (tested). The loop is :func:`.waterfill.complete`'s, kept beside it:
a change to either must be made to both (tests compare them on random runs and whole cases).
Its small pieces are in :mod:`.seed_parts`. A run whose paths stay as routed (ECMP, adaptive
routing) is the same loop without moves: :class:`.flowcontrol.Phases` alone.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.due_kernel import due_moves
from fabricplan.congestion.jitted import jit
from fabricplan.congestion.move_kernel import move_groups, ups_by_switch
from fabricplan.congestion.pfc_kernel import pfc_rates
from fabricplan.congestion.rebuild_kernel import rebuild
from fabricplan.congestion.seed_parts import (
    add_reduce,
    add_resend,
    advance,
    any_open,
    beyond_switch,
    close_step,
    current_ports,
    ending_by,
    group_bounds,
    latest_start_by,
    next_start,
    per_lane,
    resend_bytes,
    running_at,
    same_flags,
    tables_of,
    time_to_end,
    up_pairs,
)


@jit
def run_seed(
    columns: tuple,
    flows: tuple,
    routed: tuple,
    net: tuple,
    towards: tuple,
    policy: tuple,
    moves: tuple,
    limits: tuple,
    turns: tuple,
    rng: np.random.Generator,
) -> tuple:
    """One seed's run to completion (the arguments are documented where the caller builds
    them: :func:`.seed_run.compiled_run`).

    Returns the finish times, the events, each event's duration and paused share, the first
    pauses' victims (and whether any), the busiest phase's running job columns, hot lanes,
    queues and utilisation, the paths at the end, the moves made and the bytes they resent."""
    size_bytes, start_us, col_cap, push, job, window_kb = columns
    col_of, movable = flows
    capacity, tail, head, kind, leaf, vertices, into_nic, up_lane = net[:8]
    switch_ups, is_switch_up, tier, one_flow = net[8:]
    sw0, target, route_tables, jitter = towards
    level_kb = policy[0]  # the queue levels (the rest is due_moves')
    can_move, xon_kb, xoff_kb, rtt_us, go_back_n, held_kb, move_merge, n_groups = moves
    threshold_kb, tolerance, arbiter_levels, victim_loss, held_share, max_moves = limits[:6]
    finish_merge, start_merge, time_roundoff, bytes_roundoff, levels_from, most = limits[6:]
    # the senders' NICs (nic_turns): per column its NIC's lane, XOFF in bytes
    nic, threshold_bytes, nic_acting, tolerances, onset_merge = turns
    lanes = len(capacity)
    n = len(size_bytes)
    n_hop = len(col_of)
    sizes = (lanes, n, one_flow)
    # the tables of the first paths: every flow's port pairs joined, as after a batch of moves
    # that moved them all
    none, no_w = np.zeros(0, np.int64), np.zeros(0)
    built = rebuild(
        routed,
        np.zeros(len(routed[0]), np.bool_),
        (none, none),
        (none, none, none, no_w, none, none),
        np.ones(n_hop, np.bool_),
        (tail, head, kind),
        leaf,
        col_of,
        window_kb,
        sizes,
        (none, none, no_w, none, none),
    )
    tables = tables_of(built, col_of, sizes, levels_from, most)
    (r_lane, r_flow, r_weight), pairs, pp_flow, ports, entries, passes, levels = tables[:7]
    matrix, links = tables[7:]
    # FlowletMoves' state
    due = np.full(n_hop, np.inf)
    moved = np.zeros(n_hop, np.int64)
    moved_due = np.zeros(n_hop)
    share_of = np.ones(n_hop)
    at = np.full(n_hop, -1, np.int64)
    n_moves = 0
    queue = np.zeros(lanes)
    behind = np.zeros(lanes)
    used = np.zeros(lanes)
    last_rates = np.zeros(n)
    last_running = np.zeros(n, np.bool_)
    last_pause = np.zeros(lanes)
    hot_lanes = np.zeros(0, np.int64)
    hot_kb = np.zeros(0)
    ups = ups_by_switch(switch_ups, tail, vertices)
    p_flow, p_out, p_in, p_switch = up_pairs(
        r_lane, pp_flow, pairs[5], pairs[4], up_lane, movable, tail
    )
    # the record
    victims = np.zeros(n, np.bool_)
    no_victims = True
    busiest = -1
    busy_lanes = np.zeros(0, np.int64)
    busy_kb = np.zeros(0)
    utilisation = np.zeros(lanes)
    paused_of = np.zeros(16)
    durations = np.zeros(16)
    n_durations = 0  # one fewer than the events when the last one ends the run
    # complete()'s loop
    start = start_us.copy()
    left = size_bytes.copy()
    finish = np.full(n, np.inf)
    finite = np.isfinite(left)
    done = finite & (left <= 0)
    for c in range(n):
        if done[c]:
            finish[c] = start[c]
    now = 0.0  # complete()'s start: the earliest start, or 0 when every flow starts later
    if (~done).any():
        now = min(start[~done].min(), 0.0)
    t0 = now
    events = 0
    move_at = np.inf
    changed = True  # the paths moved since the last event's rates
    paused = 0.0
    rates = np.zeros(n)
    # NicTurns' state: per lane the bytes stranded and stranded per us; the next onset; whether
    # a NIC's state can change the rates (then they are worked out at every event)
    resent = 0.0  # the bytes the moves send again, batch by batch
    stranded = np.zeros(lanes)
    nic_excess = np.zeros(lanes)
    hold_at = np.inf
    nic_live = False
    nic_elapsed = 0.0  # NicTurns.elapsed_us: summed phase by phase, as there
    ending = np.zeros(n, np.bool_)  # per step: the columns that end in it
    while any_open(finite, done):
        running = running_at(start, done, now * (1 + time_roundoff) + time_roundoff)
        if move_at <= now * (1 + time_roundoff) + time_roundoff:
            # FlowletMoves.change
            resend = np.zeros(n)
            due_now = np.flatnonzero(due <= now * (1 + move_merge))
            if len(due_now):
                rng.shuffle(due_now)
                moved_due[due_now] = due[due_now]
                due[due_now] = np.inf
                at_of = np.full(n_hop, -1, np.int64)
                at_of[due_now] = at[due_now]
                at[due_now] = -1
                current = current_ports(at_of, p_flow, p_out, p_switch)
                is_due = np.zeros(n_hop, np.bool_)
                is_due[due_now] = True
                cand = np.flatnonzero(is_due[r_flow])
                c_flow, c_lane = r_flow[cand], r_lane[cand]
                c_beyond = beyond_switch(c_flow, c_lane, at_of, tier, head, up_lane)
                f_lane, f_flow, went, c_leave = move_groups(
                    due_now,
                    group_bounds(len(due_now), n_groups),
                    at_of,
                    current,
                    vertices,
                    queue,
                    level_kb,
                    used,
                    ups,
                    tail,
                    is_switch_up,
                    c_flow,
                    c_lane,
                    c_beyond,
                    xon_kb,
                    sw0,
                    target,
                    route_tables,
                    jitter,
                    rng,
                )
                if len(went):
                    leave = np.zeros(len(r_lane), np.bool_)
                    leave[cand[c_leave]] = True
                    went_flag = np.zeros(n_hop, np.bool_)
                    went_flag[went] = True
                    old = (pairs[0], pairs[1], pp_flow, pairs[3], pairs[5], pairs[4])
                    built = rebuild(
                        (r_lane, r_flow, r_weight),
                        leave,
                        (f_lane, f_flow),
                        old,
                        went_flag,
                        (tail, head, kind),
                        leaf,
                        col_of,
                        window_kb,
                        sizes,
                        (matrix[0], matrix[1], matrix[2], ports[0], pairs[7]),
                    )
                    tables = tables_of(built, col_of, sizes, levels_from, most)
                    (r_lane, r_flow, r_weight), pairs, pp_flow, ports, entries = tables[:5]
                    passes, levels, matrix, links = tables[5:]
                    changed = True  # the next rates (and pauses, queues) are the new paths'
                    p_flow, p_out, p_in, p_switch = up_pairs(
                        r_lane, pp_flow, pairs[5], pairs[4], up_lane, movable, tail
                    )
                    n_moves += len(went)
                    for f in went:
                        moved[f] += 1
                    if go_back_n:
                        kb = (xon_kb, xoff_kb, rtt_us)
                        fresh = (f_lane, f_flow)
                        resend_bytes(resend, went, fresh, behind, col_of, share_of, push, kb)
                    batch = 0.0  # FlowletMoves.change's record of it, column by column
                    for c in range(n):
                        batch += resend[c]
                    resent += batch
            add_resend(left, resend, running, finite)
        # Phases.__call__ (compiled_rates), then its _note; the same rates again when
        # neither the paths nor the running columns changed (a batch that moved nothing)
        if changed or nic_live or not same_flags(running, last_running):
            changed = False
            out = pfc_rates(
                running,
                push,
                col_cap,
                capacity,
                pairs,
                ports,
                entries,
                passes,
                levels,
                links,
                threshold_kb,
                tolerance,
                arbiter_levels,
                no_victims,
                (
                    nic,
                    threshold_bytes,
                    stranded,
                    nic_acting,
                    tolerances,
                    onset_merge * nic_elapsed,
                ),
            )
            rates, pause, eff, hot_lanes, n_over, unpaused = out[:6]
            nic_excess, onset, nic_live = out[6:]
            hold_at = now + onset
            hot_kb = np.empty(len(hot_lanes))
            for k in range(len(hot_lanes)):
                hot_kb[k] = held_kb * max(n_over[k], 1.0)
            any_pause = pause.any()
            if no_victims and any_pause:
                victims = running & (rates < unpaused * (1 - victim_loss))
                no_victims = False
            last_pause = pause
            cols = running & job
            paused = 0.0  # the share of the job's lanes paused, for the record
            if any_pause:
                job_lanes = per_lane(matrix, cols.astype(np.float64)) > 0
                if job_lanes.any():
                    paused = add_reduce(pause[job_lanes]) / np.count_nonzero(job_lanes)
            busy = np.count_nonzero(cols)
            if busy > busiest:
                busiest = busy
                load = per_lane(matrix, rates)
                utilisation = np.zeros(lanes)
                for j in range(lanes):
                    if eff[j] > 0:
                        utilisation[j] = load[j] / eff[j]
                busy_lanes, busy_kb = hot_lanes, hot_kb
            last_rates = np.where(running, rates, 0.0)
            last_running = running
        # FlowletMoves.next_change_us (a run on fixed paths has no moves to draw)
        if can_move:
            move_at, queue, behind, used = due_moves(
                (last_rates, last_running, push),
                col_of,
                (r_lane, r_flow, r_weight),
                (capacity, last_pause, into_nic, up_lane),
                (hot_lanes, hot_kb),
                (p_flow, p_out, p_in, p_switch),
                (pairs[0], pairs[1], pairs[2]),
                (switch_ups, tail, tier),
                (due, moved, moved_due, at, share_of),
                policy,
                (held_share, max_moves),
                now,
                rng,
            )
        if events == len(durations):
            durations = np.concatenate((durations, np.zeros(len(durations))))
            paused_of = np.concatenate((paused_of, np.zeros(len(paused_of))))
        paused_of[events] = paused
        events += 1
        to_end, first_end = time_to_end(left, rates, running, finite)
        upcoming = next_start(start, done, now)
        starts_in = upcoming - now if np.isfinite(upcoming) else np.inf
        next_move = max(min(move_at, hold_at) - now, 0.0)
        dt = min(first_end, starts_in, next_move)
        if not np.isfinite(dt):
            break
        ends = False  # the step ends at the first flow's end (then: those of ``ending``)
        if dt == next_move and dt < min(first_end, starts_in):
            pass
        elif dt == first_end:
            dt = ending_by(to_end, dt + finish_merge * (now + dt - t0), ending)
            ends = True
        elif np.isfinite(first_end):
            dt = latest_start_by(start, done, now, now + dt + start_merge * first_end) - now
            for c in range(n):
                if start[c] > now and start[c] <= now + dt:
                    start[c] = now + dt
        if not ends:
            ending[:] = False
        advance(left, rates, running, finite, dt)
        for j in range(lanes):  # NicTurns.elapse
            stranded[j] += nic_excess[j] * 1e3 * dt
        nic_elapsed += dt
        then = now
        now += dt
        durations[n_durations] = dt
        n_durations += 1
        columns = (left, size_bytes, running, finite)
        close_step(ending, to_end, then, now, columns, finish, done, bytes_roundoff)
    return (
        finish,
        events,
        durations[:n_durations].copy(),
        paused_of[:events].copy(),
        victims,
        not no_victims,
        busiest,
        busy_lanes,
        busy_kb,
        utilisation,
        (r_lane, r_flow, r_weight),
        n_moves,
        resent,
    )
