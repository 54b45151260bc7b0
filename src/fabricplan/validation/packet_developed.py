"""The packet-level cases recorded as held back and then used to develop the model (the
senders' NICs, :mod:`fabricplan.congestion.nic_turns`, and what a flowlet switch sees of paused
ports, :func:`fabricplan.congestion.due_kernel.seen_paused`), set by set, each with what its first
comparison showed: checked still, no longer held back, and no target. ECMP and flowlet routing
only (the RoCE simulator). Their recorded figures are in ``data/packet-level``
(``htsim_developed.csv``)."""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.flowfile import FlowList
from fabricplan.validation.packet_cases import (
    RefCase,
    _a2a_among,
    _alltoall,
    _flows,
    _incast,
    _incast_and_two_more,
    _incast_from,
    _plus,
    _random_derangement,
)


def _random_perm(hosts: int, seed: int, size: float) -> FlowList:
    """A permutation drawn from ``seed`` (drawn again until no host sends to itself)."""
    dst = _random_derangement(hosts, seed)
    return FlowList(np.arange(hosts), dst, np.full(hosts, size), np.zeros(hosts))


def _with_victims(incast: FlowList, src: np.ndarray, dst: np.ndarray, size: float) -> FlowList:
    """An incast and other flows beside it (after it, in flow order)."""
    n = len(src)
    return FlowList(
        np.r_[incast.src, src],
        np.r_[incast.dst, dst],
        np.r_[incast.size_bytes, np.full(n, size)],
        np.zeros(len(incast.src) + n),
    )


def _beside_incast(senders: np.ndarray, flows_each: int, size: float) -> FlowList:
    """Each sender's flow to host 0, then its ``flows_each - 1`` others, to hosts from 64 on
    (each its own), sender by sender: the sender's NIC splits its rate over its flows, so host
    0's link is offered ``len(senders) / flows_each`` times a NIC's rate."""
    src = np.repeat(senders, flows_each)
    dst = np.zeros(len(src), np.int64)
    others = np.arange(len(src)) % flows_each != 0
    dst[others] = 64 + np.arange(np.count_nonzero(others))
    return FlowList(src, dst, np.full(len(src), size), np.zeros(len(src)))


# Hosts per leaf on the reference's 2-tier fat-tree: K / 2 of a K = 16 switch's ports face down,
# so hosts 0-7 are leaf 0's, 8-15 leaf 1's, and so on.
_HOSTS_PER_LEAF = 8
_NIC_SHARERS = np.arange(16, 48)
# one host on each of leaves 1-7
_ONE_PER_LEAF = np.arange(1, 8) * _HOSTS_PER_LEAF
# Cases recorded as held back after the model of commit 2f21742 was set, which then showed
# what it missed (flows beside an incast on its senders' own links) and were used to develop the
# sender NICs' model (congestion.nic_turns): checked still, no longer held back. Not part of the
# suite's target; ECMP and flowlet routing only (the RoCE simulator).
DEVELOPED = (
    RefCase("incast8", 128, "incast 8 -> 1, 4,000,000 B each", lambda: _incast(8, 4_000_000)),
    RefCase("incast32", 128, "incast 32 -> 1, 1,000,000 B each", lambda: _incast(32, 1_000_000)),
    RefCase(
        "a2a32", 128, "all-to-all among 32 hosts, 250,000 B a pair", lambda: _alltoall(32, 250_000)
    ),
    RefCase(
        "permrand128",
        128,
        "random permutation (seed 7) of 128 hosts, 2,000,000 B",
        lambda: _random_perm(128, 7, 2_000_000),
    ),
    RefCase(
        "incast24v",
        128,
        "incast 24 -> 1 from hosts 8-31, 2,000,000 B each, and 24 victims: each sender also "
        "sends 2,000,000 B to host i + 56",
        lambda: _with_victims(
            _incast_from(np.arange(8, 32), 2_000_000),
            np.arange(8, 32),
            np.arange(64, 88),
            2_000_000,
        ),
    ),
    RefCase(
        "incast32nic",
        128,
        "incast 32 -> 1 from hosts 16-47, 1,500,000 B each, and 32 victims: each sender also "
        "sends 1,000,000 B to a host on its own leaf",
        lambda: _with_victims(
            _incast_from(_NIC_SHARERS, 1_500_000),
            _NIC_SHARERS,
            _NIC_SHARERS // _HOSTS_PER_LEAF * _HOSTS_PER_LEAF
            + (_NIC_SHARERS + _HOSTS_PER_LEAF // 2) % _HOSTS_PER_LEAF,
            1_000_000,
        ),
    ),
    RefCase(
        "incast28up",
        128,
        "incast 28 -> 1 from hosts 8-31 and 48-51, 2,000,000 B each, and 4 victims from hosts "
        "52-55 (on a sender's leaf, sending no incast) to hosts 100-103, 2,000,000 B each",
        lambda: _with_victims(
            _incast_from(np.r_[np.arange(8, 32), np.arange(48, 52)], 2_000_000),
            np.arange(52, 56),
            np.arange(100, 104),
            2_000_000,
        ),
    ),
    RefCase(
        "inc7light",
        128,
        "one host on each of leaves 1-7 sends 6 flows of 2,000,000 B: one to host 0 (its link "
        "offered 58 GB/s) and 5 to hosts of their own",
        lambda: _beside_incast(_ONE_PER_LEAF, 6, 2_000_000),
    ),
    RefCase(
        "inc7heavy",
        128,
        "one host on each of leaves 1-7 sends 2 flows of 2,000,000 B: one to host 0 (its link "
        "offered 175 GB/s) and one to a host of its own",
        lambda: _beside_incast(_ONE_PER_LEAF, 2, 2_000_000),
    ),
)
# A sender on each of leaves 8 and 9 for the first held-back case; hosts 16-63 take its other
# flows, three a sender.
_FOUR_FLOW_SENDERS = np.arange(64, 80)
_TWELVE = np.arange(32, 44)
_FORTY = np.arange(8, 48)


def _a2a_and_hot_receiver() -> FlowList:
    """All-to-all among hosts 0-31 (250,000 B a pair), and each of them 1,000,000 B to host
    127: a hot receiver beside an all-to-all, as a popular expert of a mixture of experts."""
    a2a = _alltoall(32, 250_000)
    hot = np.arange(32)
    return FlowList(
        np.r_[a2a.src, hot],
        np.r_[a2a.dst, np.full(32, 127)],
        np.r_[a2a.size_bytes, np.full(32, 1_000_000.0)],
        np.zeros(len(a2a.src) + 32),
    )


# Cases recorded after the sender NICs' model was designed and before its code was written,
# compared once it was done; the comparison showed a flaw (a paused NIC's senders still counted
# as pushing at their full share), which was fixed, so these too are cases developed on.
DEVELOPED_NIC = (
    RefCase(
        "incast16x4",
        128,
        "incast 16 -> 1 from hosts 64-79, 1,000,000 B each, and each sender 3 more flows of "
        "1,000,000 B to hosts 16-63",
        lambda: _with_victims(
            _incast_from(_FOUR_FLOW_SENDERS, 1_000_000),
            np.repeat(_FOUR_FLOW_SENDERS, 3),
            16 + np.arange(48),
            1_000_000,
        ),
    ),
    RefCase(
        "a2ahot",
        128,
        "all-to-all among hosts 0-31, 250,000 B a pair, and each of them 1,000,000 B to host 127",
        _a2a_and_hot_receiver,
    ),
    RefCase(
        "incast12short",
        128,
        "incast 12 -> 1 from hosts 32-43, 2,000,000 B each, and each sender 250,000 B to host + 16",
        lambda: _with_victims(_incast_from(_TWELVE, 2_000_000), _TWELVE, _TWELVE + 16, 250_000),
    ),
    RefCase(
        "incast40long",
        128,
        "incast 40 -> 1 from hosts 8-47, 500,000 B each, and the even ones 2,000,000 B each to "
        "hosts 64-83",
        lambda: _with_victims(
            _incast_from(_FORTY, 500_000), _FORTY[::2], 64 + np.arange(20), 2_000_000
        ),
    ),
    RefCase(
        "twoincast",
        128,
        "two incasts at once: hosts 16-31 -> host 0 and hosts 24-39 -> host 8, 1,000,000 B each",
        lambda: FlowList(
            np.r_[np.arange(16, 32), np.arange(24, 40)],
            np.r_[np.zeros(16, np.int64), np.full(16, 8)],
            np.full(32, 1_000_000.0),
            np.zeros(32),
        ),
    ),
)
DEVELOPED += DEVELOPED_NIC
_TWENTY = np.arange(40, 60)
_TEN = np.arange(1, 11)
_SIXTEEN = np.arange(32, 48)


# Cases recorded once that fix was in, compared afterwards: they showed a NIC held back by
# two flows at different rates held to the slower one (both receivers of `threeway` idle,
# +36 %), as was an all-to-all whose flows outlast the thresholds' fill (`a2a64long`, recorded
# to check it: +9 %); so a paused NIC now sends as fast as its held flows drain together, and
# these are cases developed on too.
DEVELOPED_NIC_FIX = (
    RefCase(
        "a2a64long",
        128,
        "all-to-all among 64 hosts, 5,000,000 B a pair",
        lambda: _alltoall(64, 5_000_000),
    ),
    RefCase(
        "incast20x2",
        128,
        "incast 20 -> 1 from hosts 40-59 to host 127, 1,500,000 B each, and each sender "
        "1,500,000 B to host - 32",
        lambda: _plus(_flows(_TWENTY, 127, 1_500_000), _flows(_TWENTY, _TWENTY - 32, 1_500_000)),
    ),
    RefCase(
        "hot2a2a",
        128,
        "all-to-all among hosts 16-63, 200,000 B a pair, and hosts 16-39 each 1,000,000 B to "
        "host 0",
        lambda: _plus(_a2a_among(16, 48, 200_000), _flows(np.arange(16, 40), 0, 1_000_000)),
    ),
    RefCase(
        "incast10local",
        128,
        "incast 10 -> 1 from hosts 1-10 (7 on the receiver's leaf), 2,000,000 B each, and each "
        "sender 1,000,000 B to hosts 64-73",
        lambda: _plus(_flows(_TEN, 0, 2_000_000), _flows(_TEN, 64 + np.arange(10), 1_000_000)),
    ),
    RefCase(
        "threeway",
        128,
        "hosts 32-47 each send 800,000 B to host 0, to host 8 and to one of hosts 100-115",
        lambda: _plus(
            _flows(_SIXTEEN, 0, 800_000),
            _flows(_SIXTEEN, 8, 800_000),
            _flows(_SIXTEEN, 100 + np.arange(16), 800_000),
        ),
    ),
)
DEVELOPED += DEVELOPED_NIC_FIX
_LEAF_2_TO_4 = np.arange(40, 64)
_SIX_LEAVES = np.array([16, 32, 48, 80, 96, 112])


def _six_heavy() -> FlowList:
    """One host on each of six leaves sends 4 flows of 1,500,000 B: one to host 0, three to
    hosts of their own (from host 2 on, skipping the senders)."""
    others = np.setdiff1d(np.arange(2, 128), _SIX_LEAVES)[:18]
    src = np.repeat(_SIX_LEAVES, 4)
    dst = np.zeros(24, np.int64)
    dst[np.arange(24) % 4 != 0] = others
    return FlowList(src, dst, np.full(24, 1_500_000.0), np.zeros(24))


# Cases recorded once that was in, compared afterwards; the NICs' victims were still early
# (their flows that only the NIC's own pause slows counted as held back downstream), so a
# NIC's turns now count only the time its link sends: cases developed on too.
DEVELOPED_NIC_TURNS = (
    RefCase(
        "incast24mix",
        128,
        "incast 24 -> 1 from hosts 40-63 to host 127, 1,000,000 B each, and each sender "
        "500,000 B to host - 40 and to host + 40",
        lambda: _incast_and_two_more(_LEAF_2_TO_4, 127, 1_000_000, (-40, 40), 500_000),
    ),
    RefCase(
        "a2a48hot",
        128,
        "all-to-all among hosts 64-111, 300,000 B a pair, and hosts 64-79 each 2,000,000 B to "
        "host 1",
        lambda: _plus(_a2a_among(64, 48, 300_000), _flows(np.arange(64, 80), 1, 2_000_000)),
    ),
    RefCase(
        "incast6heavy",
        128,
        "one host on each of 6 leaves sends 4 flows of 1,500,000 B: one to host 0, three to "
        "hosts of their own",
        _six_heavy,
    ),
    RefCase(
        "permincast",
        128,
        "a random permutation (seed 11) of the 128 hosts, 1,000,000 B, and hosts 64-95 each "
        "1,000,000 B to host 5",
        lambda: _plus(
            _flows(np.arange(128), _random_derangement(128, 11), 1_000_000),
            _flows(np.arange(64, 96), 5, 1_000_000),
        ),
    ),
)
DEVELOPED += DEVELOPED_NIC_TURNS
_TWELVE_FAR = np.arange(100, 112)
_FORTY_NEAR = np.arange(1, 41)


def _two_a2a_and_hot() -> FlowList:
    """All-to-all among hosts 0-23 and among hosts 64-87 (400,000 B a pair), and hosts 0-7
    each 1,000,000 B to host 70."""
    return _plus(
        _a2a_among(0, 24, 400_000),
        _a2a_among(64, 24, 400_000),
        _flows(np.arange(8), 70, 1_000_000),
    )


def _fan_out() -> FlowList:
    """Hosts 8-15 and 56-63 each send 1,000,000 B to one host on each of leaves 3-6, so that
    every receiver gets two flows (a 2 -> 1 incast) and every sender four."""
    src, dst = [], []
    for group in (np.arange(8, 16), np.arange(56, 64)):
        for i, x in enumerate(group):
            for j, base in enumerate((24, 32, 40, 48)):
                src.append(x)
                dst.append(base + (i + j) % 8)
    return FlowList(
        np.array(src), np.array(dst), np.full(len(src), 1_000_000.0), np.zeros(len(src))
    )


# Cases recorded once the senders' NICs' turns were final, compared afterwards: the flows beside
# an incast on its senders' links still ended 21-66 % early (as in `incast24mix`), because each
# held flow filled XOFF on every port of its path alone, where an incast's flows fill the ports
# near the receiver together; so the held flows through a port pair now fill its threshold
# together, and these are cases developed on too.
DEVELOPED_SHARED_FILL = (
    RefCase(
        "incast12x3",
        128,
        "incast 12 -> 1 from hosts 100-111 to host 50, 1,200,000 B each, and each sender "
        "600,000 B to host - 96 and to host - 84",
        lambda: _incast_and_two_more(_TWELVE_FAR, 50, 1_200_000, (-96, -84), 600_000),
    ),
    RefCase(
        "a2a24x2",
        128,
        "all-to-all among hosts 0-23 and among hosts 64-87, 400,000 B a pair, and hosts 0-7 "
        "each 1,000,000 B to host 70",
        _two_a2a_and_hot,
    ),
    RefCase(
        "incast40local",
        128,
        "incast 40 -> 1 from hosts 1-40 (7 on the receiver's leaf), 600,000 B each, and each "
        "sender 600,000 B to host + 64",
        lambda: _plus(
            _flows(_FORTY_NEAR, 0, 600_000), _flows(_FORTY_NEAR, _FORTY_NEAR + 64, 600_000)
        ),
    ),
    RefCase(
        "fanout",
        128,
        "hosts 8-15 and 56-63 each send 1,000,000 B to one host on each of leaves 3-6 (every "
        "receiver two flows)",
        _fan_out,
    ),
)
DEVELOPED += DEVELOPED_SHARED_FILL
_SIXTEEN_FAR = np.arange(16, 32)
_TWO_DOZEN = np.arange(32, 56)
_ONE_LEAF = np.arange(40, 48)


# Cases recorded once the shared fill of the port pairs was final and compared once: the flows
# beside an incast under flowlet routing still ended 22-27 % early at the tail; a flowlet
# switch's view of the up ports its next switch pauses (due_kernel.seen_paused) was then chosen
# while these were looked at, so they are cases developed on too.
DEVELOPED_PAIR_FILL = (
    RefCase(
        "incast16far",
        128,
        "incast 16 -> 1 from hosts 16-31 to host 100, 800,000 B each, and each sender 400,000 B "
        "to host + 48",
        lambda: _plus(
            _flows(_SIXTEEN_FAR, 100, 800_000), _flows(_SIXTEEN_FAR, _SIXTEEN_FAR + 48, 400_000)
        ),
    ),
    RefCase(
        "twoincast12",
        128,
        "hosts 32-43 each 1,000,000 B to host 0 and hosts 44-55 each 1,000,000 B to host 127, "
        "and each of the 24 senders 300,000 B to host 96 + (its place mod 16)",
        lambda: _plus(
            _flows(_TWO_DOZEN[:12], 0, 1_000_000),
            _flows(_TWO_DOZEN[12:], 127, 1_000_000),
            _flows(_TWO_DOZEN, 96 + np.arange(24) % 16, 300_000),
        ),
    ),
    RefCase(
        "a2ainc",
        128,
        "all-to-all among hosts 64-79, 300,000 B a pair, and hosts 64-71 each 1,000,000 B to "
        "host 5",
        lambda: _plus(_a2a_among(64, 16, 300_000), _flows(np.arange(64, 72), 5, 1_000_000)),
    ),
    RefCase(
        "incast8x4",
        128,
        "incast 8 -> 1 from hosts 40-47 (one leaf) to host 120, 1,500,000 B each, and each "
        "sender 500,000 B to host - 40, - 32 and - 24",
        lambda: _plus(
            _flows(_ONE_LEAF, 120, 1_500_000),
            _flows(_ONE_LEAF, _ONE_LEAF - 40, 500_000),
            _flows(_ONE_LEAF, _ONE_LEAF - 32, 500_000),
            _flows(_ONE_LEAF, _ONE_LEAF - 24, 500_000),
        ),
    ),
)
DEVELOPED += DEVELOPED_PAIR_FILL
