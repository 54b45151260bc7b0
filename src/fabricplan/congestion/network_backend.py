"""Network backends: what the workload layer asks of the congestion layer, behind one interface
(in the style of ASTRA-sim's network front-ends, where an analytical model and a simulator
answer the same calls).

The workload layer hands a backend down its calls and asks it one question per group of ranks
that crosses the network: by what factor (>= 1) does the fabric stretch the transfer of this
traffic pattern over this many whole nodes? (:meth:`NetworkBackend.factor`.) The backends:

- ``none``: an ideal fabric; every factor is 1.
- ``closed-form``: the balls-into-bins law of ECMP collisions (:mod:`.closed_form`). It covers
  ring and tree traffic on Clos fabrics with hashed routing and contiguous placement; for
  anything else it raises :class:`NotCovered` rather than answer 1.
- ``flow``: the flow-level simulator (:mod:`.simulate`): any pattern, routing, placement and
  flow control.

Backends and :class:`NetworkSpec` are frozen and hashable, so that with the pattern and node
count they are the key of the one cache of answers (:func:`network_factor`). This module
imports neither scipy nor the simulator; a backend imports what it needs when first asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Protocol

from fabricplan.catalog import Catalog, default_catalog
from fabricplan.congestion.settings import FlowSettings

# Seeds of the simulation per (network, pattern, nodes) to start with: enough where they all
# agree (rails); more are added while collisions make them disagree (SimulatedCongestion).
CONGESTION_SEEDS = 5
# Message size of that simulation: 256 MiB, a gradient bucket's order of magnitude, large enough
# that the slowdown is the bandwidth regime's (it is applied to the bandwidth term).
CONGESTION_PROBE_BYTES = float(1 << 28)
# Answers kept by :func:`network_factor`. A simulated answer costs tens of ms; advise with
# break-even asks a few hundred distinct ones.
FACTOR_CACHE_ENTRIES = 512

# The traffic patterns the closed-form law describes: a few large channels per NIC, each hashed
# onto the equal-cost uplinks of its leaf.
CLOSED_FORM_PATTERNS = ("ring-allreduce", "tree-allreduce")
# Routings that place a flow by a hash: static InfiniBand tables spread like a hash at scale
# (the simulator treats them so too).
HASHED_ROUTINGS = ("ecmp", "static")


@dataclass(frozen=True)
class NetworkSpec:
    """Everything a backend reads about the cluster's network.

    Not the cluster's size: a backend sizes the fabric to the group's nodes, so evaluating the
    same cluster at other sizes (break-even) reuses the answers of groups whose span did not
    change. The GPU by id only, so GPUs that differ only in compute (the validation's
    matmul-ceiling variants) share answers."""

    gpu: str
    fabric: str
    gpus_per_node: int
    nics_per_node: int
    design: str = "rail-optimized"
    oversubscription: float = 1.0
    spine_oversubscription: float = 1.0
    switch: str | None = None  # None: the fabric's default switch
    roce_quality: str = "tuned"
    placement: str = "contiguous"
    routing: str | None = None  # None: the fabric's default routing (catalog)
    flow: FlowSettings = field(default_factory=FlowSettings)  # over the RoCE quality preset
    # None: the packaged catalog. A Catalog equals only itself, so answers are kept per catalog.
    catalog: Catalog | None = None

    def fabric_fields(self) -> dict[str, object]:
        """The fields that size the fabric (GPU, fabric, design, oversubscriptions, switch),
        by the names the closed form and the simulator's case both take."""
        return {
            "gpu": self.gpu,
            "fabric": self.fabric,
            "design": self.design,
            "oversubscription": self.oversubscription,
            "spine_oversubscription": self.spine_oversubscription,
            "switch": self.switch,
        }


class BackendError(ValueError):
    """A backend cannot answer for this network and traffic; ``reason`` says why."""

    def __init__(self, backend: str, reason: str) -> None:
        self.backend, self.reason = backend, reason
        super().__init__(f"{backend}: {reason}")


class NotCovered(BackendError):
    """The backend's model does not describe this network or pattern; ``instead`` names a
    backend that does."""

    def __init__(self, backend: str, reason: str, instead: str) -> None:
        self.instead = instead
        super().__init__(backend, reason)


class TooLarge(BackendError):
    """The case is in the backend's scope but too large to compute; fewer nodes would do."""


class NetworkBackend(Protocol):
    name: str
    # whether the RoCE quality and flow-control settings can change the answer
    models_flow_control: bool

    def factor(self, net: NetworkSpec, pattern: str, nodes: int) -> float:
        """Expected network slowdown (>= 1) of ``pattern`` ("ring-allreduce", "tree-allreduce",
        "alltoall", "pipeline") over ``nodes`` whole nodes of ``net``."""
        ...


@dataclass(frozen=True)
class NoCongestionBackend:
    """An ideal fabric: every flow gets its share of the links."""

    name: ClassVar[str] = "none"
    models_flow_control: ClassVar[bool] = False

    def factor(self, net: NetworkSpec, pattern: str, nodes: int) -> float:
        return 1.0


@dataclass(frozen=True)
class ClosedFormBackend:
    """Expected ECMP collision slowdown in closed form (``congestion.backends.ClosedFormECMP``).

    The law counts the fullest leaf uplink group: exact on 2-tier Clos fabrics, a lower bound
    with a core tier. It does not see flow control, which ring and tree channels (self-clocked,
    no standing queues) do not meet without other traffic."""

    name: ClassVar[str] = "closed-form"
    models_flow_control: ClassVar[bool] = False

    def _not_covered(self, net: NetworkSpec, pattern: str) -> str | None:
        """Why the law does not describe this case, or None when it does."""
        if pattern not in CLOSED_FORM_PATTERNS:
            return (
                f"its law covers ring and tree traffic (a few large channels per NIC), "
                f"not {pattern}"
            )
        if net.design == "dragonfly":
            return "its law covers Clos designs, not dragonfly"
        if net.placement != "contiguous":
            return f"its law covers contiguous placement, not {net.placement}"
        cat = net.catalog or default_catalog()
        routing = net.routing or cat.fabric(net.fabric).default_routing
        if routing not in HASHED_ROUTINGS:
            return f"its law covers hashed (ECMP) routing, not {net.fabric}'s {routing} routing"
        return None

    def factor(self, net: NetworkSpec, pattern: str, nodes: int) -> float:
        if nodes < 2:
            return 1.0
        why = self._not_covered(net, pattern)
        if why is not None:
            raise NotCovered(self.name, why, instead=FlowBackend.name)
        # scipy and the topology graph: loaded only when a group crosses the network
        from fabricplan.congestion.backends import ClosedFormECMP

        law = ClosedFormECMP(**net.fabric_fields(), catalog=net.catalog)
        return law.factor(nodes, net.gpus_per_node, net.nics_per_node, pattern)


@dataclass(frozen=True)
class FlowBackend:
    """Mean network slowdown from the flow-level simulator over ``seeds`` hash seeds or more,
    without start jitter, for a ``probe_bytes`` collective."""

    name: ClassVar[str] = "flow"
    models_flow_control: ClassVar[bool] = True
    seeds: int = CONGESTION_SEEDS
    probe_bytes: float = CONGESTION_PROBE_BYTES

    def factor(self, net: NetworkSpec, pattern: str, nodes: int) -> float:
        if nodes < 2:
            return 1.0
        # the simulator: loaded only when a group crosses the network
        from fabricplan.congestion.backends import SimulatedCongestion
        from fabricplan.congestion.case import Case, CaseError

        case = Case(
            **net.fabric_fields(),
            routing=net.routing,
            roce_quality=net.roce_quality,
            placement=net.placement,
            flow=net.flow,
            seeds=self.seeds,
            jitter_us=0.0,
            size_bytes=self.probe_bytes,
        )
        sim = SimulatedCongestion(case=case, catalog=net.catalog)
        try:
            return sim.factor(nodes, net.gpus_per_node, net.nics_per_node, pattern)
        except CaseError as exc:
            # a hint is what to simulate instead: a smaller group (the memory budget's refusals)
            cls = TooLarge if exc.hint else BackendError
            raise cls(self.name, exc.reason) from None


BACKENDS: dict[str, type[NoCongestionBackend | ClosedFormBackend | FlowBackend]] = {
    b.name: b for b in (NoCongestionBackend, ClosedFormBackend, FlowBackend)
}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
# What the workload layer uses unless told otherwise, and the ideal fabric.
DEFAULT_BACKEND: NetworkBackend = FlowBackend()
NO_CONGESTION: NetworkBackend = NoCongestionBackend()


def backend(name: str) -> NetworkBackend:
    """The backend called ``name`` (one of :data:`BACKEND_NAMES`), with its default settings."""
    if name not in BACKENDS:
        raise ValueError(f"unknown congestion backend {name!r}; known: {', '.join(BACKEND_NAMES)}")
    return BACKENDS[name]()


@lru_cache(maxsize=FACTOR_CACHE_ENTRIES)
def network_factor(backend: NetworkBackend, net: NetworkSpec, pattern: str, nodes: int) -> float:
    """``backend.factor(net, pattern, nodes)``, cached on exactly those four: equal backends
    (the same kind and settings) share answers, different ones do not."""
    return backend.factor(net, pattern, nodes)
