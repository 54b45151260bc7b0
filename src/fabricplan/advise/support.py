"""What the assumed support-contract rates do to the answer.

No vendor publishes its AI-fabric support rates, so the rates per fabric family are labelled
assumptions (``costs.toml`` [support]). The largest of them, InfiniBand's, can decide an
otherwise even comparison: the advice says what the difference in rate costs over the
lifecycle and which fabric would be the cheaper at equal rates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from fabricplan.advise.scoring import Parts
from fabricplan.cost import FabricCost, load_assumptions, usd


@dataclass(frozen=True)
class SupportEffect:
    rates: dict[str, float]  # share of network capex a year, per fabric
    dearer: str  # the fabric of the two leaders with the higher rate
    extra_usd: float  # what its higher rate costs it over the lifecycle
    years: float
    equal_rate: float  # the lower of the two leaders' rates, applied to every fabric
    cheapest_at_equal: str
    margin_at_equal: float  # runner-up over cheapest at equal rates, share

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "assumption": True}

    def reason(self, best: str, other: str) -> str:
        rb, ro = self.rates[best], self.rates[other]
        same = "still " if self.cheapest_at_equal == best else ""
        return (
            f"support at {rb:.0%} ({best}) vs {ro:.0%} ({other}) of network capex a year "
            f"(assumption; no vendor publishes these rates, the public range for network "
            f"equipment is 2-20 %) costs {self.dearer} {usd(self.extra_usd)} more over the "
            f"{self.years:g}-year lifecycle; at equal rates ({self.equal_rate:.0%}) "
            f"{self.cheapest_at_equal} would {same}be the cheaper, by {self.margin_at_equal:.1%}"
        )


def support_effect(
    parts: Parts, costs: list[FabricCost], best: int, other: int
) -> SupportEffect | None:
    """None for a rental (no contract of its own) or when the two leaders' rates are equal."""
    if parts.kind != "own" or best == other:
        return None
    a = load_assumptions()
    names = [c.fabric for c in costs]
    rates = np.array([a.support_share(c.family) for c in costs])
    if rates[best] == rates[other]:
        return None
    equal = float(min(rates[best], rates[other]))
    dear = best if rates[best] > rates[other] else other
    extra = parts.years * (rates[dear] - equal) * parts.network[dear]
    even = replace(parts, support=parts.network * equal)
    s = even.nominal()
    order = np.argsort(s)
    first = int(order[0])
    second = int(order[1])
    return SupportEffect(
        rates={n: float(r) for n, r in zip(names, rates, strict=True)},
        dearer=names[dear],
        extra_usd=float(extra),
        years=parts.years,
        equal_rate=equal,
        cheapest_at_equal=names[first],
        margin_at_equal=float(s[second] / s[first] - 1),
    )
