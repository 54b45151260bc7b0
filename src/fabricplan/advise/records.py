"""The advice's parts as typed records: each fabric's line, the recommendation, the tornado's
rows and the Monte Carlo's summary. ``to_dict`` gives the document ``advise --json`` prints,
whose keys and order it keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricplan.advise.growth import Growth
from fabricplan.advise.roce_tuning import RoceTuning
from fabricplan.advise.support import SupportEffect
from fabricplan.validation.envelope import Validation
from fabricplan.workload import FabricResult
from fabricplan.workload.inference import ServingRates

# Serving figures each fabric's advice carries as ``step`` prints them (None for training).
SERVING_KEYS = (
    "replicas",
    "streams_per_replica",
    "streams_total",
    "output_tokens_per_s_per_replica",
    "output_tokens_per_s_total",
    "input_tokens_per_s_per_replica",
    "input_tokens_per_s_total",
)


@dataclass(frozen=True)
class FabricAdvice:
    """One fabric in the advice: the workload model's record (``result``), its money as advise
    words it (a rental has none of an owner's figures: those are None) and its score."""

    result: FabricResult
    family: str
    capex_usd: float | None
    capex_network_usd: float | None
    network_prices: dict[str, Any] | None  # the network bill's prices and their sources
    opex_usd_per_year: float | None
    tco_usd: float | None
    cost_per_run_usd: float | None
    cost_per_million_output_tokens_usd: float | None
    risk_usd: float | None  # run-loss risk over the lifecycle
    risk_per_run_usd: float | None
    risk_usd_per_hour: float | None
    cluster_usd_per_hour: float | None
    rent_premium_share: float | None
    risk_events_per_year: float
    risk_hours_per_event: float
    stabilisation_weeks: float
    stabilisation_usd: float
    staff_fte: float | None
    gpu_hour_cost_usd: float
    cost_same_work_usd: float  # the score fabrics are ranked on
    misses_time_to_production: bool
    not_modelled: list[str]  # what the network backend leaves out for this fabric

    @property
    def fabric(self) -> str:
        return self.result.fabric

    @property
    def step_time_s(self) -> float:
        return self.result.figures.step_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.result.figures.tokens_per_s

    @property
    def comm_exposed_fraction(self) -> float:
        return self.result.figures.comm_exposed_fraction

    @property
    def time_to_train_days(self) -> float | None:
        return self.result.figures.time_to_train_days

    @property
    def gpu_hours(self) -> float | None:
        return self.result.figures.gpu_hours

    @property
    def expected_time_to_train_days(self) -> float | None:
        return self.result.expected_time_to_train_days

    @property
    def expected_gpu_hours(self) -> float | None:
        return self.result.expected_gpu_hours

    @property
    def goodput(self) -> float | None:
        return self.result.goodput

    @property
    def breakdown(self) -> dict[str, float]:
        return self.result.figures.breakdown

    @property
    def validation(self) -> Validation | None:
        return self.result.validation

    @property
    def ttft_s(self) -> float | None:
        sv = self.result.serving
        return None if sv is None else sv.ttft_s

    @property
    def itl_s(self) -> float | None:
        sv = self.result.serving
        return None if sv is None else sv.itl_s

    @property
    def network_fraction(self) -> float | None:
        sv = self.result.serving
        return None if sv is None else sv.network_fraction

    @property
    def output_tokens_per_s_total(self) -> float | None:
        sv = self.result.serving
        return None if sv is None else sv.rates.output_tokens_per_s_total

    @property
    def rates(self) -> ServingRates | None:
        """Serving: the token rates per replica and in total."""
        sv = self.result.serving
        return None if sv is None else sv.rates

    @property
    def replicas(self) -> int | None:
        return None if self.rates is None else self.rates.replicas

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        sv = r.serving
        return {
            "fabric": r.fabric,
            "family": self.family,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "time_to_train_days": self.time_to_train_days,
            "gpu_hours": self.gpu_hours,
            "expected_time_to_train_days": self.expected_time_to_train_days,
            "expected_gpu_hours": self.expected_gpu_hours,
            "goodput": self.goodput,
            "expected_run": r.expected_run_document(),
            "comm_exposed_fraction": self.comm_exposed_fraction,
            "capex_usd": self.capex_usd,
            "capex_network_usd": self.capex_network_usd,
            "network_prices": self.network_prices,
            "opex_usd_per_year": self.opex_usd_per_year,
            "tco_usd": self.tco_usd,
            "cost_per_run_usd": self.cost_per_run_usd,
            "cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd,
            "risk_usd": self.risk_usd,
            "risk_per_run_usd": self.risk_per_run_usd,
            "risk_usd_per_hour": self.risk_usd_per_hour,
            "cluster_usd_per_hour": self.cluster_usd_per_hour,
            "rent_premium_share": self.rent_premium_share,
            "risk_events_per_year": self.risk_events_per_year,
            "risk_hours_per_event": self.risk_hours_per_event,
            "stabilisation_weeks": self.stabilisation_weeks,
            "stabilisation_usd": self.stabilisation_usd,
            "staff_fte": self.staff_fte,
            "gpu_hour_cost_usd": self.gpu_hour_cost_usd,
            "cost_same_work_usd": self.cost_same_work_usd,
            "misses_time_to_production": self.misses_time_to_production,
            "ttft_s": self.ttft_s,
            "itl_s": self.itl_s,
            "network_fraction": self.network_fraction,
            **(dict.fromkeys(SERVING_KEYS) if sv is None else sv.rates.to_dict()),
            "breakdown": self.breakdown,
            "validation": None if r.validation is None else r.validation.to_dict(),
            "not_modelled": self.not_modelled,
        }


@dataclass(frozen=True)
class SensitivityRow:
    """One bar of the tornado: the margin (runner-up minus recommended) at a driver's low and
    high, the others nominal."""

    driver: str
    fabric: str | None  # a price quoted per fabric moves one fabric at a time; else None
    label: str
    low: float
    high: float
    range: str  # the driver's range for people
    margin_at_low_usd: float
    margin_at_high_usd: float
    swing_usd: float
    flips: bool  # the margin changes sign within the range
    tips_at: float | None  # the driver's value at which the margin is zero, if in reach
    gpus: int | None = None  # the size it describes (the growth target's, when that decides)

    def to_dict(self) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "fabric": self.fabric,
            "label": self.label,
            "low": self.low,
            "high": self.high,
            "range": self.range,
            "margin_at_low_usd": self.margin_at_low_usd,
            "margin_at_high_usd": self.margin_at_high_usd,
            "swing_usd": self.swing_usd,
            "flips": self.flips,
            "tips_at": self.tips_at,
            "gpus": self.gpus,
        }


@dataclass(frozen=True)
class Uncertainty:
    """The Monte Carlo's summary, at the size the choice rests on."""

    samples: int
    seed: int
    p_cheapest: dict[str, float]  # by fabric
    cost_p10_p90_usd: dict[str, list[float]]  # by fabric
    gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "seed": self.seed,
            "p_cheapest": self.p_cheapest,
            "cost_p10_p90_usd": self.cost_p10_p90_usd,
            "gpus": self.gpus,
        }


@dataclass(frozen=True)
class CostIndeterminate:
    """The prices, not the fabrics, decide: the margin's P10 to P90 spans zero."""

    margin_p10_p90_usd: tuple[float, float]
    settle_with: list[str]  # the price drivers whose quotes would settle it

    def to_dict(self) -> dict[str, Any]:
        return {
            "margin_p10_p90_usd": list(self.margin_p10_p90_usd),
            "settle_with": self.settle_with,
        }


@dataclass(frozen=True)
class Recommendation:
    fabric: str
    topology: str
    confidence: str  # high | medium | low
    p_cheapest: float
    reasons: list[str]
    cost_indeterminate: CostIndeterminate | None
    support: SupportEffect | None = None
    roce_tuning: RoceTuning | None = None
    growth: Growth | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fabric": self.fabric,
            "topology": self.topology,
            "confidence": self.confidence,
            "p_cheapest": self.p_cheapest,
            "reasons": self.reasons,
        }
        if self.support is not None:
            out["support"] = self.support.to_dict()
        ci = self.cost_indeterminate
        out["cost_indeterminate"] = None if ci is None else ci.to_dict()
        if self.roce_tuning is not None:
            out["roce_tuning"] = self.roce_tuning.to_dict()
        if self.growth is not None:
            out["growth"] = self.growth.to_dict()
        return out
