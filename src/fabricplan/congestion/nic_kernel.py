""":func:`.nic_turns.held_nics`, compiled, for the compiled PFC event (:mod:`.pfc_kernel`): the
same float operations in the same order (sums in column order, as ``np.bincount`` makes them),
so a run's rates do not depend on which of the two computed them (tested)."""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import jit


@jit
def held_nics(
    nic: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
    threshold_bytes: float,
    stranded: np.ndarray,
    running: np.ndarray,
    rates: np.ndarray,
    capacity: np.ndarray,
    pause: np.ndarray,
    held_tolerance: float,
    fill_roundoff: float,
    window_us: float,
) -> tuple[np.ndarray, bool, np.ndarray, bool, np.ndarray, float, bool]:
    """:func:`.nic_turns.held_nics` (``pause``: the event's pause per lane; ``pairs``: per port
    pair its (ingress, egress) id, column and weight). Per lane the
    pause the NICs add (zero where none binds) and whether any binds; per lane
    the share of its senders' push that gets out where a NIC is paused (its thresholds filled;
    1 elsewhere) and whether any is; per lane the excess its most held flow strands (GB/s); the
    time to the next NIC's onset (us); whether any NIC with two flows or more holds one back
    (its state can change the rates). Resets ``stranded`` where nothing is held, as the array
    code does."""
    lanes = len(capacity)
    k = np.zeros(lanes, np.int64)
    for c in range(len(nic)):
        if running[c] and nic[c] >= 0:
            k[nic[c]] += 1
    excess = np.zeros(lanes)
    n_held = np.zeros(lanes, np.int64)
    got = np.zeros(lanes)
    load = np.zeros(lanes)
    x = np.zeros(len(nic))  # per column its excess, where held
    for c in range(len(nic)):
        j = nic[c]
        if not running[c] or j < 0:
            continue
        turn = capacity[j] * (1 - pause[j]) / max(k[j], 1)
        r = rates[c]
        load[j] += r
        if r < turn * (1 - held_tolerance):
            x[c] = turn - r
            excess[j] = max(excess[j], x[c])
            n_held[j] += 1
            got[j] += r
    # each held flow's part of XOFF on the pairs of its path, and its NIC's: its most held flow's
    p_port, p_col, p_w = pairs
    n_ports = 0
    for i in range(len(p_port)):
        n_ports = max(n_ports, p_port[i] + 1)
    through = np.zeros(n_ports)
    for i in range(len(p_port)):
        through[p_port[i]] += x[p_col[i]] * p_w[i]
    parts = np.zeros(len(nic))
    for i in range(len(p_port)):
        ex = x[p_col[i]] * p_w[i]
        if ex > 0:
            parts[p_col[i]] += ex / through[p_port[i]] * p_w[i]
    need = np.zeros(lanes)
    for c in range(len(nic)):
        j = nic[c]
        if j >= 0 and x[c] > 0 and x[c] == excess[j]:
            need[j] = max(need[j], parts[c])
    p = np.zeros(lanes)
    out = np.ones(lanes)
    binds = False
    paused = False
    first = np.inf
    live = False
    wait = np.full(lanes, np.inf)
    for j in range(lanes):
        if excess[j] <= 0:
            stranded[j] = 0.0
        nj = need[j] * threshold_bytes
        filled = excess[j] > 0 and stranded[j] >= nj * (1 - fill_roundoff)
        sending = capacity[j] * (1 - pause[j])
        turn = sending / max(k[j], 1)
        room = got[j] + sending - n_held[j] * turn
        p_turns = 0.0
        if n_held[j] > 0 and load[j] > room * (1 + held_tolerance):
            p_turns = 1 - room / capacity[j]
        full = n_held[j] * (capacity[j] / max(k[j], 1))
        p_held = 1 - got[j] / max(full, 1e-300) if filled else 0.0
        pj = max(p_turns, p_held)
        if pj > 0 and load[j] > capacity[j] * (1 - pj) * (1 + held_tolerance):
            p[j] = pj
            binds = True
            if filled:
                out[j] = 1 - pj
                paused = True
        if excess[j] > 0 and k[j] > 1:
            live = True
            if not filled:
                wait[j] = (nj - stranded[j]) / (excess[j] * 1e3)
                first = min(first, wait[j])
    # onsets within ``window_us`` after the next are one event, at the last of them
    onset = first
    for j in range(lanes):
        if wait[j] <= first + window_us:
            onset = max(onset, wait[j])
    return p, binds, out, paused, excess, onset, live
