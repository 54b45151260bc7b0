"""Flowlet switching at gaps: a flow whose packets stop for longer than the switch's flowlet
timeout starts a new flowlet, which the switch may send out of a port with a shorter queue.

Two things open such gaps. PFC: a lossless egress port fed by more than it can send pauses its
ingress ports in turn, and a paused ingress resumes once its queue has drained from XOFF, plus
what was still in flight when the pause went out (the PFC headroom: a round trip of the hop at
line rate), down to XON, at that ingress's share of the port::

    gap = (XOFF - XON + 2 x hop delay x line rate) / (line rate x (1 - paused share))

and it recurs once per pause cycle, ``gap / paused share``. And a NIC that interleaves many
flows sends each of them one packet every ``MTU / its rate``: past the timeout, every packet
is a new flowlet (an all-to-all's flows at their NIC share, or a flow held back that far).

At a new flowlet the switch compares its ports by queue, quantised into a few levels, and
moves the flow only when another port is on a strictly lower level, to one of the lowest at
random: while its own port ties with the emptiest, a flow stays, however often it has gaps
(htsim ``FatTreeSwitch::getNextHop``, per-flowlet adaptive routing; Broadcom dynamic load
balancing in flowlet mode, as Juniper documents it: on inactivity expiry a flow is re-checked
and moved if its port is no longer the best), with the fabric's move probability, so the wait
is a geometric number of chances.

The move reorders the flow: what is still queued on the old path (its part of XON at the
paused ingress) arrives after the first packets on the new one, and a RoCE NIC's go-back-N
resends from the first missing packet, and everything it sent in the round trip before the
receiver's NACK came back.

Moves apply to fat-tree and rail paths (up, then down; a choice only on the way up) with one
queue pair per connection; elsewhere flowlet routing keeps each flow's first path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fabricplan.catalog import Fabric
from fabricplan.collectives.system import CommSystem
from fabricplan.congestion.adaptive import TIE_JITTER_GBPS
from fabricplan.congestion.case import Case
from fabricplan.congestion.flowcontrol import FlowControl, Phases, RunRecord
from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.ports import PortPairs, port_pairs

# Queue levels a switch tells its ports apart by, as shares of a port's buffer: htsim's
# compare_queuesize quantises at 5, 10 and 20 % of the queue; Broadcom DLB likewise bins port
# quality into a few bands (Juniper's "quality delta" between bands).
QUEUE_LEVELS = (0.05, 0.10, 0.20)
# Moves due within this share of the elapsed time after the first due one are made together:
# each batch re-routes and rebuilds the run's port tables, so batches bound the cost. A move
# made early by at most this share errs fast.
MOVE_MERGE = 0.05
# A flow is held back when it gets less than this share below what its senders push.
HELD = 1e-6
# Groups a batch of moves is routed in, one after the other.
MOVE_GROUPS = 16
# Weight of a port's use (0-1 of its capacity) beside its queue level (whole numbers) when a
# moved flow's path is chosen: under one level, so it only breaks ties between equal levels.
LOAD_TIE = 0.5
# Guard, not physics: a flow moves at most this often in a run. Each move resends at least
# XON, so a flow past it has resent more than most flows carry; it keeps its last path.
MAX_MOVES_PER_FLOW = 32


@dataclass(frozen=True)
class FlowletPolicy:
    timeout_us: float  # gap after which the next packet is a new flowlet
    move_share: float  # probability that a new flowlet is moved when a better port exists
    headroom_kb: float  # XOFF - XON + a hop's round trip at line rate
    buffer_kb: float  # per egress port: the queue the levels are shares of
    xoff_kb: float
    xon_kb: float  # what waits at a paused ingress when it resumes
    rtt_us: float  # across the fabric: what go-back-N sends before the NACK comes back
    mtu_bytes: int  # a packet: a flow's packets are this far apart at its rate
    go_back_n: bool  # the NIC resends from the first missing packet (RoCE); else it reorders
    # senders paced by congestion control (DCQCN) leave gaps only where PFC pauses them;
    # unpaced ones (PFC only) are stopped by PFC for all the time they are held back
    paced: bool = False

    @classmethod
    def of(
        cls,
        timeout_us: float,
        move_share: float,
        xoff_kb: float,
        xon_kb: float,
        buffer_kb: float,
        hop_us: float,
        nic_GBps: float,
        rtt_us: float,
        mtu_bytes: int,
        go_back_n: bool,
        paced: bool = False,
    ) -> FlowletPolicy:
        """From the switch's settings and the PFC thresholds; ``hop_us``: one hop's delay."""
        headroom = xoff_kb - xon_kb + 2 * hop_us * _kb_per_us(nic_GBps)
        return cls(
            timeout_us,
            move_share,
            headroom,
            buffer_kb,
            xoff_kb,
            xon_kb,
            rtt_us,
            mtu_bytes,
            go_back_n,
            paced,
        )

    def resend_kb(self, share: np.ndarray, push_GBps: np.ndarray, busy: np.ndarray) -> np.ndarray:
        """What go-back-N sends again after a move: the flow's part (``share``) of what its
        paused ingress still held (XON), and what it sent on the new path before the
        receiver's NACK came back: a round trip at its own rate on a free path; on a held one,
        at most its part of XOFF before PFC stops it again."""
        if not self.go_back_n:
            return np.zeros(len(share))
        sent = _kb_per_us(push_GBps) * self.rtt_us
        sent = np.where(busy, np.minimum(sent, self.xoff_kb * share), sent)
        return self.xon_kb * share + sent


def _kb_per_us(GBps: float | np.ndarray) -> float | np.ndarray:
    return GBps * 1e3 / 1024


class FlowletMoves:
    """:class:`Phases` of a run whose flowlet-routed flows may move at gaps (the
    :class:`~fabricplan.congestion.waterfill.Rerouting` that ``complete`` takes): each call
    shares the links, then ``next_change_us`` draws when the flows it finds held back by a
    queue they could avoid next find a better port, and ``change`` moves them."""

    def __init__(
        self,
        net: Network,
        routed: Routed,
        col_of: np.ndarray,
        movable: np.ndarray,
        build: Callable[[Routed, PortPairs | None], Phases],
        dst: np.ndarray,
        policy: FlowletPolicy,
        rng: np.random.Generator,
    ) -> None:
        self.net, self.col_of, self.movable = net, col_of, movable
        self.build, self.policy, self.rng = build, policy, rng
        self.towards = net.towards(dst)  # where a moved flow goes on to, hop by hop
        ud = net.up_down  # the network's: read only
        self.tier, self.up_lane, self.into_nic = ud.tier, ud.up_lane, ud.into_nic
        self.switch_ups, self.is_switch_up = ud.switch_ups, ud.is_switch_up
        self._ups: tuple[np.ndarray, np.ndarray] | None = None  # move_kernel.ups_by_switch
        self.level_kb = np.array(QUEUE_LEVELS) * policy.buffer_kb  # where the levels start
        self.due = np.full(len(movable), np.inf)
        self.moved = np.zeros(len(movable), np.int64)  # moves per hop flow
        # when each flow's last move was due: a move made early (MOVE_MERGE) still draws its
        # next chances from there, so batching moves does not quicken a flow's moves
        self.moved_due = np.zeros(len(movable))
        self.share = np.ones(len(movable))  # its part of its ingress's traffic, when due
        self.at = np.full(len(movable), -1)  # the switch each due move happens at
        self.moves = 0
        # per lane, what a moved flow's new path weighs beside queue levels (next_change_us)
        self.used = np.zeros(net.lanes)
        # the last event's rates and running columns, which the moves are judged on
        columns = int(col_of.max(initial=-1)) + 1
        self.last_rates, self.last_running = np.zeros(columns), np.zeros(columns, bool)
        self.routed = routed
        # the run's record, which every rebuilt Phases adds to
        self.record = RunRecord()
        # built on first use: a run in one compiled call never needs them
        self._phases: Phases | None = None

    @property
    def phases(self) -> Phases:
        """The :class:`Phases` of the current paths."""
        if self._phases is None:
            self._use(self.routed, self.build(self.routed, None))
        assert self._phases is not None
        return self._phases

    def _use(self, routed: Routed, phases: Phases) -> None:
        phases.record = self.record
        self.routed, self._phases = routed, phases
        pp = phases.pairs if phases.pairs is not None else port_pairs(self.net, routed)
        lane = routed.lane
        up = self.up_lane[lane[pp.e_out]] & self.movable[pp.flow]
        # per hop flow leaving a switch upwards: that switch, the lane it left by and came in on
        self.p_flow, self.p_out, self.p_in = pp.flow[up], lane[pp.e_out[up]], lane[pp.e_in[up]]
        self.p_switch = self.net.tail[self.p_out]
        # every port pair: what a switch sees queued on an up port (due_kernel.seen_paused)
        self.feeds = (pp.out, pp.into, self.col_of[pp.flow])

    @property
    def due_policy(self) -> tuple:
        """What :func:`.due_kernel.due_moves` reads of the policy: queue levels, XOFF + XON
        over 2, headroom, timeout, MTU, move share, the load tie weight, paced."""
        pol = self.policy
        return (
            self.level_kb,
            (pol.xoff_kb + pol.xon_kb) / 2,
            float(pol.headroom_kb),
            float(pol.timeout_us),
            float(pol.mtu_bytes),
            float(pol.move_share),
            LOAD_TIE,
            pol.paced,
        )

    def __call__(self, running: np.ndarray, left: np.ndarray) -> np.ndarray:
        rates = self.phases(running, left)
        self.last_rates, self.last_running = np.where(running, rates, 0.0), running
        return rates

    def next_change_us(self, now_us: float) -> float:
        """When the flows held back by a queue they could avoid next find a better port
        (:func:`.due_kernel.due_moves`). A lane carrying a held flow is paused for the share of
        time it does not send (paced senders: only for the share PFC pauses it). The queue a
        switch sees on a lane is a hot port's own, or on a port its next switch pauses the band
        PFC holds that switch's ingress queue in (between XON and XOFF: the port sends only as
        that queue drains). A move frees a flow only from a queue on the part of its path it
        changes, not from its receiver's own port, which every path ends in (an incast's
        receiving link).

        A flow gets a chance at each gap: a PFC pause cycle, where the paused ingress drains
        its queue above XON at its share of the port; or every packet, where its NIC
        interleaves so many flows that they are further apart than the timeout. On the way down
        (parallel links) a moved flow's path weighs the ports' use beside their queue levels: a
        full port has no queue until a moved flow joins it, and moves are made on the way up
        only, so this stands for what that switch's own moves would then do; on the way up a
        switch picks among its emptiest ports at random, as htsim's does."""
        from fabricplan.congestion.due_kernel import due_moves  # compiled: imported late

        net, r, ph = self.net, self.routed, self.phases
        if ph.last_queues:
            # a hot port's queue: the mean of its samples (one sample, PFC without DCQCN: that
            # sample, as np.mean gives it, without its cost at each of hundreds of ports)
            hot = (
                np.fromiter(ph.last_queues, np.int64, len(ph.last_queues)),
                np.array(
                    [s[0] if len(s) == 1 else float(np.mean(s)) for s in ph.last_queues.values()]
                ),
            )
        else:
            hot = (np.zeros(0, np.int64), np.zeros(0))
        soonest, self.queue, self.behind, self.used = due_moves(
            (self.last_rates, self.last_running, np.asarray(ph.push, float)),
            self.col_of,
            (r.lane, r.flow, np.asarray(r.weight, float)),
            (net.capacity, ph.last_pause, self.into_nic, self.up_lane),
            hot,
            (self.p_flow, self.p_out, self.p_in, self.p_switch),
            self.feeds,
            (self.switch_ups, net.tail, self.tier),
            (self.due, self.moved, self.moved_due, self.at, self.share),
            self.due_policy,
            (HELD, MAX_MOVES_PER_FLOW),
            float(now_us),
            self.rng,
        )
        return soonest

    def next_onset_us(self, now_us: float) -> float:
        """When the current paths' phases change of their own (:meth:`Phases.next_onset_us`)."""
        return self.phases.next_onset_us(now_us)

    def elapse(self, dt_us: float) -> None:
        """The phase of the last call lasted ``dt_us`` (:meth:`Phases.elapse`)."""
        self.phases.elapse(dt_us)

    def change(self, now_us: float) -> np.ndarray:
        """Move the flows due by ``now_us`` (and those due soon after: ``MOVE_MERGE``)."""
        pol, net, r = self.policy, self.net, self.routed
        due = np.flatnonzero(self.due <= now_us * (1 + MOVE_MERGE))
        resend = np.zeros(int(self.col_of.max(initial=-1)) + 1)
        if not len(due):
            return resend
        self.rng.shuffle(due)
        self.moved_due[due] = self.due[due]
        self.due[due] = np.inf
        at_of = np.full(len(self.due), -1)
        at_of[due] = self.at[due]
        self.at[due] = -1
        # the port each due flow leaves its switch by now
        at_pair = at_of[self.p_flow] == self.p_switch
        current = np.full(len(self.due), -1)
        current[self.p_flow[at_pair]] = self.p_out[at_pair]
        # in groups, each seeing what the groups before it left and took: a switch compares
        # its ports afresh at every flowlet, so the moves do not all pile onto one empty port,
        # and a flow whose port has emptied meanwhile stays
        n = len(self.due)
        # the routed entries of the due flows (the groups look at these only), and which of
        # them lie past the flow's switch (what a move replaces)
        cand = np.flatnonzero(_flags(due, n)[r.flow])
        c_flow, c_lane = r.flow[cand], r.lane[cand]
        c_beyond = ~(
            self.up_lane[c_lane]
            & (self.tier[net.head[c_lane]] <= self.tier[np.maximum(at_of[c_flow], 0)])
        )
        bounds = np.linspace(0, len(due), min(len(due), MOVE_GROUPS) + 1).astype(np.int64)
        tw = self.towards
        # compiled: imported late
        from fabricplan.congestion import compiled_phases
        from fabricplan.congestion.move_kernel import move_groups, ups_by_switch

        if self._ups is None:
            self._ups = ups_by_switch(self.switch_ups, net.tail, net.graph.vertices)
        lane, flow, went, c_leave = move_groups(
            due,
            bounds,
            at_of,
            current,
            net.graph.vertices,
            self.queue,
            self.level_kb,
            self.used,
            self._ups,
            net.tail,
            self.is_switch_up,
            c_flow,
            c_lane,
            c_beyond,
            float(pol.xon_kb),
            tw.sw0,
            tw.row,
            tw.tables,
            TIE_JITTER_GBPS,
            self.rng,
        )
        if not len(went):
            return resend
        fresh = Routed(lane, flow, np.ones(len(lane)))
        leave = np.zeros(len(r.lane), bool)
        leave[cand[c_leave]] = True
        rebuilt = compiled_phases.moved(self.phases, r, leave, fresh, _flags(went, n))
        if rebuilt is None:
            routed = Routed(
                np.concatenate([r.lane[~leave], fresh.lane]),
                np.concatenate([r.flow[~leave], fresh.flow]),
                np.concatenate([r.weight[~leave], fresh.weight]),
            )
            phases = self.build(routed, self._pairs_after(leave, routed, went))
        else:
            routed, phases = rebuilt
        self._use(routed, phases)
        self.moves += len(went)
        self.moved[went] += 1
        worst = np.zeros(len(self.due))
        np.maximum.at(worst, fresh.flow, self.behind[fresh.lane])
        push = self.phases.push[self.col_of[went]]
        per_move = pol.resend_kb(self.share[went], push, worst[went] > 0) * 1024
        np.add.at(resend, self.col_of[went], per_move)
        self.record.resent_bytes += sum(resend.tolist())
        return resend

    def _pairs_after(self, leave: np.ndarray, routed: Routed, went: np.ndarray) -> PortPairs | None:
        """The port pairs of ``routed``, the paths after the flows ``went`` moved (their entries
        ``leave`` gone, the new ones at the end): the pairs of the flows that stayed are kept,
        their entries renumbered, and only the moved flows' are joined again (a pair joins
        entries of one flow), instead of every flow's at each batch of moves."""
        old = self.phases.pairs
        if old is None:
            return None
        moved = _flags(went, len(self.due))
        keep = ~moved[old.flow]
        renumber = np.cumsum(~leave) - 1  # an old entry's place among the kept ones
        sub = np.flatnonzero(moved[routed.flow])
        pp = port_pairs(self.net, Routed(routed.lane[sub], routed.flow[sub], routed.weight[sub]))
        return PortPairs(
            np.concatenate([old.out[keep], pp.out]),
            np.concatenate([old.into[keep], pp.into]),
            np.concatenate([old.flow[keep], pp.flow]),
            np.concatenate([old.weight[keep], pp.weight]),
            np.concatenate([renumber[old.e_out[keep]], sub[pp.e_out]]),
            np.concatenate([renumber[old.e_in[keep]], sub[pp.e_in]]),
        )


def _flags(items: np.ndarray, n: int) -> np.ndarray:
    """A mask of ``n`` with ``items`` set: ``np.isin(x, items)`` is then ``mask[x]``, a gather
    instead of a sort (moves test a few flows against every routed entry, many times a run)."""
    out = np.zeros(n, bool)
    out[items] = True
    return out


def flowlet_policy(
    case: Case, routing: str, fab: Fabric, fc: FlowControl, switch_ns: float, sys: CommSystem
) -> FlowletPolicy | None:
    """The moves a case's flowlet routing makes, or None where it makes none: moves need PFC,
    up-down paths (not dragonfly) and one queue pair per connection."""
    q = fc.quality
    if routing != "flowlet" or q is None or not q.pfc or case.qps != 1:
        return None
    if case.design == "dragonfly":
        return None
    return FlowletPolicy.of(
        fab.flowlet_timeout_us,
        fab.flowlet_move_share,
        q.pfc_xoff_kb,
        q.pfc_xon_kb,
        q.buffer_kb,
        switch_ns / 1e3,
        sys.nic_GBps,
        2 * sys.p2p_latency_us,
        fab.mtu_bytes,
        go_back_n=fab.family == "roce",
        paced=fc.dcqcn,
    )
