"""One cluster for the collective model: from flags, a scenario, or both; and the sizes,
ratios and ranges the commands that describe one take."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fabricplan.catalog import Catalog, UnknownIdError
from fabricplan.inputs import short_repr
from fabricplan.nccltests.parse import MAX_SIZE_BYTES
from fabricplan.ops import BadInput
from fabricplan.scenario import default_fabric
from fabricplan.scenario.models import MAX_GPUS
from fabricplan.scenario.models import MAX_NICS_PER_NODE as MAX_NICS_PER_NODE
from fabricplan.topology.layout import MAX_OVERSUBSCRIPTION

if TYPE_CHECKING:
    from fabricplan.collectives import CommSystem
    from fabricplan.scenario import Scenario

# Ranges of the cluster flags, as the scenario file takes them: a node has at least one GPU, so
# no job has more nodes than the largest cluster has GPUs; a node has at most 1,024 GPUs and 64
# NICs (scenario.models). Switch hops: a three-tier Clos crosses 5, a dragonfly's Valiant route
# about 7; 16 is beyond any fabric and catches typos.
MAX_NODES = MAX_GPUS
MAX_GPUS_PER_NODE = 1024
MAX_HOPS = 16
# Sizes one table may list: 4,096 rows print in about 3 s (a table of 10,000 took 30); nccl-tests'
# usual sweep (1 B to 16 GiB by doubling) is 35.
MAX_SIZES = 4096
# Largest step between sizes: beyond it a sweep has one or two sizes.
MAX_FACTOR = 1024.0

_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# at most 20 digits before the point: 2**40 has 13
_SIZE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8', '1K', '64M', '16G' (binary units, as nccl-tests reads them) -> bytes, 1 B to 1 TiB."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{short_repr(text)} is not a size; use bytes or K, M, G, T (e.g. 64M)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1 or value != int(value):
        raise ValueError(f"{short_repr(text)} is not a whole number of bytes >= 1")
    if value > MAX_SIZE_BYTES:
        raise ValueError(
            f"{short_repr(text)} is over 1T ({MAX_SIZE_BYTES:,} bytes): more than any GPU holds"
        )
    return int(value)


def size_list(sizes: str | None, lo: str, hi: str, factor: float) -> list[int]:
    """The sizes of ``--sizes``, or of the sweep ``--min``, ``--max``, ``--factor``; at most
    MAX_SIZES of them."""
    if sizes:
        items = [s for s in sizes.split(",") if s.strip()]
        if len(items) > MAX_SIZES:
            raise ValueError(f"--sizes lists {len(items):,} sizes; at most {MAX_SIZES:,}")
        return [parse_size(s) for s in items]
    start, stop = parse_size(lo), parse_size(hi)
    if stop < start:
        raise ValueError(f"--max ({hi}) is below --min ({lo})")
    if not (math.isfinite(factor) and 1 < factor <= MAX_FACTOR):
        raise ValueError(f"--factor must be above 1 and at most {MAX_FACTOR:g}, got {factor:g}")
    count = math.floor(math.log(stop / start) / math.log(factor) + 1e-9) + 1
    if count > MAX_SIZES:
        raise ValueError(
            f"--min {lo} to --max {hi} by --factor {factor:g} makes {count:,} sizes; at most "
            f"{MAX_SIZES:,} (raise --factor)"
        )
    out, s = [], float(start)
    while s <= stop:
        out.append(int(s))
        s *= factor
    return out


def parse_ratios(text: str) -> tuple[float, float]:
    """'2' -> leaf 2, spine 1; '2,1.5' -> leaf 2, spine 1.5; each from 1 (non-blocking) to
    MAX_OVERSUBSCRIPTION."""
    parts = [p.strip() for p in text.split(",")]
    usage = f"--oversubscription {short_repr(text)}: give a number or LEAF,SPINE"
    try:
        values = [float(p) for p in parts if p]
    except ValueError:
        raise ValueError(usage) from None
    if not 1 <= len(values) <= 2:
        raise ValueError(usage)
    for v in values:
        if not (math.isfinite(v) and 1 <= v <= MAX_OVERSUBSCRIPTION):
            raise ValueError(
                f"--oversubscription {short_repr(text)}: each ratio must be from 1 "
                f"(non-blocking) to {MAX_OVERSUBSCRIPTION:g}; below 1 would mean more uplinks "
                "than node ports, which buys nothing"
            )
    return values[0], values[1] if len(values) == 2 else 1.0


@dataclass(frozen=True)
class ClusterFlags:
    """The cluster as the collective commands' flags give it (``--gpu``, ``--nodes``, ...): None
    where a flag is not given, for a scenario or the catalog to fill."""

    gpu: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    nics_per_node: int | None = None
    fabric: str | None = None
    hops: int | None = None
    sharp: bool = False
    switch: str | None = None
    design: str = "rail-optimized"
    oversubscription: float = 1.0


def fill_from_scenario(flags: ClusterFlags, sc: Scenario) -> tuple[ClusterFlags, int]:
    """``flags`` with the scenario's cluster (GPU, GPUs per node, first fabric and that fabric's
    NICs per node) where a flag is not given, and the scenario's node count. The scenario's
    topology design comes along, its switch only with its own fabric (None: the fabric's
    default) unless a switch is given."""
    c = sc.cluster
    fabric = flags.fabric or c.fabrics[0]
    t = c.topology
    filled = replace(
        flags,
        gpu=flags.gpu or c.gpu,
        gpus_per_node=flags.gpus_per_node or c.gpus_per_node,
        nics_per_node=flags.nics_per_node or c.nics_for(fabric),
        fabric=fabric,
        switch=flags.switch or c.switch_for(fabric),
        design=t.design,
        oversubscription=t.oversubscription,
    )
    return filled, c.nodes


def comm_system(flags: ClusterFlags, *, scenario: Scenario | None, catalog: Catalog) -> CommSystem:
    """The cluster the collective model runs on. Flags win over the scenario; the scenario wins
    over catalog defaults."""
    from fabricplan.collectives import build_system

    if scenario is not None:
        filled, scenario_nodes = fill_from_scenario(flags, scenario)
        flags = replace(filled, nodes=flags.nodes or scenario_nodes)
    if flags.nodes is None:
        raise BadInput("give --nodes (or --scenario)")
    f = flags
    try:
        gpu = f.gpu or "h100"
        return build_system(
            gpu,
            f.nodes,
            f.fabric or default_fabric(catalog, gpu, "infiniband"),
            gpus_per_node=f.gpus_per_node,
            nics_per_node=f.nics_per_node,
            hops=f.hops,
            sharp=f.sharp,
            switch=f.switch,
            design=f.design,
            oversubscription=f.oversubscription,
            catalog=catalog,
        )
    except UnknownIdError as exc:
        raise BadInput(str(exc)) from None
