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


_SIXTEEN_FAR = np.arange(16, 32)
_TWO_DOZEN = np.arange(32, 56)
_ONE_LEAF = np.arange(40, 48)


# Cases recorded once the shared fill of the port pairs was final, compared only afterwards and
# never used to choose anything in it: how the model does on traffic it was not developed on.
# No target.
HELD_BACK = (
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
