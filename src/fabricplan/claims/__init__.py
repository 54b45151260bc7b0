"""The seeds' quantitative claims, each recomputed under the conditions it assumes and under
the ones it leaves open (``fabricplan claims``).

>>> from fabricplan.claims import check_claims
>>> [c.id for c in check_claims(groups=("money",))][0]
'run-cost-1024-gpus-30-days'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fabricplan.catalog import Catalog, default_catalog
from fabricplan.claims.result import POINT_TOLERANCE, Case, ClaimResult
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend

GROUPS = ("latency", "scale", "money", "hardware", "serving", "outside")


def check_claims(
    catalog: Catalog | None = None,
    groups: Iterable[str] = GROUPS,
    progress: Callable[[str], None] | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> list[ClaimResult]:
    """Every claim of the chosen ``groups``, in the order of ``GROUPS``, the network's
    congestion priced by ``backend``; ``progress`` is called with each group's name once it is
    done."""
    # imported here: the scale and money groups pull in the workload and congestion layers
    from fabricplan.claims.facts import fact_claims, outside_claims, serving_claims
    from fabricplan.claims.latency import latency_claims
    from fabricplan.claims.money import money_claims
    from fabricplan.claims.scale import scale_claims

    cat = catalog or default_catalog()
    run: dict[str, Callable[[], list[ClaimResult]]] = {
        "latency": lambda: latency_claims(cat),
        "scale": lambda: scale_claims(cat, backend=backend),
        "money": lambda: money_claims(cat, backend),
        "hardware": lambda: fact_claims(cat),
        "serving": lambda: serving_claims(cat, backend),
        "outside": outside_claims,
    }
    wanted = set(groups)
    unknown = wanted - set(GROUPS)
    if unknown:
        raise ValueError(
            f"unknown claim group(s) {', '.join(sorted(unknown))}; known: {', '.join(GROUPS)}"
        )
    out: list[ClaimResult] = []
    for g in GROUPS:
        if g in wanted:
            out.extend(run[g]())
            if progress:
                progress(g)
    return out


__all__ = ["GROUPS", "POINT_TOLERANCE", "Case", "ClaimResult", "check_claims"]
