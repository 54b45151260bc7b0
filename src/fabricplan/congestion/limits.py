"""What the congestion layer leaves out, said per case: every command that uses it prints this
as "not modelled", so that a mechanism it lacks is never read as a mechanism with no effect."""

from __future__ import annotations

COMMON = (
    "buffer shared between a switch's ports (each port's thresholds are fixed)",
    "congestion spreading through the switches beyond the congested port's own feeders (one "
    "level of pauses between switches; a sender's own NIC is held once the flows it sends have "
    "stranded their part of the thresholds on their paths): flows that share only switches "
    "with a heavy incast end up to 62 % early beside it, and the median flow beside two "
    "incasts 19 %, where a packet-level simulator's pauses spread through the spines "
    "(validate --suite packet-level; errs fast)",
    "an all-to-all's tail beside a hot receiver: 26-37 % early at p99 against a packet-level "
    "simulator (validate --suite packet-level; errs fast), not located",
)
BY_FAMILY = {
    "roce": (
        "DCQCN hyper-increase and NIC rate floors (recovery after deep cuts errs slow)",
        "selective retransmission (lossy RoCE recovers by go-back-N)",
        "PFC storms and deadlocks from misbehaving NICs",
        "packet reordering costs of per-packet routing at RoCE NICs",
        "PFC pauses from packet-level queue swings at ports loaded to capacity, as an "
        "all-to-all's receivers are: a packet-level simulator puts its median flow 4-12 % past "
        "the NIC-bound time (64 and 128 hosts; 2 % for a transport without PFC) where this "
        "fluid model has no queue below capacity (errs fast)",
    ),
    "infiniband": ("InfiniBand congestion control (FECN/BECN): hot spots back-pressure fully",),
    "ethernet": ("TCP's own congestion control dynamics (links are shared max-min fairly)",),
}
FLOWLET = (
    "the queues a flowlet switch compares its ports by swinging packet by packet: here a port "
    "its next switch pauses holds the PFC band (so does an up port whose next switch's port on "
    "is paused, where two ingress ports or more feed it) and any other none, so flows leave "
    "paused or overloaded ports only, not ports loaded just to capacity, and an all-to-all's "
    "slowest flows end up to 15 % sooner than a packet-level simulator's; nor what go-back-N "
    "sends again of a moved flow's packets still queued on its old path (a packet-level "
    "simulator resends 350-1,000 KB a move, this model 60-240 KB), which makes the tails "
    "beside an incast 11-49 % longer there, and an all-to-all's tail beside a hot receiver "
    "up to 45 % (validate --suite packet-level; errs fast)",
)
SPRAY = (
    "sprayers that cycle through a fixed set of path labels (their split over ports is itself "
    "uneven, a bias that grows with the transfer) and queues where sprayed traffic from "
    "several switches meets again downstream: per-packet queues are drawn at the ports where "
    "flows split only (errs fast)",
)
DRAGONFLY = (
    "dragonfly routing decided per packet from live queues: Valiant and UGAL "
    "(--dragonfly-routing) route flows once, UGAL in its fluid form, and the default is minimal",
)


def not_modelled(family: str, design: str, routing: str | None = None) -> list[str]:
    """The mechanisms of this fabric family, design and routing the simulation does not
    include."""
    sprayed = routing in ("spray", "packet-spray")
    out = list(FLOWLET) if routing == "flowlet" else list(SPRAY) if sprayed else []
    out += list(BY_FAMILY.get(family, BY_FAMILY["ethernet"])) + list(COMMON)
    if design == "dragonfly":
        out += DRAGONFLY
    return out


def not_modelled_by(
    backend: str, family: str, design: str, routing: str | None = None
) -> list[str]:
    """The same, for the workload layer's network backend (``none``, ``closed-form``,
    ``flow``)."""
    if backend == "none":
        return ["congestion of any kind (--congestion none prices an ideal fabric)"]
    if backend == "closed-form":
        return [
            "flow control (PFC, DCQCN, credits) and every routing but per-flow hashing: the "
            "closed form counts ECMP collisions only"
        ]
    return not_modelled(family, design, routing)
