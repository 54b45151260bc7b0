"""The GPU-hour price of a rented fabric tier: the scenario's price and the tier's premium.

Providers that sell InfiniBand capacity price it as a tier; the premium per fabric family and
its basis are labelled assumptions (``costs.toml`` [rent]). The record carries both, so that
every price difference between fabrics can be stated with where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricplan.cost.assumptions import CostAssumptions

# How a fabric family's tier is named in a sentence.
FAMILY_NAMES = {
    "infiniband": "InfiniBand",
    "roce": "RoCE",
    "tcp": "TCP-only",
    "uec": "UEC",
    "srd": "EFA",
}


@dataclass(frozen=True)
class RentTier:
    family: str
    scenario_price_usd: float  # $/GPU-hour: the scenario's ``costs.gpu_hour_price``
    premium_share: float  # added to it for this tier (negative: taken off)
    basis: str  # where the premium comes from (costs.toml [rent] basis)

    @property
    def price_usd(self) -> float:
        """$/GPU-hour on this tier."""
        return self.scenario_price_usd * (1.0 + self.premium_share)

    def describe(self) -> str:
        """The tier's price against the scenario's, as a clause: 'InfiniBand tier priced 10 %
        over the scenario's $3/GPU-hour'."""
        name = FAMILY_NAMES.get(self.family, self.family)
        if self.premium_share == 0:
            return f"{name} tier priced at the scenario's ${self.scenario_price_usd:g}/GPU-hour"
        side = "over" if self.premium_share > 0 else "under"
        return (
            f"{name} tier priced {abs(self.premium_share) * 100:g} % {side} the scenario's "
            f"${self.scenario_price_usd:g}/GPU-hour (${self.price_usd:.2f})"
        )


def rent_tier(a: CostAssumptions, family: str, scenario_price_usd: float) -> RentTier:
    return RentTier(family, scenario_price_usd, a.rent_premium_share(family), a.rent_basis)
