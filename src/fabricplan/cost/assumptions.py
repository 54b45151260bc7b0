"""The labelled cost and risk assumptions, typed (``catalog/data/economics/costs.toml``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from fabricplan.catalog.reliability import HOURS_PER_YEAR, fabric_events_per_gpu_hour


@dataclass(frozen=True)
class CostAssumptions:
    raw: dict[str, Any]

    def _by(self, table: str, key: str, family: str) -> Any:
        values = self.raw[table][key]
        if family not in values:
            raise KeyError(f"costs.toml: [{table}] {key} has no entry for fabric family {family!r}")
        return values[family]

    def server_usd_per_gpu(self, gpu: str) -> float:
        return float(self.raw["gpu_server"]["usd_per_gpu"][gpu])

    @property
    def server_spread(self) -> float:
        return float(self.raw["gpu_server"]["spread"])

    def uncertainty(self, driver: str) -> tuple[float, float]:
        """The Monte Carlo's (low, high) multiplier for ``driver``."""
        low, high = self.raw["uncertainty"][driver]
        return float(low), float(high)

    @property
    def tdp_multiplier(self) -> float:
        return float(self.raw["node_power"]["tdp_multiplier"])

    @property
    def usd_per_fte_year(self) -> float:
        return float(self.raw["staff"]["usd_per_fte_year"])

    def staff_fte(self, family: str, maturity: str, gpus: int, switches: int) -> float:
        """Engineers for a fabric of ``switches`` switches serving ``gpus`` GPUs: the fixed team,
        shared pro rata while the fabric is small, plus a share that grows with the cluster."""
        base, per_1k = self._by("staff", "fte", family)[maturity]
        share = min(1.0, switches / float(self.raw["staff"]["full_team_switches"]))
        return float(base * share + per_1k * gpus / 1000)

    def support_share(self, family: str) -> float:
        return float(self._by("support", "share_of_network_capex", family))

    def stabilisation_weeks(self, family: str, maturity: str) -> float:
        return float(self._by("stabilisation", "weeks", family)[maturity])

    @property
    def degraded_share(self) -> float:
        return float(self.raw["stabilisation"]["degraded_share"])

    def events_per_year(self, family: str, maturity: str, gpus: int) -> float:
        """Fabric-caused interruptions a year on ``gpus`` GPUs: the rate the expected
        time-to-train uses too (``catalog.reliability``)."""
        per_gpu_hour = fabric_events_per_gpu_hour(self.raw["risk"], family, maturity)
        return per_gpu_hour * HOURS_PER_YEAR * gpus

    def rent_premium_share(self, family: str) -> float:
        """Share of the scenario's ``gpu_hour_price`` a rented tier of this family adds."""
        return float(self._by("rent", "premium_share", family))

    def rent_factor(self, family: str) -> float:
        """Price of a GPU-hour on this family relative to the scenario's ``gpu_hour_price``."""
        return 1.0 + self.rent_premium_share(family)

    @property
    def rent_basis(self) -> str:
        return str(self.raw["rent"]["basis"])

    def basis(self) -> dict[str, str]:
        return {k: str(v.get("basis", "")) for k, v in self.raw.items() if isinstance(v, dict)}


@cache
def load_assumptions() -> CostAssumptions:
    path = resources.files("fabricplan.catalog") / "data" / "economics" / "costs.toml"
    return CostAssumptions(tomllib.loads(path.read_text(encoding="utf-8")))
