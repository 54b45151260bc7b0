"""``topology``: the fabric designs for a cluster, from flags, a scenario, or both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabricplan.catalog import Catalog, UnknownIdError
from fabricplan.ops import BadInput
from fabricplan.ops.cluster import parse_ratios

if TYPE_CHECKING:
    from fabricplan.scenario import Scenario
    from fabricplan.topology import FabricDesign


def cable_lengths(items: list[str] | None) -> dict[str, float]:
    """``--cable-length TIER=METRES`` items as a mapping; ValueError for a malformed one."""
    out = {}
    for item in items or []:
        tier, sep, value = item.partition("=")
        try:
            metres = float(value)
        except ValueError:
            metres = -1.0
        if not sep or metres <= 0:
            raise ValueError(f"--cable-length '{item}': use TIER=METRES, e.g. node_leaf=3")
        out[tier.strip()] = metres
    return out


def design_fabrics(
    *,
    gpus: int | None,
    gpu: str | None,
    design: str | None,
    fabric: str | None,
    switch: str | None,
    oversubscription: str | None,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    cable_length: list[str] | None,
    compatible_optics: bool | None,
    scenario: Scenario | None,
    catalog: Catalog,
) -> list[FabricDesign]:
    """One design per fabric: the one named, else every fabric the scenario lists, else
    InfiniBand at the GPU's NIC speed. Flags win over the scenario."""
    from fabricplan.scenario import default_fabric
    from fabricplan.topology import TopologyError, design_fabric

    fabrics = [fabric] if fabric else []
    o_leaf, o_spine = None, None
    optics = "policy"
    scenario_switch: dict[str, str | None] = {}  # per fabric: the scenario's, on its own ones
    scenario_nics: dict[str, int] = {}  # per fabric: its NICs per node in the scenario
    if scenario is not None:
        c, optics = scenario.cluster, scenario.costs.optics
        gpus, gpu = gpus or c.gpus, gpu or c.gpu
        gpus_per_node = gpus_per_node or c.gpus_per_node
        design = design or c.topology.design
        o_leaf, o_spine = c.topology.oversubscription, c.topology.spine_oversubscription
        fabrics = fabrics or list(c.fabrics)
        scenario_switch = {f: c.switch_for(f) for f in fabrics}
        scenario_nics = {f: c.nics_for(f) for f in fabrics}
    if gpus is None:
        raise BadInput("give --gpus (or --scenario)")
    try:
        if oversubscription is not None:
            o_leaf, o_spine = parse_ratios(oversubscription)
        lengths = cable_lengths(cable_length)
        gpu = gpu or "h100"
        fabrics = fabrics or [default_fabric(catalog, gpu, "infiniband")]
        return [
            design_fabric(
                gpus,
                design or "rail-optimized",
                f,
                gpu=gpu,
                switch=switch or scenario_switch.get(f),
                oversubscription=1.0 if o_leaf is None else o_leaf,
                spine_oversubscription=1.0 if o_spine is None else o_spine,
                gpus_per_node=gpus_per_node,
                nics_per_node=nics_per_node or scenario_nics.get(f),
                cable_lengths=lengths,
                optics=optics
                if compatible_optics is None
                else ("compatible" if compatible_optics else "oem"),
                catalog=catalog,
            )
            for f in fabrics
        ]
    except (TopologyError, UnknownIdError, ValueError) as exc:
        raise BadInput(str(exc)) from None


def topology_document(designs: list[FabricDesign]) -> dict[str, Any]:
    """What ``topology --json`` prints: one design, or ``{"designs": [...]}`` for several."""
    if len(designs) == 1:
        return designs[0].to_dict()
    return {"designs": [d.to_dict() for d in designs]}
