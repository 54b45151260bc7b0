"""A seed's whole run in one compiled call (:mod:`~fabricplan.congestion.seed_kernel`), for
runs of credit or PFC-only flow control, small and large, in a process that holds the kernels:
with flowlet moves (:func:`compiled_run`) or on the paths as routed (:func:`compiled_fixed_run`).
Each gives, bit for bit, what :func:`~fabricplan.congestion.waterfill.complete` over
:class:`~fabricplan.congestion.flowcontrol.Phases` (and
:class:`~fabricplan.congestion.flowlet.FlowletMoves`) gives. Here: what decides that a run goes
compiled, the lanes it reads and the kernel's arguments; the kernel imports Numba, loaded only
when a run calls it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fabricplan.congestion import flowcontrol, flowlet, kernels, nic_turns, waterfill
from fabricplan.congestion.adaptive import TIE_JITTER_GBPS
from fabricplan.congestion.compiled_phases import i64
from fabricplan.congestion.flowcontrol import FlowControl, RunRecord, window_kb
from fabricplan.congestion.flowlet import FlowletMoves
from fabricplan.congestion.network import Network, Routed, Towards, UpDown, closer_ports
from fabricplan.congestion.nic_turns import NicTurns
from fabricplan.congestion.ports import MAX_LANE_CHAIN
from fabricplan.congestion.waterfill import Completion
from fabricplan.topology.graph import LEAF


def compiled_run(
    moves: FlowletMoves,
    fc: FlowControl,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    turns: NicTurns | None = None,
) -> Completion | None:
    """:func:`.waterfill.complete` of a flowlet run in one compiled call (:mod:`.seed_kernel`),
    giving bit for bit what the Python loop over ``moves`` gives: finish times, events and
    their durations, the record, the paths at the end. ``columns``: per column its bytes,
    start, own cap, push, whether it is the job's, whether it is self-clocked (what
    :class:`.flowcontrol.Phases` takes).

    None where the events would not run compiled (other flow control, a process without the
    compiled kernels): the caller runs the loop. The model's constants are read from their
    modules at each call, as the loop reads them."""
    r = moves.routed
    if not _compiles(fc):
        return None
    net, pol = moves.net, moves.policy
    tw = moves.towards
    # the lanes a flow can ever be on or a move compares: its first path's and the ports
    # _reachable_ports finds; renumbered in order, so every sort and tie by lane goes as over
    # all the lanes, the others -1 (a 64 -> 1 incast over 128 NICs reads 145 of 1,024 lanes)
    used = np.zeros(net.lanes + 1, bool)  # the last one: the ports tables' padding (-1)
    used[r.lane] = True
    used[_reachable_ports(tw, net.tail[r.lane], net.graph.vertex_kind, net.up_down)] = True
    used[-1] = False
    # the moves: XON, XOFF, round trip, go-back-N, batching
    how = (float(pol.xon_kb), float(pol.xoff_kb), float(pol.rtt_us), pol.go_back_n)
    out = _run(
        (net, tw, used, r, moves.col_of, moves.movable),
        fc,
        columns,
        (True, *how, flowlet.MOVE_MERGE, flowlet.MOVE_GROUPS),
        moves.due_policy,
        moves.rng,
        moves.record,
        turns,
    )
    done, moves.routed, n_moves = out
    moves.moves += n_moves
    return done


# What a run on fixed paths passes for the moves it never makes: no queue levels, no policy.
_NO_DUE_POLICY = (np.zeros(0), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False)
_NO_MOVES = (False, 0.0, 0.0, 0.0, False, 0.0, 0)
_IDLE_RNG = np.random.default_rng(0)  # never drawn from: nothing moves


def compiled_fixed_run(
    net: Network,
    routed: Routed,
    col_of: np.ndarray,
    dst: np.ndarray,
    fc: FlowControl,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    record: RunRecord,
    turns: NicTurns | None = None,
) -> Completion | None:
    """:func:`.waterfill.complete` over :class:`.flowcontrol.Phases` of a run whose paths stay
    as routed (ECMP, adaptive routing; ``dst``: each hop flow's receiver), in one compiled
    call, bit for bit: what :func:`compiled_run` does without moves. Fills ``record``. None
    where the events would not run compiled (as for :func:`compiled_run`)."""
    if not _compiles(fc):
        return None
    used = np.zeros(net.lanes + 1, bool)
    used[routed.lane] = True
    # the routing tables go in as a flowlet run's do (the same compiled call), and are never read
    paths = (net, net.towards(dst), used, routed, col_of, np.zeros(len(col_of), bool))
    return _run(paths, fc, columns, _NO_MOVES, _NO_DUE_POLICY, _IDLE_RNG, record, turns)[0]


def _compiles(fc: FlowControl) -> bool:
    """Whether a run's events run compiled: credit or PFC-only flow control, in a process that
    holds the kernels. Large runs too: with the lanes' links of the fill kept per set of paths
    and the arrivals swept level by level, a 128-host all-to-all with flowlet moves ran a
    third faster in one compiled call than in the Python loop around compiled pieces (1.05
    against 1.56 s a seed), and a 1,024-GPU all-to-all on PFC alone at 0.9 of its speed."""
    compiled = fc.lossless_open_loop and flowcontrol.SPREAD_LEVELS < 2
    return compiled and kernels.loaded()


def _run(
    paths: tuple,
    fc: FlowControl,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    moves: tuple,
    due_policy: tuple,
    rng: np.random.Generator,
    record: RunRecord,
    turns: NicTurns | None,
) -> tuple[Completion, Routed, int]:
    """One :func:`.seed_kernel.run_seed` call: ``paths`` (the network, where flows go on to,
    the lanes used, the first paths, each hop flow's column, whether it may move), the moves'
    settings and policy, the senders' NICs (None: left out); fills ``record``. Returns the
    completion, the paths at the end and the moves made."""
    from fabricplan.congestion.seed_kernel import run_seed  # it loads the compiled kernels

    net, tw, used, r, col_of, movable = paths
    size_bytes, start_us, cap, push, job, self_clocked = columns
    col_of = i64(col_of)
    q = fc.quality
    held_kb = fc.threshold_kb if q is None else (q.pfc_xoff_kb + q.pfc_xon_kb) / 2
    lane_of, index, per_lane, route_tables = _lane_tables(net, tw, used)
    can_move, xon_kb, xoff_kb, rtt_us, go_back_n, merge, groups = moves
    out = run_seed(
        # per column: bytes, start, own cap, push, the job's, window (KB)
        (
            np.asarray(size_bytes, float),
            np.asarray(start_us, float),
            np.asarray(cap, float),
            np.asarray(push, float),
            np.asarray(job, bool),
            window_kb(self_clocked),
        ),
        # per hop flow: column, whether it may move; the first paths (lane, hop flow, weight)
        (col_of, np.asarray(movable, bool)),
        (index[r.lane], i64(r.flow), np.asarray(r.weight, float)),
        # per lane (renumbered): capacity, tail, head; per vertex its kind; the switches' up
        # ports; whether each column is one hop flow
        (*per_lane, not len(col_of) or int(np.bincount(col_of).max()) <= 1),
        # where a moved flow goes on to (Network.towards), the router's tie jitter
        (tw.sw0, tw.row, route_tables, TIE_JITTER_GBPS),
        due_policy,
        # the moves: whether any may happen, XON, XOFF, round trip, go-back-N, the queue a
        # held port shows, batching
        (can_move, xon_kb, xoff_kb, rtt_us, go_back_n, float(held_kb), merge, groups),
        # flow control's and the event loop's constants; the run from which arrivals sweep
        # level by level (as ports.PathArrivals does), and the longest chain of lanes taken
        (
            float(fc.threshold_kb),
            flowcontrol.OVERLOAD_TOLERANCE,
            flowcontrol.ARBITER_LEVELS,
            flowcontrol.VICTIM_LOSS,
            flowlet.HELD,
            flowlet.MAX_MOVES_PER_FLOW,
            waterfill.FINISH_MERGE,
            waterfill.START_MERGE,
            waterfill.TIME_ROUNDOFF,
            waterfill.BYTES_ROUNDOFF,
            kernels.COMPILED_MIN_SIZE,
            MAX_LANE_CHAIN,
        ),
        # the senders' NICs: per column its NIC's lane (renumbered), XOFF
        _nic_args(turns, index),
        rng,
    )
    finish, events, durations, paused, victims, any_victims, busiest = out[:7]
    busy_lanes, busy_kb, utilisation, (lane, flow, weight), n_moves, resent = out[7:]
    record.resent_bytes = float(resent)
    record.paused = paused.tolist()
    record.victims = victims if any_victims else None
    record.busiest = int(busiest)
    record.utilisation = np.zeros(net.lanes)
    record.utilisation[lane_of] = utilisation
    hot = lane_of[busy_lanes].tolist()
    record.queue_kb = {j: (kb,) for j, kb in zip(hot, busy_kb.tolist(), strict=True)}
    done = Completion(finish, int(events), durations.tolist())
    return done, Routed(lane_of[lane], flow, weight), int(n_moves)


def _nic_args(turns: NicTurns | None, index: np.ndarray) -> tuple:
    """What the compiled run reads of the senders' NICs, lanes in the run's numbers."""
    tol = (nic_turns.HELD_TOLERANCE, nic_turns.FILL_ROUNDOFF)
    merge = nic_turns.ONSET_MERGE
    if turns is None or not (turns.nic >= 0).any():
        return (np.zeros(0, np.int64), 0.0, False, tol, merge)
    nic = i64(np.where(turns.nic >= 0, index[np.maximum(turns.nic, 0)], -1))
    return (nic, float(turns.threshold_bytes), True, tol, merge)


# The last answers of _reachable_ports and _lane_tables, by what they were asked: every seed of
# a case routes the same flows between the same leaves.
_LAST: dict[str, tuple] = {}


def _last(name: str, key: tuple, make: Callable[[], tuple]) -> tuple:
    """``make()``, or its last answer when asked the same (objects by identity, bytes by
    value)."""
    last = _LAST.get(name)
    if last is None or not all(
        a is b or (isinstance(a, bytes) and a == b) for a, b in zip(last[0], key, strict=True)
    ):
        last = (key, make())
        _LAST[name] = last
    return last[1]


def _lane_tables(net: Network, tw: Towards, used: np.ndarray) -> tuple:
    """The lanes ``used`` (a mask, the padding's place last) renumbered in order, each lane's
    new number (-1: left out), what the compiled run reads per lane (capacity, tail, head;
    per vertex its kind; the switches' up ports; per lane whether it enters a NIC, climbs,
    leaves a switch upwards; per vertex its tier) and the routing tables in new numbers."""

    def make() -> tuple:
        lane_of = np.flatnonzero(used)
        index = np.where(used, np.cumsum(used) - 1, -1)
        ud = net.up_down
        ups = index[ud.switch_ups]
        per_lane = (
            np.asarray(net.capacity, float)[lane_of],
            i64(net.tail[lane_of]),
            i64(net.head[lane_of]),
            i64(net.graph.vertex_kind),
            LEAF,
            net.graph.vertices,
            ud.into_nic[lane_of],
            ud.up_lane[lane_of],
            ups[ups >= 0],
            ud.is_switch_up[lane_of],
            i64(ud.tier),
        )
        return lane_of, index, per_lane, (tw.dist, index[tw.out], tw.heads, index[tw.downlink])

    return _last("lanes", (net, tw, used.tobytes()), make)


def _reachable_ports(tw: Towards, tails: np.ndarray, kind: np.ndarray, ud: UpDown) -> np.ndarray:
    """The switch lanes a flow on these paths (lanes leaving ``tails``) can ever take, or whose
    queue a move there compares: the up ports and the ports one hop closer to a flow's leaf of
    each switch on the paths, and of the switches reached from them by closer ports (a move,
    then the routing on from the port it took). No other port is ever a candidate.

    Kept by the leaves on the paths, which every seed of a case shares, where they reach every
    switch on the paths: the switches reached from the paths' switches are then those reached
    from their leaves, whatever ports the seed's hashes took (a detour off the closer ports is
    looked at from its own switches)."""
    on_path = np.zeros(len(tw.out), bool)
    on_path[tails[kind[tails] >= LEAF] - tw.sw0] = True
    leaves = on_path & (kind[tw.sw0 :] == LEAF)
    reach, ports = _last("ports", (tw, leaves.tobytes()), lambda: _ports_from(tw, leaves, ud))
    if (on_path & ~reach).any():
        return _ports_from(tw, on_path, ud)[1]
    return ports


def _ports_from(tw: Towards, start: np.ndarray, ud: UpDown) -> tuple[np.ndarray, np.ndarray]:
    """The switches reached from the switches ``start`` (a mask, local numbers) by closer
    ports, and :func:`_reachable_ports` from them."""
    reach = start.copy()
    ok = tw.out >= 0
    closer = closer_ports(tw.dist, tw.out, tw.heads).any(0)  # towards any flow's leaf
    while True:
        grown = reach.copy()
        grown[tw.heads[reach[:, None] & closer]] = True
        if np.array_equal(grown, reach):
            break
        reach = grown
    take = reach[:, None] & (closer | (ok & ud.is_switch_up[np.maximum(tw.out, 0)]))
    return reach, tw.out[take]
