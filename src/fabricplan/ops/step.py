"""``step``'s figures per fabric, as its ``--json`` prints them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fabricplan.ops import BadInput

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.scenario import Scenario
    from fabricplan.workload import FabricResult


def step_fabrics(sc: Scenario, cat: Catalog, fabric: list[str] | None) -> list[str]:
    """The fabrics to evaluate: those asked for (each a catalog id), else the scenario's."""
    if fabric:
        unknown = [f for f in fabric if f not in cat.ids("fabric")]
        if unknown:
            raise BadInput(
                f"--fabric: unknown id {', '.join(unknown)}; known: {', '.join(cat.ids('fabric'))}"
            )
    return list(fabric or sc.cluster.fabrics)


def step_records(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str],
    backend: NetworkBackend,
    tick: Callable[[str], None] | None = None,
) -> list[FabricResult]:
    """Each fabric's step, as the workload model's records. Raises WorkloadError for a design
    the fabric cannot build."""
    from fabricplan.workload import evaluate_scenario

    return evaluate_scenario(sc, cat, fabrics, backend=backend, tick=tick)


def step_results(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str],
    backend: NetworkBackend,
    tick: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Each fabric's step: what ``step --json`` prints. Raises WorkloadError for a design the
    fabric cannot build."""
    found = step_records(sc, cat, fabrics, backend, tick)
    return [step_document(r, sc, cat, backend) for r in found]


def step_document(
    r: FabricResult, sc: Scenario, cat: Catalog, backend: NetworkBackend
) -> dict[str, Any]:
    """One fabric's entry of ``step --json``: the model's figures, the backend that priced
    them and what it leaves out."""
    return {
        "fabric": r.fabric,
        "congestion_backend": backend.name,
        **r.to_dict(),
        "not_modelled": not_modelled(cat, backend.name, r.fabric, sc),
    }


def not_modelled(cat: Catalog, backend: str, fabric: str, sc: Scenario) -> list[str]:
    """What the backend leaves out for this fabric, design and routing."""
    from fabricplan.congestion.limits import not_modelled_by

    f = cat.fabric(fabric)
    routing = sc.cluster.routing or f.default_routing
    return not_modelled_by(backend, f.family, sc.cluster.topology.design, routing)
