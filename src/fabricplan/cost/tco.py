"""Lifecycle cost of one fabric for a scenario's cluster, and what one run costs on it.

Owned: capex (the topology's bill of materials plus GPU servers), yearly power (with PUE), staff
and support, the GPU time lost while the fabric is stabilised, and the expected run-loss events
over the lifecycle. Rented: GPU-hours at the provider's price for that fabric tier, plus the
same run-loss risk; a rental has no lifecycle, so its TCO and yearly opex are None and what it
costs is the run (training) or the hour of serving. Each part is kept separately so that
sensitivity and Monte Carlo can scale it without recomputing the layers below.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.cost.assumptions import CostAssumptions
from fabricplan.cost.rent import RentTier, rent_tier
from fabricplan.cost.run import DAYS_PER_YEAR, HOURS_PER_WEEK, HOURS_PER_YEAR, SECONDS_PER_HOUR
from fabricplan.scenario import Scenario
from fabricplan.topology.bom import FabricDesign, design_fabric
from fabricplan.topology.cabling import Optics
from fabricplan.topology.layout import TopologyError
from fabricplan.workload.interruptions import hours_per_interruption

TOKENS_PER_MILLION = 1e6


class CostError(ValueError):
    """A cost that cannot be computed (e.g. the fabric cannot be built at this size)."""


@dataclass(frozen=True)
class FabricCost:
    fabric: str
    family: str
    mode: str
    gpus: int
    lifecycle_years: float | None  # None when rented: a rental has no lifecycle
    capex_network_usd: float
    capex_servers_usd: float
    power_kw: float  # IT load: GPU nodes and the fabric
    power_usd_per_year: float
    staff_fte: float
    staff_usd_per_year: float
    support_usd_per_year: float
    gpu_hour_cost_usd: float  # owning (or renting) one GPU for an hour, before risk
    stabilisation_weeks: float
    stabilisation_usd: float
    risk_events_per_year: float
    risk_hours_per_event: float  # of the whole job: lost work since the checkpoint + restart
    risk_usd_per_year: float
    run_gpu_hours: float | None  # the scenario's run on this fabric (training)
    run_days: float | None
    rent: RentTier | None = None  # the tier's price and its basis (rented)
    output_tokens_per_s: float | None = None  # the whole cluster's (serving)
    # the network bill's optics, price range and parts without a public price (FabricDesign)
    network_prices: dict[str, Any] | None = None

    @property
    def capex_usd(self) -> float:
        return self.capex_network_usd + self.capex_servers_usd if self.mode == "own" else 0.0

    @property
    def opex_usd_per_year(self) -> float | None:
        """Owned only: power, staff and support a year."""
        if self.lifecycle_years is None:
            return None
        return self.power_usd_per_year + self.staff_usd_per_year + self.support_usd_per_year

    @property
    def tco_usd(self) -> float | None:
        """Owned only: capex, opex and risk over the lifecycle, and stabilisation."""
        years, opex = self.lifecycle_years, self.opex_usd_per_year
        if years is None or opex is None:
            return None
        return self.capex_usd + years * (opex + self.risk_usd_per_year) + self.stabilisation_usd

    @property
    def risk_usd_per_hour(self) -> float:
        return self.risk_usd_per_year / HOURS_PER_YEAR

    @property
    def cluster_usd_per_hour(self) -> float:
        """Every GPU for an hour (rented: at the tier price), and the run-loss risk's share."""
        return self.gpus * self.gpu_hour_cost_usd + self.risk_usd_per_hour

    @property
    def cost_per_million_output_tokens_usd(self) -> float | None:
        """Serving: an hour of the cluster over the output tokens it makes in that hour."""
        if not self.output_tokens_per_s:
            return None
        per_hour = self.output_tokens_per_s * SECONDS_PER_HOUR
        return self.cluster_usd_per_hour / per_hour * TOKENS_PER_MILLION

    @property
    def risk_per_run_usd(self) -> float | None:
        if self.run_days is None:
            return None
        return self.risk_usd_per_year * self.run_days / DAYS_PER_YEAR

    @property
    def cost_per_run_usd(self) -> float | None:
        if self.run_gpu_hours is None or self.risk_per_run_usd is None:
            return None
        return self.run_gpu_hours * self.gpu_hour_cost_usd + self.risk_per_run_usd

    def to_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "capex_usd": self.capex_usd,
            "opex_usd_per_year": self.opex_usd_per_year,
            "tco_usd": self.tco_usd,
            "risk_per_run_usd": self.risk_per_run_usd,
            "cost_per_run_usd": self.cost_per_run_usd,
            "risk_usd_per_hour": self.risk_usd_per_hour,
            "cluster_usd_per_hour": self.cluster_usd_per_hour,
            "cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd,
        }


def scenario_design(sc: Scenario, cat: Catalog, fabric: str) -> FabricDesign:
    """The bill of materials ``fabric`` is priced with on the scenario's cluster."""
    c, t = sc.cluster, sc.cluster.topology
    try:
        return _design(
            c.gpus,
            t.design,
            fabric,
            c.gpu,
            c.switch_for(fabric),
            t.oversubscription,
            t.spine_oversubscription,
            c.gpus_per_node,
            c.nics_for(fabric),
            sc.costs.optics,
            cat,
        )
    except TopologyError as exc:
        raise CostError(f"cluster.topology: cannot price {fabric}: {exc}") from None


# Designs kept: scenario variants that differ in money only (advise's break-even at each size,
# a sweep over prices or maturities) price the same cluster again and again, and choosing its
# media is most of a fabric's cost. A design is immutable, a catalog equal only to itself.
DESIGN_CACHE_ENTRIES = 1024


@lru_cache(maxsize=DESIGN_CACHE_ENTRIES)
def _design(
    gpus: int,
    design: str,
    fabric: str,
    gpu: str,
    switch: str | None,
    oversubscription: float,
    spine_oversubscription: float,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    optics: Optics,
    cat: Catalog,
) -> FabricDesign:
    return design_fabric(
        gpus,
        design,
        fabric,
        gpu=gpu,
        switch=switch,
        oversubscription=oversubscription,
        spine_oversubscription=spine_oversubscription,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        optics=optics,
        catalog=cat,
    )


def fabric_cost(
    sc: Scenario,
    cat: Catalog,
    a: CostAssumptions,
    fabric: str,
    *,
    run_gpu_hours: float | None = None,
    run_days: float | None = None,
    output_tokens_per_s: float | None = None,
) -> FabricCost:
    """Cost of ``fabric`` for the scenario's cluster; ``run_*`` and ``output_tokens_per_s``
    come from the workload layer."""
    c, k, org = sc.cluster, sc.costs, sc.organization
    fam = cat.fabric(fabric).family
    maturity = org.network_maturity
    bom = scenario_design(sc, cat, fabric)
    net_capex = bom.cost_usd["total"]
    servers = c.gpus * a.server_usd_per_gpu(c.gpu)
    node_kw = c.gpus * cat.gpu(c.gpu).tdp_w * a.tdp_multiplier / 1000
    it_kw = node_kw + bom.power_w["total"] / 1000
    power_year = it_kw * k.pue * HOURS_PER_YEAR * k.power_price_kwh
    fte = a.staff_fte(fam, maturity, c.gpus, bom.switch_count)
    staff_year = fte * a.usd_per_fte_year
    support_year = a.support_share(fam) * net_capex
    years = k.lifecycle_years
    tier = None
    if k.mode == "own":
        owned = net_capex + servers + years * (power_year + staff_year + support_year)
        hour_cost = owned / (c.gpus * years * HOURS_PER_YEAR)
        weeks = a.stabilisation_weeks(fam, maturity)
    else:
        tier = rent_tier(a, fam, k.gpu_hour_price)
        hour_cost = tier.price_usd
        weeks = 0.0  # a provider's fabric is already in service; ask who tunes it
    stabilisation = weeks * HOURS_PER_WEEK * c.gpus * a.degraded_share * hour_cost
    events = a.events_per_year(fam, maturity, c.gpus)
    per_event_h = hours_per_interruption(sc, cat, fam)
    risk_year = events * c.gpus * per_event_h * hour_cost
    return FabricCost(
        fabric=fabric,
        family=fam,
        mode=k.mode,
        gpus=c.gpus,
        lifecycle_years=years if tier is None else None,  # a rental's lifecycle is the run
        capex_network_usd=net_capex,
        capex_servers_usd=servers,
        power_kw=it_kw,
        power_usd_per_year=power_year,
        staff_fte=fte,
        staff_usd_per_year=staff_year,
        support_usd_per_year=support_year,
        gpu_hour_cost_usd=hour_cost,
        stabilisation_weeks=weeks,
        stabilisation_usd=stabilisation,
        risk_events_per_year=events,
        risk_hours_per_event=per_event_h,
        risk_usd_per_year=risk_year,
        run_gpu_hours=run_gpu_hours,
        run_days=run_days,
        rent=tier,
        output_tokens_per_s=output_tokens_per_s,
        network_prices=bom.prices_dict(),
    )
