"""The packet-level reference's cases: the flow lists run in the packet-level simulator and
here, on the reference's 128- or 1,024-host fat-tree (one NIC per host). ``CASES`` are the
suite (the target); ``HELD_BACK`` were recorded once the model was final and never used to
choose anything in it; the cases recorded as held back and then used to develop the model are
in :mod:`.packet_developed`. Their recorded figures are in ``data/packet-level``
(:mod:`.packet_level` compares them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fabricplan.congestion.flowfile import FlowList


def _perm(hosts: int, shift: int, size: float) -> FlowList:
    i = np.arange(hosts)
    return FlowList(i, (i + shift) % hosts, np.full(hosts, size), np.zeros(hosts))


def _incast(senders: int, size: float) -> FlowList:
    return _incast_from(np.arange(1, senders + 1), size)


def _incast_from(senders: np.ndarray, size: float) -> FlowList:
    n = len(senders)
    return FlowList(senders, np.zeros(n, np.int64), np.full(n, size), np.zeros(n))


def _alltoall(hosts: int, size: float) -> FlowList:
    a, b = np.nonzero(~np.eye(hosts, dtype=bool))
    return FlowList(a, b, np.full(len(a), size), np.zeros(len(a)))


@dataclass(frozen=True)
class RefCase:
    name: str
    hosts: int  # the fabric's hosts (one NIC each)
    what: str
    flows: Callable[[], FlowList]


CASES = (
    RefCase(
        "perm128", 128, "permutation i -> i+32, 4,005,000 B", lambda: _perm(128, 32, 4_005_000)
    ),
    RefCase(
        "perm1024", 1024, "permutation i -> i+32, 4,005,000 B", lambda: _perm(1024, 32, 4_005_000)
    ),
    RefCase(
        "ring1024",
        1024,
        "ring step i -> i+8 (every hop leaves its leaf), 4,005,000 B",
        lambda: _perm(1024, 8, 4_005_000),
    ),
    RefCase("incast16", 128, "incast 16 -> 1, 2,000,000 B each", lambda: _incast(16, 2_000_000)),
    RefCase("incast64", 128, "incast 64 -> 1, 2,000,000 B each", lambda: _incast(64, 2_000_000)),
    RefCase(
        "a2a64", 128, "all-to-all among 64 hosts, 500,000 B a pair", lambda: _alltoall(64, 500_000)
    ),
    RefCase(
        "a2a128",
        128,
        "all-to-all among 128 hosts, 500,000 B a pair",
        lambda: _alltoall(128, 500_000),
    ),
)
ROUTINGS = ("ecmp", "flowlet", "spray")


def _random_derangement(hosts: int, seed: int) -> np.ndarray:
    """A permutation of ``hosts`` drawn from ``seed`` (drawn again until no host maps to
    itself)."""
    rng = np.random.default_rng(seed)
    dst = rng.permutation(hosts)
    while (dst == np.arange(hosts)).any():
        dst = rng.permutation(hosts)
    return dst


def _a2a_among(first: int, hosts: int, size: float) -> FlowList:
    """All-to-all among hosts ``first`` to ``first + hosts - 1``."""
    a2a = _alltoall(hosts, size)
    return FlowList(a2a.src + first, a2a.dst + first, a2a.size_bytes, a2a.start_us)


def _plus(*lists: FlowList) -> FlowList:
    """The flows of ``lists``, in turn."""
    return FlowList(
        np.concatenate([f.src for f in lists]),
        np.concatenate([f.dst for f in lists]),
        np.concatenate([f.size_bytes for f in lists]),
        np.concatenate([f.start_us for f in lists]),
    )


def _incast_and_two_more(
    senders: np.ndarray, receiver: int, size: float, offsets: tuple[int, int], other: float
) -> FlowList:
    """An incast from ``senders`` to ``receiver``, then each sender's flow to the host
    ``offsets[0]`` from it, then to the host ``offsets[1]`` from it (``other`` bytes each)."""
    return _plus(
        _flows(senders, receiver, size),
        _flows(senders, senders + offsets[0], other),
        _flows(senders, senders + offsets[1], other),
    )


def _flows(src: np.ndarray, dst: np.ndarray | int, size: float) -> FlowList:
    n = len(src)
    return FlowList(src, np.broadcast_to(dst, n).astype(np.int64), np.full(n, size), np.zeros(n))


_SPREAD_PAIRS = np.array([8, 9, 24, 25, 40, 41, 56, 57, 72, 73, 88, 89])  # two on each of 6 leaves
_THREE_LEAVES = np.arange(72, 96)
_FOUR_LEAVES = np.arange(32, 64)


# Cases recorded once a flowlet switch's view of the up ports its next switch pauses was final
# (due_kernel.seen_paused), compared only afterwards and never used to choose anything in it:
# how the model does on traffic it was not developed on. No target.
HELD_BACK = (
    RefCase(
        "incast24x2",
        128,
        "incast 24 -> 1 from hosts 72-95 (three leaves) to host 20, 700,000 B each, and each "
        "sender 700,000 B to host + 24",
        lambda: _plus(
            _flows(_THREE_LEAVES, 20, 700_000), _flows(_THREE_LEAVES, _THREE_LEAVES + 24, 700_000)
        ),
    ),
    RefCase(
        "incast12spread",
        128,
        "incast 12 -> 1 from two hosts on each of leaves 1, 3, 5, 7, 9 and 11 to host 127, "
        "1,000,000 B each, and each sender 300,000 B to host + 32 and to host + 64 (mod 128)",
        lambda: _plus(
            _flows(_SPREAD_PAIRS, 127, 1_000_000),
            _flows(_SPREAD_PAIRS, (_SPREAD_PAIRS + 32) % 128, 300_000),
            _flows(_SPREAD_PAIRS, (_SPREAD_PAIRS + 64) % 128, 300_000),
        ),
    ),
    RefCase(
        "incast32half",
        128,
        "incast 32 -> 1 from hosts 32-63 to host 1, 600,000 B each, and the even ones "
        "1,200,000 B to host + 64",
        lambda: _plus(
            _flows(_FOUR_LEAVES, 1, 600_000),
            _flows(_FOUR_LEAVES[::2], _FOUR_LEAVES[::2] + 64, 1_200_000),
        ),
    ),
    RefCase(
        "a2a16inc",
        128,
        "all-to-all among hosts 96-111, 200,000 B a pair, and hosts 96-103 each 1,500,000 B to "
        "host 40",
        lambda: _plus(_a2a_among(96, 16, 200_000), _flows(np.arange(96, 104), 40, 1_500_000)),
    ),
)
