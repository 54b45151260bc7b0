"""``plan``'s answer per fabric, as its ``--json`` prints it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.planning.scenario import FabricSearch
    from fabricplan.scenario import Scenario


def plan_searches(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str],
    backend: NetworkBackend,
    top: int,
    tick: Callable[[str], None] | None = None,
) -> list[FabricSearch]:
    """Each fabric's fastest fitting plan, its runners-up and why each loses, the faster plans
    that do not fit, and the scenario's own plan. Raises WorkloadError for a scenario without
    training or a network the backend cannot price."""
    from fabricplan.planning import search_scenario

    return search_scenario(sc, cat, fabrics, backend=backend, top=top, tick=tick)


def plan_document(found: FabricSearch, backend: NetworkBackend) -> dict[str, Any]:
    """One fabric's entry of ``plan --json``."""
    return {**found.to_dict(), "congestion_backend": backend.name}
