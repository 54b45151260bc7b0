"""The queues random per-packet spraying leaves behind (routing ``spray``).

Spraying splits a flow evenly over its equal-cost next hops only on average: each packet
picks its port at random, so the count a port receives over a transfer wanders around its
mean. A port loaded near its capacity (a permutation's leaf uplinks: eight senders at line
rate over eight uplinks) integrates that wander, and the flows it carries finish only once
their packets in it have drained. The fluid model has no such queue; this module adds it.

Per port where flows split, in packet times of that port: the queue is a random walk with
drift ``rho - 1`` (its load from the flows' mean rates) and, per packet time, variance
``sum_k r_k w_k (1 - w_k)`` (flow k arriving at ``r_k`` packets per packet time and sending the
share ``w_k`` of them here), reflected at zero: in the Brownian limit its value after ``tau``
packet times is distributed as the running maximum of a Brownian motion with that drift
(time reversal; Harrison, *Brownian Motion and Stochastic Flow Systems*, 1985, ch. 1). Each
seed draws it exactly: the end point, then the maximum of the Brownian bridge to it
(Glasserman, *Monte Carlo Methods in Financial Engineering*, 2004, sec. 6.4). A flow finishes
late by the longest queue on the ports where it splits. Loads well below capacity (an
all-to-all's uplinks at ~0.9) leave a few packets; a saturated port's queue grows with the
square root of the transfer.

Not modelled: a sprayer that cycles through a fixed set of path labels (its split is fixed
per label set and adds a bias that grows with the transfer), and the queues where sprayed
traffic from several switches meets again downstream.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.ports import PortPairs, port_pairs

# A pair whose egress entry carries less than this share of what its ingress entry brings is
# a split (float round-off aside, an unsplit hop carries all of it).
SPLIT_SHARE = 1 - 1e-9


def spray_drain_us(
    net: Network,
    routed: Routed,
    column: np.ndarray,
    rate_GBps: np.ndarray,
    duration_us: np.ndarray,
    packet_bytes: float,
    rng: np.random.Generator,
    pairs: PortPairs | None = None,
) -> np.ndarray:
    """Per column, how much later its last packet arrives than the fluid model says: the
    longest end-of-transfer queue (us) on the ports where its flows split.

    ``column``: each routed flow's column; ``rate_GBps`` and ``duration_us``: each column's
    mean rate and its time from start to finish in the fluid run; ``pairs``: ``routed``'s
    port pairs, when the caller has them."""
    out = np.zeros(len(rate_GBps))
    pp = port_pairs(net, routed) if pairs is None else pairs
    part = pp.weight / np.maximum(routed.weight[pp.e_in], 1e-300)
    split = part < SPLIT_SHARE
    if not split.any():
        return out
    cap = np.asarray(net.capacity, float)
    col = column[pp.flow[split]]
    lane, w = pp.out[split], part[split]
    slot_us = packet_bytes / (cap * 1e3)  # a packet's time on each lane
    arriving = rate_GBps[col] * routed.weight[pp.e_in[split]] / cap[lane]  # packets per slot
    lanes = net.lanes
    var = np.bincount(lane, weights=arriving * w * (1 - w), minlength=lanes)
    # the load of every lane, split or not, from the columns' mean rates
    load = np.bincount(
        routed.lane, weights=rate_GBps[column[routed.flow]] * routed.weight, minlength=lanes
    )
    rho = load / cap
    weight = np.bincount(lane, weights=arriving * w, minlength=lanes)
    tau = np.bincount(lane, weights=arriving * w * duration_us[col], minlength=lanes)
    hot = np.flatnonzero(var > 0)
    tau = tau[hot] / np.maximum(weight[hot], 1e-300) / slot_us[hot]  # load-weighted, in slots
    drift = np.minimum(rho[hot] - 1.0, 0.0)
    sd = np.sqrt(var[hot] * tau)
    end = drift * tau + sd * rng.standard_normal(len(hot))
    # the maximum of the Brownian bridge from 0 to ``end``: the reflected queue's value
    top = (end + np.sqrt(end**2 - 2 * sd**2 * np.log1p(-rng.uniform(size=len(hot))))) / 2
    queue_us = np.zeros(lanes)
    queue_us[hot] = np.maximum(top, 0.0) * slot_us[hot]
    # per column, the longest queue on the entries where it splits (entries, not pairs: a
    # sprayed flow enters a switch on many lanes and each pairs with every lane it leaves on)
    entry = np.zeros(len(routed.lane), bool)
    entry[pp.e_out[split]] = True
    e = np.flatnonzero(entry)
    np.maximum.at(out, column[routed.flow[e]], queue_us[routed.lane[e]])
    return out
