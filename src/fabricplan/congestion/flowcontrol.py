"""What flow control does at congested links, evaluated again at every event of a run.

Max-min sharing assumes congestion control hands every flow its fair share at once. Real
fabrics get there through queues, and the queues act on *ports*. At every event (a flow starts
or finishes) this module looks at what the running senders push, finds the *hot* egress ports
(more arriving than they can send, with enough traffic to fill the queue to the pause or drop
threshold), and applies the fabric's flow control there:

- Lossless without end-to-end congestion control (InfiniBand credits; RoCE with PFC only):
  the switch's arbiter serves the ingress ports that feed a hot egress round-robin, so each
  ingress port gets a max-min share of it and its flows split that share (per-port, not
  per-flow, fairness: senders on the receiver's own switch beat remote ones, the parking-lot
  unfairness of lossless fabrics). A switch whose port is held to its share serves that
  share round-robin between its own ingress ports in turn, up the paths. An ingress port
  that brings more than its share fills its buffer to the threshold and is paused (PFC XOFF)
  or runs out of credits for the share ``1 - share/brought`` of the time. While it is
  paused, *every* flow on that link is held, including victims bound elsewhere (head-of-line
  blocking). A paused link that can no longer carry what is pushed into it pauses its own
  feeders in turn (congestion spreading).
- RoCE with DCQCN: rate cuts make sharing per flow; the DCQCN fluid model
  (:mod:`fabricplan.congestion.dcqcn`) gives the capacity the cuts leave idle and the share of
  time the queue sits above XOFF, during which the ports that overfeed it are paused.
- PFC off (lossy RoCE): the queue overflows; go-back-N costs goodput at the hot port.

Ring and tree channels are self-clocked by NCCL's window (``NCCL_WINDOW_BYTES`` in flight per
connection): they build a queue at a collision point only up to their windows, so a hot port
fed only by them pauses its feeders only when those windows exceed the pause threshold.

Because all of this is recomputed at each event, a port's capacity comes back when the flows
congesting it finish, and an incast whose receiving link PFC keeps full finishes at that
link's rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix

from fabricplan.collectives.nccl_constants import SIMPLE_STEP_BYTES
from fabricplan.congestion import kernels
from fabricplan.congestion.dcqcn import Quality, fluid_keys, fluids_of, quality
from fabricplan.congestion.groupfill import group_fill
from fabricplan.congestion.groups import runs, unique_inverse
from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.nic_turns import NicTurns, held_nics
from fabricplan.congestion.ports import PathArrivals, PortPairs, port_ids, port_pairs
from fabricplan.congestion.settings import FlowSettings
from fabricplan.congestion.waterfill import BINCOUNT_MAX_SIZE, Matrix, max_min_rates, with_rows
from fabricplan.topology.graph import LEAF

if TYPE_CHECKING:
    from fabricplan.catalog import Fabric

# Congestion spreads hop by hop: the hot port pauses the ports feeding it (level 1), and a
# paused link that cannot carry what is pushed into it pauses its own feeders (level 2 and up).
# Only level 1 is applied. Against the packet-level reference (validate --suite packet-level)
# deeper levels slow all-to-all by 13-15 % more than the packet simulator shows: a fluid average
# passes every rate mismatch upstream, where switch buffers absorb the short-lived ones. (They
# would bring the 64-to-1 incast's median from +9.4 % to +1.6 %; its tail is right either way.)
SPREAD_LEVELS = 1
# Switches whose arbitration is followed up a held port's paths: the hot port's own ingress
# ports (1), the switch feeding each of them (2), and so on up to the senders.
ARBITER_LEVELS = 4
# Assumption: queue an InfiniBand port holds per VL before its credits run out (small per-port
# buffers), the pause threshold of credit flow control.
IB_PORT_BUFFER_KB = 64.0
# A link is overloaded when its load beats its capacity by more than float round-off.
OVERLOAD_TOLERANCE = 1e-6
# Least share of its capacity a collapsed (go-back-N) link keeps: caps slowdowns at 1000x.
MIN_GOODPUT_SHARE = 1e-3
# A flow counts as a victim when pauses cost it more than this share of its rate.
VICTIM_LOSS = 0.01
# NCCL's steps in flight per connection (NCCL_STEPS, src/include/device.h) of the Simple
# protocol's 512 KiB steps: NCCL_BUFFSIZE's 4 MiB may be queued in the fabric per connection.
NCCL_STEPS = 8
NCCL_WINDOW_BYTES = SIMPLE_STEP_BYTES * NCCL_STEPS


@dataclass(frozen=True)
class FlowControl:
    name: str  # credit | pfc | pfc+dcqcn | lossy | lossy+dcqcn | tcp | lossless
    quality: Quality | None  # RoCE: the preset with the user's settings over it
    mtu_bytes: int

    @classmethod
    def of(
        cls,
        kind: str,
        lossless: bool,
        q: Quality | None,
        mtu: int,
        settings: FlowSettings | None = None,
    ) -> FlowControl:
        if kind == "credit":
            return cls("credit", None, mtu)
        if q is None:  # Ethernet without RDMA congestion control (TCP): max-min sharing only
            return cls("lossless" if lossless else "tcp", None, mtu)
        s = settings or FlowSettings()
        given = {
            "pfc_xoff_kb": s.pfc_xoff_kb,
            "pfc_xon_kb": s.pfc_xon_kb,
            "buffer_kb": s.buffer_kb,
            "kmin_kb": s.ecn_kmin_kb,
            "kmax_kb": s.ecn_kmax_kb,
        }
        update: dict[str, object] = {k: v for k, v in given.items() if v is not None}
        if s.congestion_control is not None:
            update["ecn"] = s.congestion_control == "dcqcn"
        q = q.model_copy(update=update)
        if q.pfc_xon_kb > q.pfc_xoff_kb:  # a lower XOFF given alone: resume where it pauses
            q = q.model_copy(update={"pfc_xon_kb": q.pfc_xoff_kb})
        if q.kmin_kb > q.kmax_kb:
            raise ValueError(
                f"ecn_kmin_kb: {q.kmin_kb:g} is above ecn_kmax_kb ({q.kmax_kb:g}) "
                f"of the '{q.id}' preset; give both"
            )
        return cls(("pfc" if q.pfc else "lossy") + ("+dcqcn" if q.ecn else ""), q, mtu)

    @classmethod
    def of_fabric(
        cls, fab: Fabric, roce_quality: str, settings: FlowSettings | None = None
    ) -> FlowControl:
        """What a case runs under on the catalog's fabric ``fab``: its kind of flow control,
        on RoCE the ``roce_quality`` preset, with ``settings`` over it."""
        q = quality(roce_quality) if fab.family == "roce" else None
        return cls.of(fab.flow_control, fab.lossless, q, fab.mtu_bytes, settings)

    @property
    def acts(self) -> bool:
        return self.name not in ("tcp", "lossless")

    @property
    def pauses(self) -> bool:
        return self.name == "credit" or (self.quality is not None and self.quality.pfc)

    @property
    def dcqcn(self) -> bool:
        return self.quality is not None and self.quality.ecn

    @property
    def lossless_open_loop(self) -> bool:
        """Lossless without end-to-end congestion control (credits, or PFC alone): nothing
        but the pauses slows a sender, so a held flow keeps its NIC's turns
        (:mod:`.nic_turns`)."""
        return self.pauses and not self.dcqcn

    @property
    def threshold_kb(self) -> float:
        """Queue per ingress port at which the port is paused (or, lossy, the port drops)."""
        if self.quality is None:
            return IB_PORT_BUFFER_KB
        return self.quality.pfc_xoff_kb if self.quality.pfc else self.quality.buffer_kb


def window_kb(self_clocked: np.ndarray) -> np.ndarray:
    """Per column, the queue (KB) its senders may build: NCCL's window for self-clocked ring
    and tree channels, unbounded (inf) for open-loop senders."""
    return np.where(self_clocked, NCCL_WINDOW_BYTES / 1024, np.inf)


@dataclass
class RunRecord:
    """What flow control did over one run: per event, the share of the job's links paused;
    the columns pauses slowed (in the first phase with pauses); the queues and utilisation of
    the phase with the most of the job running (for latency probes and the hottest links)."""

    paused: list[float] = field(default_factory=list)
    victims: np.ndarray | None = None
    queue_kb: dict[int, tuple[float, ...]] = field(default_factory=dict)
    utilisation: np.ndarray | None = None
    busiest: int = -1  # running job columns in the phase the queues were kept from
    # bytes the flowlet moves made RoCE's go-back-N send again, summed batch by batch (each
    # batch's column by column, in order, as the compiled run sums them)
    resent_bytes: float = 0.0


class Phases:
    """Rates of the running columns under flow control, one call per event.

    ``push``: what each column's senders push before congestion control reacts (its NIC
    share; background at its load); ``demand_cap``: a column's own rate limit (background);
    ``self_clocked``: windowed columns (ring and tree channels); ``a_t``: ``a``'s transpose,
    for the compiled fill (None: built where needed); ``pairs``: ``port_pairs(net, routed)``,
    when the caller has them; ``turns``: the run's sender NICs (:mod:`.nic_turns`)."""

    def __init__(
        self,
        net: Network,
        routed: Routed,
        col_of: np.ndarray,
        a: Matrix,
        a_t: csr_matrix | None,
        push: np.ndarray,
        demand_cap: np.ndarray,
        self_clocked: np.ndarray,
        job: np.ndarray,
        fc: FlowControl,
        rtt_us: float,
        pairs: PortPairs | None = None,
        turns: NicTurns | None = None,
    ) -> None:
        self.net, self.a, self.a_t, self.fc = net, a, a_t, fc
        # the senders' NICs (credit or PFC only): kept by the run, over flowlet rebuilds
        self.turns = turns if fc.lossless_open_loop else None
        # each entry's lane, for small runs: a weighted bincount makes the sparse product's
        # additions in the same order without its fixed cost
        self._a_lane = (
            np.repeat(np.arange(a.shape[0]), a.indptr[1:] - a.indptr[:-1])
            if a.nnz < BINCOUNT_MAX_SIZE
            else None
        )
        self.push, self.cap, self.job = push, demand_cap, job
        # what the fluid model's horizon divides by, every event of a DCQCN run
        self._pushing, self._bytes_per_us = push > 0, push * 1e3
        self.rtt_us = rtt_us
        # the pairs of these paths: the caller may have them (flowlet moves keep most)
        pp = (pairs if pairs is not None else port_pairs(net, routed)) if fc.acts else None
        self.pairs: PortPairs | None = pp  # which ingress port feeds which egress, per hop flow
        if pp is not None:
            self.p_out, self.p_in, self.p_w = pp.out, pp.into, pp.weight
            self.p_col = col_of[pp.flow]
            # every (egress, ingress) port a pair can heat, numbered once: an event marks the
            # hot ones instead of sorting its pairs again
            self.port_keys, self.p_port = port_ids(net, pp.out, pp.into)
            self.arrivals = PathArrivals(net, routed, col_of, pp, self.port_keys)
            self._upstream: np.ndarray | None = None  # built on first use: see _arbitrated
            # each column one hop flow (no coupled channels): a pair's upstream pair is the one
            # leaving the switch before by the very entry this pair enters by
            self._one_flow_per_column = not len(col_of) or int(np.bincount(col_of).max()) <= 1
        self.window_kb = window_kb(self_clocked)
        if pp is not None:  # per pair: an open-loop sender's, or the window it may queue
            self.p_open = ~np.isfinite(self.window_kb[self.p_col])
            self.p_window_kb = np.where(self.p_open, 0.0, self.window_kb[self.p_col] * self.p_w)
        # credit or PFC-only flow control: a batch of flowlet moves rebuilds these phases in one
        # compiled call (compiled_phases.moved), and on a small problem an event is one compiled
        # call too, once the process has the compiled kernels (pfc_kernel; the same rates as
        # the array code)
        self._pfc_only = pp is not None and fc.lossless_open_loop and SPREAD_LEVELS < 2
        self._compiled = self._pfc_only and max(a.nnz, len(routed.lane)) < kernels.COMPILED_MIN_SIZE
        self._kernel_args: tuple | None = None
        self.record = RunRecord()
        # the last event's pauses (share of time, per lane) and queues (KB samples, per hot
        # lane): what flowlet switching reacts to
        self.last_pause = np.zeros(net.lanes)
        self.last_queues: dict[int, tuple[float, ...]] = {}

    def __call__(self, running: np.ndarray, left: np.ndarray) -> np.ndarray:
        net, a = self.net, self.a
        if not self.fc.acts:
            rates = max_min_rates(a, net.capacity, running, self.cap, self.a_t)
            self._note(running, rates, np.zeros(net.lanes), {})
            return rates
        if self._compiled and kernels.loaded():
            from fabricplan.congestion.compiled_phases import compiled_rates  # imports Numba

            return compiled_rates(self, running)
        cap = net.capacity
        rates, pause, mult, queues, m, extra_cap = self._event(running, left, self.push, None)
        turns = self.turns
        held = None
        if turns is not None:
            held = held_nics(turns, running, rates, cap, pause, (self.p_port, self.p_col, self.p_w))
        if turns is not None and held is not None and held[1] is not None:
            # a NIC paused (its thresholds filled): its senders push only what gets out
            out, nic = held[1], turns.nic
            push = np.where(nic >= 0, self.push * out[np.maximum(nic, 0)], self.push)
            rates, pause, mult, queues, m, extra_cap = self._event(running, left, push, held[0])
        elif held is not None:  # only turns: the same pushes, less room on the NICs
            pause = np.maximum(pause, held[0])
            c = np.concatenate([cap * mult * (1 - pause), extra_cap])
            rates = max_min_rates(m, c, running, self.cap, self.a_t if m is self.a else None)
        eff = cap * mult * (1 - pause)
        if self.record.victims is None and np.count_nonzero(pause):  # the first phase with pauses
            c0 = np.concatenate([cap * mult, extra_cap])
            unpaused = max_min_rates(m, c0, running, self.cap)
            self.record.victims = running & (rates < unpaused * (1 - VICTIM_LOSS))
        self._note(running, rates, pause, queues, eff)
        return rates

    def _event(
        self,
        running: np.ndarray,
        left: np.ndarray,
        push_col: np.ndarray,
        extra_pause: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict, Matrix, np.ndarray]:
        """One pass from what the senders push (``push_col``): the rates, pauses, capacity
        congestion control leaves, queues, and the fill's matrix and extra capacities;
        ``extra_pause``: pauses per lane the NICs add."""
        net, a = self.net, self.a
        push = np.where(running, push_col, 0.0)
        lanes = net.lanes
        cap = net.capacity
        sel = running[self.p_col].nonzero()[0]
        out = self.p_out[sel]  # the other pair columns are gathered where they are needed
        bring = self.arrivals.brought(push, sel)
        arriving = np.bincount(out, weights=bring, minlength=lanes)
        hot = arriving > cap * (1 + OVERLOAD_TOLERANCE)
        mult = np.ones(lanes)  # capacity left by congestion control's own losses
        pause = np.zeros(lanes)
        queues: dict[int, tuple[float, ...]] = {}
        m: Matrix = a  # the links, and the arbiters' constraints when they bind
        extra_cap = np.zeros(0)
        if np.count_nonzero(hot):
            h = hot[out].nonzero()[0]
            sh = sel[h]
            pid = self.p_port[sh]
            marked = np.zeros(len(self.port_keys), bool)
            marked[pid] = True
            ports = self.port_keys[marked]  # sorted, as np.unique would give them
            inv = (np.add.accumulate(marked, dtype=np.int64) - 1)[pid]
            p_lane, p_from = ports // lanes, ports % lanes
            p_bring = np.bincount(inv, weights=bring[h], minlength=len(ports))
            n_ports = np.bincount(p_lane, minlength=lanes)
            # open-loop senders fill any queue; windowed ones only up to their windows
            out_h = out[h]
            opened = np.bincount(out_h, weights=self.p_open[sh], minlength=lanes) > 0
            windows = np.bincount(out_h, weights=self.p_window_kb[sh], minlength=lanes)
            # PFC and credits hold a threshold per ingress port; a lossy port drops past its
            # own buffer, whatever feeds it
            per_port = self.fc.pauses
            limit = self.fc.threshold_kb * (np.maximum(n_ports, 1) if per_port else 1)
            fills = opened | (windows > limit)
            hot &= fills
            keep = hot[p_lane]
            h_keep = hot[out_h]
            h, inv_all = h[h_keep], inv[h_keep]
            remap = np.add.accumulate(keep, dtype=np.int64) - 1
            inv = remap[inv_all]
            p_lane, p_from, p_bring = p_lane[keep], p_from[keep], p_bring[keep]
            if len(p_lane):
                w_h = self.p_w[sel[h]]
                share, pause, mult, queues = self._hot_ports(
                    running, inv, w_h, p_lane, p_from, p_bring, arriving, left, opened
                )
                if self.fc.lossless_open_loop:
                    # the arbiter's per-port shares bind the flows of each port, and each
                    # switch upstream shares what its port gets the same way
                    rows, cols, weights, extra_cap = self._arbitrated(sel, h, inv, share, bring)
                    m = with_rows(a, rows, cols, weights, len(extra_cap))
                pause = self._spread(pause, out, sel, bring, cap)
        if extra_pause is not None:
            pause = np.maximum(pause, extra_pause)
        eff = cap * mult * (1 - pause)
        c = np.concatenate([eff, extra_cap])
        rates = max_min_rates(m, c, running, self.cap, self.a_t if m is a else None)
        return rates, pause, mult, queues, m, extra_cap

    def next_onset_us(self, now_us: float) -> float:
        """When the next sender NIC fills its thresholds (inf: none), under the rates of the
        call just made at ``now_us``."""
        return np.inf if self.turns is None else now_us + self.turns.onset_us

    def elapse(self, dt_us: float) -> None:
        """The phase of the last call lasted ``dt_us``."""
        if self.turns is not None:
            self.turns.elapse(dt_us)

    def _held_queues(self, hot_lanes: np.ndarray, n_over: np.ndarray) -> dict:
        """Each hot port's queue without DCQCN: PFC (or credits) hold each ingress port that
        brings more than its share at the pause band (between XON and XOFF), or at the
        threshold."""
        q = self.fc.quality
        held = self.fc.threshold_kb if q is None else (q.pfc_xoff_kb + q.pfc_xon_kb) / 2
        return {
            lane: (held * max(n, 1.0),)
            for lane, n in zip(hot_lanes.tolist(), n_over.tolist(), strict=True)
        }

    def _hot_ports(
        self,
        running: np.ndarray,
        inv: np.ndarray,
        w_h: np.ndarray,
        p_lane: np.ndarray,
        p_from: np.ndarray,
        p_bring: np.ndarray,
        arriving: np.ndarray,
        left: np.ndarray,
        opened: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """Each hot port's share per ingress port, the pauses it sends upstream, the capacity
        its congestion control leaves, and its queue samples."""
        net, fc, cap = self.net, self.fc, self.net.capacity
        lanes = net.lanes
        mult = np.ones(lanes)
        pause = np.zeros(lanes)
        queues: dict[int, tuple[float, ...]] = {}
        first, dense = runs(p_lane)  # p_lane is sorted, as the ports are
        hot_lanes = p_lane[first]
        if fc.dcqcn:  # rate cuts share per flow: a port's share is its flows' part of the port
            flows_in = np.bincount(inv, weights=w_h, minlength=len(p_lane))
            flows_at = np.bincount(dense, weights=flows_in, minlength=len(hot_lanes))
            share = cap[p_lane] * flows_in / flows_at[dense]
        else:  # round-robin over the ingress ports
            share = group_fill(dense, p_bring, cap[hot_lanes])
        over = p_bring > share * (1 + OVERLOAD_TOLERANCE)
        phi = np.where(over, 1.0 - share / np.maximum(p_bring, 1e-300), 0.0)
        q = fc.quality
        if fc.dcqcn or (q is not None and not q.pfc):
            assert q is not None
            n_flows = np.bincount(dense, minlength=len(hot_lanes))
            fan_in = np.diff(np.r_[first, len(p_lane)])
            horizon = self._horizon(running, left)
            op = opened[hot_lanes]
            eff = np.ones(len(hot_lanes))
            ratio = arriving[hot_lanes] / cap[hot_lanes]
            drop = 1.0 - 1.0 / ratio  # lossy, and no congestion control acting: overflow drops
            lossy = np.ones(len(hot_lanes), bool)
            if fc.dcqcn:  # every open-loop hot port's fluid model, integrated in one batch
                fl = self._fluids(hot_lanes[op], n_flows[op], fan_in[op], arriving, horizon)
                pause_of = np.zeros(len(hot_lanes))
                # hundreds of hot ports an event in an all-to-all: a list each, not a loop
                queues.update(zip(hot_lanes[op].tolist(), [f.queue_kb for f in fl], strict=True))
                eff[op] = [f.utilisation for f in fl]
                drop[op] = [f.drop for f in fl]
                pause_of[op] = [f.pause for f in fl]
                phi = np.where(op[dense] & over, pause_of[dense], np.where(op[dense], 0.0, phi))
                phi = phi if q.pfc else np.where(op[dense], 0.0, phi)
                lossy = ~op
                # windowed senders only: DCQCN holds the queue at its marking threshold when
                # that lies below the pause threshold; otherwise PFC acts first
                if q.kmin_kb < fc.threshold_kb:
                    phi = np.where(op[dense], phi, 0.0)
                    lossy[:] = False
                elif q.pfc:
                    for lane, f in zip(hot_lanes[~op].tolist(), fan_in[~op].tolist(), strict=True):
                        queues[lane] = ((q.pfc_xoff_kb + q.pfc_xon_kb) / 2 * f,)
                    lossy[:] = False
                acted = op | lossy
            else:
                acted = lossy
            for lane in hot_lanes[lossy].tolist():
                queues[lane] = (q.buffer_kb,)
            eff = np.where(lossy, 1.0, eff)
            if not q.pfc:
                window = cap[hot_lanes] * 1e3 * self.rtt_us / fc.mtu_bytes
                d = np.where(acted, drop, 0.0)
                eff = eff * (1 - d) / (1 + (np.maximum(window, 1.0) - 1) * d)
            mult[hot_lanes[acted]] = np.maximum(eff[acted], MIN_GOODPUT_SHARE)
        else:
            n_over = np.bincount(dense, weights=over, minlength=len(hot_lanes))
            queues.update(self._held_queues(hot_lanes, n_over))
        if fc.pauses:
            np.maximum.at(pause, p_from, phi)
        return share, pause, mult, queues

    def _upstream_pairs(self) -> np.ndarray:
        """Per pair, the pair that brought its flow into the switch before (-1: it came from a
        NIC, or split over several): the arbiters upstream of a held port. Routing is fixed
        for the run, so it is built once."""
        if self._upstream is None and self._one_flow_per_column:
            # the entry a pair comes in by left the switch before in exactly one pair, or split
            pp = self.pairs
            assert pp is not None
            entries = int(max(pp.e_out.max(initial=-1), pp.e_in.max(initial=-1))) + 1
            leaving = np.full(entries, -1)
            leaving[pp.e_out] = np.arange(len(pp.e_out))
            leaving[np.bincount(pp.e_out, minlength=entries) != 1] = -1
            self._upstream = leaving[pp.e_in]
        if self._upstream is None:
            lanes = self.net.lanes
            key = self.p_col.astype(np.int64) * lanes + self.p_out
            order = np.argsort(key, kind="stable")
            q = self.p_col.astype(np.int64) * lanes + self.p_in
            lo = np.searchsorted(key[order], q, "left")
            one = np.searchsorted(key[order], q, "right") - lo == 1
            self._upstream = np.where(one, order[np.minimum(lo, len(order) - 1)], -1)
        return self._upstream

    def _arbitrated(
        self, sel: np.ndarray, h: np.ndarray, inv: np.ndarray, share: np.ndarray, bring: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows (flow, weight, capacity) of the per-port arbitration constraints: each hot port's
        ingress ports get ``share`` (rows ``inv`` over the pairs ``h``), and a switch whose port is
        held to its share serves that share round-robin between its own ingress ports, level by
        level up the paths (the spine of an incast serves the leaves feeding it, not their flows).

        ``sel``: the pairs of running flows; ``bring``: the GB/s each of them brings."""
        into, col, w = self.p_in[sel], self.p_col[sel], self.p_w[sel]
        rows, cols, weights, caps = [inv], [col[h]], [w[h]], [share]
        n_rows = len(share)
        lanes = self.net.lanes
        upstream = self._upstream_pairs()
        at = np.full(len(self.p_out), -1)  # each pair's place among the selected ones
        at[sel] = np.arange(len(sel))
        # only a port's ingress held below what it brings is served round-robin upstream
        held = np.bincount(inv, weights=bring[h], minlength=len(share)) > share * (
            1 + OVERLOAD_TOLERANCE
        )
        # each member pair's row in the level above (numbered within that level) and its capacity
        member, group, cap_of = h[held[inv]], inv[held[inv]], share
        for _ in range(ARBITER_LEVELS - 1):
            # the pair that brought each member's flow into the switch before
            up = upstream[sel[member]]
            go = up >= 0
            member, group, prev = member[go], group[go], at[up[go]]
            if not len(member):
                break
            # sub-groups: (row above, ingress port of the switch before), with what each brings
            subs, sub = unique_inverse(group.astype(np.int64) * lanes + into[prev])
            starts, dense = runs(subs // lanes)
            above = subs[starts] // lanes
            demand = np.bincount(sub, weights=bring[prev], minlength=len(subs))
            if len(starts) == len(subs):  # each sub-group alone above: it gets what it brings
                sub_share = np.minimum(demand, cap_of[above])  # up to its row's share
            else:
                sub_share = group_fill(dense, demand, cap_of[above])
            # round-robin binds only where it holds a sub-group below what it brings
            held = demand > sub_share * (1 + OVERLOAD_TOLERANCE)
            if not np.count_nonzero(held):
                break
            rows.append(n_rows + sub)
            cols.append(col[member])
            weights.append(w[member])
            caps.append(np.where(held, sub_share, np.inf))
            n_rows += len(subs)
            # onwards only from the sub-groups held below what they bring
            member, group, cap_of = member[held[sub]], sub[held[sub]], sub_share
        return (
            np.concatenate(rows),
            np.concatenate(cols),
            np.concatenate(weights),
            np.concatenate(caps),
        )

    def _fluids(
        self,
        lanes: np.ndarray,
        n_flows: np.ndarray,
        fan_in: np.ndarray,
        arriving: np.ndarray,
        horizon: float,
    ) -> list:
        """The DCQCN fluid model at each of ``lanes`` (many hot ports share a rounded key)."""
        fc, cap = self.fc, self.net.capacity
        assert fc.quality is not None
        keys = fluid_keys(n_flows, cap[lanes], arriving[lanes], fan_in)
        return fluids_of(keys, fc.quality, fc.mtu_bytes, horizon)

    def _horizon(self, running: np.ndarray, left: np.ndarray) -> float:
        """The rest of the run at NIC speed (us): the step the fluid model averages over."""
        live = running & np.isfinite(left) & self._pushing
        return float((left[live] / self._bytes_per_us[live]).max(initial=1.0))

    def _spread(
        self,
        pause: np.ndarray,
        out: np.ndarray,
        sel: np.ndarray,
        bring: np.ndarray,
        cap: np.ndarray,
    ) -> np.ndarray:
        """A paused link that can no longer carry what arrives for it pauses its own feeders,
        each by what it brings beyond its round-robin share of what is left. ``sel``: the pairs
        of running flows (``out`` and ``bring`` are theirs)."""
        if not self.fc.pauses or SPREAD_LEVELS < 2:
            return pause
        into = self.p_in[sel]
        switch_out = self.net.graph.vertex_kind[self.net.tail] >= LEAF
        level = np.flatnonzero((pause > 0) & switch_out)
        for _ in range(SPREAD_LEVELS - 1):
            if not len(level):
                break
            left = cap * (1 - pause)
            is_level = np.zeros(len(cap), bool)
            is_level[level] = True
            m = np.flatnonzero(is_level[out])
            key = out[m].astype(np.int64) * len(cap) + into[m]
            ports, inv = np.unique(key, return_inverse=True)
            p_lane, p_from = ports // len(cap), ports % len(cap)
            p_bring = np.bincount(inv, weights=bring[m], minlength=len(ports))
            arriving = np.bincount(p_lane, weights=p_bring, minlength=len(cap))
            over_lane = arriving > left * (1 + OVERLOAD_TOLERANCE)
            k = over_lane[p_lane]
            if not k.any():
                break
            p_lane, p_from, p_bring = p_lane[k], p_from[k], p_bring[k]
            lanes_here = np.unique(p_lane)
            share = group_fill(np.searchsorted(lanes_here, p_lane), p_bring, left[lanes_here])
            phi = np.where(p_bring > share, 1.0 - share / np.maximum(p_bring, 1e-300), 0.0)
            fresh = phi > pause[p_from]
            np.maximum.at(pause, p_from, phi)
            level = np.unique(p_from[fresh & switch_out[p_from]])
        return pause

    def _per_lane(self, x: np.ndarray) -> np.ndarray:
        """``a @ x``: what columns at ``x`` put on each lane."""
        if self._a_lane is None:
            return self.a @ x
        a = self.a
        return np.bincount(self._a_lane, weights=a.data * x[a.indices], minlength=a.shape[0])

    def _note(
        self,
        running: np.ndarray,
        rates: np.ndarray,
        pause: np.ndarray,
        queues: dict,
        eff: np.ndarray | None = None,
    ) -> None:
        self.last_pause, self.last_queues = pause, queues
        cols = running & self.job
        paused = 0.0  # no lane paused (DCQCN holding every queue, say): no job lane is either
        if np.count_nonzero(pause):
            job_lanes = self._per_lane(cols.astype(float)) > 0
            # np.mean's pairwise sum and one division, without its wrapper
            n_job_lanes = np.count_nonzero(job_lanes)
            if n_job_lanes:
                paused = float(np.add.reduce(pause[job_lanes]) / n_job_lanes)
        self.record.paused.append(paused)
        # latency probes and the hottest links see the phase with the most of the job running
        busy = int(np.count_nonzero(cols))
        if busy > self.record.busiest:
            self.record.busiest = busy
            load = self._per_lane(rates)
            c = self.net.capacity if eff is None else eff
            self.record.utilisation = np.divide(load, c, out=np.zeros_like(load), where=c > 0)
            self.record.queue_kb = queues
