"""What a sender's NIC does on a lossless fabric without end-to-end congestion control (RoCE
with PFC only, InfiniBand credits), which max-min sharing alone misses:

- **Turns.** The NIC serves its flows round-robin, one turn each, and an open-loop sender
  (no window, no rate cut) keeps sending a flow that is held back further on: its bytes wait
  in the switches' queues. So a flow held back downstream still takes its turn at the NIC, and
  the NIC's other flows share only what those turns leave (``C - held x C / k`` for ``k``
  flows), not the whole of what the held flow cannot use.
- **Stranded bytes.** What a held flow sends beyond what it gets through piles up in the
  queues along its path, switch by switch, and a switch's queue for one (ingress, egress) pair
  fills with what every held flow through that pair strands: an incast's flows fill the pairs
  near its receiver together, a sender's own first switch only with its own. Once the most held
  flow has stranded its part of the pause threshold (XOFF) of every pair on its path (its
  excess over all the held flows' excess through the pair, times its share of the pair's
  ingress: a flow split over several egress ports fills one ingress threshold), the pauses
  reach the NIC itself (PFC) or the NIC runs out of credits: the NIC then sends only as fast
  as its held flows drain together (``1 - their rates / their turns`` of the time paused: its
  pause follows the bytes all of them leave in its first switch), and every other flow it
  sends is held with them (head-of-line blocking at the sender, the victims of an incast's
  senders). Held to its most held flow alone, a NIC held two incasts sharing their senders and
  a long all-to-all slower than a packet-level simulator shows; with each flow filling a whole
  XOFF on every port of its path alone, the victims of an incast's senders ended 20-66 % early
  (docs/congestion.md).

The onset is an event of the run (``onset_us``; onsets close together are one event,
``ONSET_MERGE``): behind a heavy incast the thresholds fill in microseconds; behind the few
percent an ECMP collision overloads a port, they take longer than short flows last.

Windowed senders (NCCL's ring and tree channels) and rate-limited ones (background) are left
out: a window caps what a held flow leaves in the fabric, and a rate limit is not a turn.
:mod:`.nic_kernel` is the compiled twin of :func:`held_nics` (same operations, same order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.waterfill import FINISH_MERGE
from fabricplan.topology.graph import LEAF

# A flow is held back when it gets less than its turn by more than float round-off; a NIC's
# load binds a pause when it beats what the pause leaves by more than that.
HELD_TOLERANCE = 1e-6
# Onsets within this share of the run's elapsed time after the next one are taken together, at
# the last of them (waterfill.FINISH_MERGE's rule for finishes): each NIC is held from its own
# fill time at the latest that much later, which errs fast; an all-to-all over 1,024 GPUs
# otherwise has an event for nearly every NIC.
ONSET_MERGE = FINISH_MERGE
# Stranded bytes count as filling the thresholds within float round-off of them (the onset
# event lands on the fill time computed from them).
FILL_ROUNDOFF = 1e-9


@dataclass
class NicTurns:
    """One run's sender NICs: per column its NIC's lane (-1: not an open-loop sender with one
    NIC); per lane the bytes its most held flow has stranded and strands per microsecond now;
    when the next NIC fills its thresholds."""

    nic: np.ndarray
    threshold_bytes: float  # XOFF (or a credit buffer) per ingress port
    stranded: np.ndarray
    excess: np.ndarray  # GB/s
    onset_us: float = np.inf  # from the last event's time
    elapsed_us: float = 0.0  # the run's time so far

    @classmethod
    def of(
        cls,
        net: Network,
        routed: Routed,
        col_of: np.ndarray,
        open_loop: np.ndarray,
        threshold_kb: float,
    ) -> NicTurns:
        """``open_loop``: per column, whether its sender pushes without a window or rate limit."""
        n = len(open_loop)
        flow, lane = routed.flow, routed.lane
        col = col_of[flow]
        at_nic = net.graph.vertex_kind[net.tail[lane]] < LEAF
        lo = np.full(n, net.lanes)
        hi = np.full(n, -1)
        np.minimum.at(lo, col[at_nic], lane[at_nic])
        np.maximum.at(hi, col[at_nic], lane[at_nic])
        one_flow = np.bincount(col_of, minlength=n) == 1
        nic = np.where(open_loop & one_flow & (lo == hi), hi, -1)
        return cls(
            nic.astype(np.int64),
            float(threshold_kb) * 1024,
            np.zeros(net.lanes),
            np.zeros(net.lanes),
        )

    @property
    def shared(self) -> bool:
        """Whether any NIC sends two flows or more: else turns and holds change nothing (an
        incast's or a permutation's senders), and a run leaves them out."""
        nic = self.nic[self.nic >= 0]
        return len(nic) > len(np.unique(nic))

    def elapse(self, dt_us: float) -> None:
        """A phase of ``dt_us`` passed at the current excess."""
        self.stranded += self.excess * 1e3 * dt_us
        self.elapsed_us += dt_us


def held_nics(
    t: NicTurns,
    running: np.ndarray,
    rates: np.ndarray,
    capacity: np.ndarray,
    pause: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The pause per lane that the NICs' turns and filled thresholds add to ``rates`` (the
    event's rates without them, under the event's ``pause`` per lane) and, where a NIC is
    paused (its thresholds filled), the share of what its senders push that gets out (None:
    none paused); None where nothing binds. Updates ``t``'s excess and onset. ``pairs``: the
    paths' port pairs (each one's (ingress, egress) id, column, weight).

    A NIC link its first switch already pauses (a hot port there) gives turns only in the time
    it sends: a flow is held back downstream when it gets less than that turn, and a flow the
    pause alone slows strands nothing."""
    lanes = len(capacity)
    cols = np.flatnonzero(running & (t.nic >= 0))
    lane = t.nic[cols]
    r = rates[cols]
    k = np.bincount(lane, minlength=lanes)
    sending = capacity * (1 - pause)
    turn = sending / np.maximum(k, 1)
    s = turn[lane]
    held = r < s * (1 - HELD_TOLERANCE)
    hc, hl, hx = cols[held], lane[held], s[held] - r[held]
    excess = np.zeros(lanes)
    np.maximum.at(excess, hl, hx)
    # each held flow's part of XOFF on each pair of its path: its excess over the excess of all
    # the held flows through that pair, times its share of the pair's ingress (a flow split
    # over several egress ports fills one ingress threshold, not one per egress), summed over
    # the path (in pair order)
    x = np.zeros(len(t.nic))
    x[hc] = hx
    p_port, p_col, p_w = pairs
    ex = x[p_col] * p_w
    through = np.bincount(p_port, weights=ex)
    part = np.divide(ex, through[p_port], out=np.zeros(len(ex)), where=ex > 0) * p_w
    parts = np.bincount(p_col, weights=part, minlength=len(t.nic))
    # a NIC's: its most held flow's (the largest of equally held ones)
    most = hx == excess[hl]
    need = np.zeros(lanes)
    np.maximum.at(need, hl[most], parts[hc[most]])
    need = need * t.threshold_bytes
    t.stranded = np.where(excess > 0, t.stranded, 0.0)  # nothing held: the queues drain
    filled = (excess > 0) & (t.stranded >= need * (1 - FILL_ROUNDOFF))
    n_held = np.bincount(lane[held], minlength=lanes)
    got = np.bincount(lane[held], weights=r[held], minlength=lanes)
    load = np.bincount(lane, weights=r, minlength=lanes)
    # turns: the held flows' turns are not the others'
    room = got + sending - n_held * turn
    short = (n_held > 0) & (load > room * (1 + HELD_TOLERANCE))
    p_turns = np.where(short, 1 - room / capacity, 0.0)
    # filled thresholds: the NIC sends as fast as its held flows drain together
    drain = got / np.maximum(n_held * (capacity / np.maximum(k, 1)), 1e-300)
    p_held = np.where(filled, 1 - drain, 0.0)
    p = np.maximum(p_turns, p_held)
    binds = (p > 0) & (load > capacity * (1 - p) * (1 + HELD_TOLERANCE))
    # only a NIC with another flow to hold is worth an event
    soon = (excess > 0) & ~filled & (k > 1)
    wait = np.divide(need - t.stranded, excess * 1e3, out=np.full(lanes, np.inf), where=soon)
    t.excess = excess
    # onsets close together are one event, at the last of them (as finishes are: FINISH_MERGE)
    first = float(wait.min(initial=np.inf))
    t.onset_us = float(wait[wait <= first + ONSET_MERGE * t.elapsed_us].max(initial=first))
    if not binds.any():
        return None
    paused = binds & filled
    return np.where(binds, p, 0.0), (np.where(paused, 1 - p, 1.0) if paused.any() else None)
