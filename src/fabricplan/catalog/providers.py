"""GPU cloud providers' scale-out networking as seed 002 tabulates it, and what to ask them.

The data is one article's comparison table (``data/providers/providers.toml``), unverified.
:data:`QUESTIONS` are the six fabric questions of seed 001; :func:`scorecard` says which of them
that table already answers for a provider and which are left to ask.

>>> from fabricplan.catalog.providers import filter_providers, load_providers
>>> [p.id for p in filter_providers(load_providers(), "roce", None)]
['hot-aisle', 'nscale', 'tensorwave']
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fabricplan.catalog.loader import Catalog, CatalogError

ProviderFabric = Literal["ib", "roce", "ethernet", "varies"]
# The seed's "InfiniBand" column, lowercased.
IbAvailability = Literal["yes", "clusters only", "supercloud only", "k8s only", "roce only", "no"]
Status = Literal["known", "partial", "ask"]

# Not in data/ itself: the catalog loader reads every data/*.toml as catalog kinds.
PROVIDERS_FILE = ("data", "providers", "providers.toml")
FILTER_FABRICS = ("ib", "roce")
NO_IB = ("no", "roce only")
# Seed 002 warns IB "doesn't help if you can only get 8 GPUs at a time": one node's worth.
SINGLE_NODE_GPUS = 8
# Availability wording by which the seed shows multi-node offerings.
MULTI_NODE_WORDS = ("cluster", "all nodes", "all gpu nodes", "dedicated")
# The seed itself equates Quantum-2 with NDR; either names the IB generation.
GENERATION_WORDS = ("quantum-2", "ndr")
FABRIC_LABEL = {
    "ib": "InfiniBand",
    "roce": "RoCE",
    "ethernet": "Ethernet, no InfiniBand",
    "varies": "varies, no InfiniBand",
}

# Seed 001, "What to Ask GPU Infrastructure Providers Before You Commit to a Fabric".
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("topology", "Which topology (fat-tree, dragonfly, ...) and what oversubscription per tier?"),
    ("generation", "Which interconnect generation (IB NDR/HDR or RoCEv2) and at what line rate?"),
    ("validated", "Has the fabric been validated for multi-node distributed training?"),
    ("nccl_benchmarks", "What NCCL all-reduce results can you share at our cluster sizes?"),
    ("roce_tuning", "Who configures RoCEv2 and keeps it tuned, and how?"),
    ("issue_resolution", "How, and how fast, are fabric performance issues resolved?"),
)


class NodeType(BaseModel):
    """One rentable node: its GPUs, the scale-out NICs that carry GPU traffic, and the catalog
    fabric they run, as the provider documents them (None: not documented)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    gpu: str  # catalog GPU id
    gpus: int = Field(gt=0)
    fabric: str  # catalog fabric id
    nics: int = Field(gt=0, description="scale-out NIC ports per node carrying GPU traffic")
    nic_gbps: float = Field(gt=0)
    topology: str | None = None
    source: str
    as_of: str

    @property
    def gbps_per_gpu(self) -> float:
        return self.nics * self.nic_gbps / self.gpus


class Provider(BaseModel):
    """One row of seed 002's table, or a hyperscaler with its documented node types; None
    means the source gives no value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    fabric: ProviderFabric
    ib_availability: IbAvailability
    gbps_per_gpu_low: float | None = Field(default=None, gt=0)
    gbps_per_gpu_high: float | None = Field(default=None, gt=0)
    speed_text: str
    availability: str
    topology: str | None = None
    topology_documented: bool
    ib_price_note: str | None = None
    source: str
    as_of: str
    nodes: tuple[NodeType, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Provider:
        low, high = self.gbps_per_gpu_low, self.gbps_per_gpu_high
        if (low is None) != (high is None):
            raise ValueError("give both gbps_per_gpu_low and gbps_per_gpu_high, or neither")
        if low is not None and high is not None and low > high:
            raise ValueError(f"gbps_per_gpu_low ({low}) exceeds gbps_per_gpu_high ({high})")
        # "Not documented" is recorded as no topology; the flag must say the same.
        if self.topology_documented != (self.topology is not None):
            raise ValueError("topology_documented must be true exactly when topology is given")
        if (self.fabric == "ib") == (self.ib_availability in NO_IB):
            raise ValueError(f"fabric '{self.fabric}' contradicts '{self.ib_availability}'")
        return self

    @property
    def multi_node(self) -> bool:
        """The seed's availability cell mentions clusters or all nodes."""
        return any(w in self.availability.lower() for w in MULTI_NODE_WORDS)

    @property
    def gbps_text(self) -> str:
        """'400', '200-400', or '-' when the seed gives no number."""
        low, high = self.gbps_per_gpu_low, self.gbps_per_gpu_high
        if low is None or high is None:
            return "-"
        return f"{low:g}" if low == high else f"{low:g}-{high:g}"


@cache
def _load() -> tuple[Provider, ...]:
    res = resources.files("fabricplan.catalog").joinpath(*PROVIDERS_FILE)
    try:
        raw = tomllib.loads(res.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"{res}: {exc}") from None
    out = []
    for i, item in enumerate(raw.get("provider", [])):
        try:
            out.append(Provider.model_validate(item))
        except ValidationError as exc:
            label = item.get("id", f"#{i + 1}") if isinstance(item, dict) else f"#{i + 1}"
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(entry)'}: {e['msg']}" for e in exc.errors()
            )
            raise CatalogError(f"{res}: provider '{label}': {problems}") from None
    ids = [p.id for p in out]
    if dup := sorted({i for i in ids if ids.count(i) > 1}):
        raise CatalogError(f"{res}: provider ids defined twice: {', '.join(dup)}")
    return tuple(out)


def find_node(ps: Iterable[Provider], node_id: str) -> tuple[Provider, NodeType]:
    """The provider and node type called ``node_id``; ValueError naming the known ones."""
    pairs = [(p, n) for p in ps for n in p.nodes]
    for p, n in pairs:
        if n.id == node_id.strip().lower():
            return p, n
    known = ", ".join(n.id for _, n in pairs)
    raise ValueError(f"unknown node type '{node_id}'; known: {known}")


def rented_nodes(gpu: str, fabric: str) -> list[NodeType]:
    """The documented node types that rent ``gpu`` on ``fabric`` (every provider), by id."""
    found = {n.id: n for p in _load() for n in p.nodes if n.gpu == gpu and n.fabric == fabric}
    return [found[k] for k in sorted(found)]


def node_nics(cat: Catalog, gpu: str, fabric: str) -> int:
    """NICs per node a cluster of ``gpu`` has on ``fabric`` when nothing says otherwise: for a
    fabric only rented (catalog ``rented_only``), the count of the node types that rent it with
    that GPU where they agree (GPUDirect-TCPX on A3 High: 4 x 200G; EFA on p5: 32 x 100G), since
    it comes on no other node; else the GPU's reference node's."""
    if cat.fabric(fabric).rented_only:
        counts = {n.nics for n in rented_nodes(gpu, fabric)}
        if len(counts) == 1:
            return counts.pop()
    return cat.gpu(gpu).node.nics_per_node


def nics_mismatch(gpu: str, fabric: str, nics: int) -> str | None:
    """Where ``fabric`` comes with ``gpu`` only on node types with another NIC count than
    ``nics``, those nodes in words ('a3-highgpu-8g (4 NICs)'); None where one matches, or none
    is documented. Meaningful for fabrics that are rented only (catalog ``rented_only``): any
    NIC count of a fabric that is also built is real."""
    nodes = rented_nodes(gpu, fabric)
    if not nodes or any(n.nics == nics for n in nodes):
        return None
    return ", ".join(f"{n.id} ({n.nics} NICs)" for n in nodes)


def load_providers() -> list[Provider]:
    """The packaged providers in file order (parsed once per process; a fresh list each call)."""
    return list(_load())


def filter_providers(
    ps: Iterable[Provider], fabric: str | None = None, min_gpus: int | None = None
) -> list[Provider]:
    """Providers offering ``fabric`` ('ib': any IB tier; 'roce') and ``min_gpus`` GPUs.

    The seed gives no cluster sizes. Its only signal is the availability cell: when
    ``min_gpus`` exceeds one node (8 GPUs) a provider passes only if that cell shows multi-node
    clusters (clusters, all nodes, instant or dedicated clusters). Up to 8 GPUs all pass.
    """
    if fabric is not None and fabric not in FILTER_FABRICS:
        raise ValueError(f"fabric '{fabric}' is not one of {', '.join(FILTER_FABRICS)}")
    need_cluster = min_gpus is not None and min_gpus > SINGLE_NODE_GPUS
    return [
        p
        for p in ps
        if (fabric != "ib" or p.ib_availability not in NO_IB)
        and (fabric != "roce" or p.fabric == "roce")
        and (not need_cluster or p.multi_node)
    ]


def _topology(p: Provider) -> tuple[str | None, Status]:
    if p.topology is None:
        return None, "ask"
    text = p.topology.lower()
    if "varies" in text:
        return p.topology, "ask"  # stated, but says nothing about any one host
    # Only "non-blocking" also answers the oversubscription half of the question (1:1).
    return p.topology, "known" if "non-blocking" in text else "partial"


def _generation(p: Provider) -> tuple[str | None, Status]:
    answer = f"{FABRIC_LABEL[p.fabric]}, {p.speed_text}"
    if p.gbps_per_gpu_low is None:
        return answer, "ask"  # neither generation nor rate is given
    named = p.fabric == "ib" and any(w in p.speed_text.lower() for w in GENERATION_WORDS)
    return answer, "known" if named else "partial"  # a rate alone leaves the generation open


def scorecard(p: Provider) -> dict[str, dict[str, str | None]]:
    """Per question of :data:`QUESTIONS`, what seed 002 answers: known, partial, or ask."""
    # The seed says nothing on validation, NCCL results, RoCE tuning or issue resolution.
    card: dict[str, dict[str, str | None]] = {
        key: {"answer": None, "status": "ask"} for key, _ in QUESTIONS
    }
    for key, fn in (("topology", _topology), ("generation", _generation)):
        answer, status = fn(p)
        card[key] = {"answer": answer, "status": status}
    return card
