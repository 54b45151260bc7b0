"""Compare a scenario's fabrics end to end and recommend one.

The fabrics are ranked on :mod:`.scoring`'s cost of doing the same work. Uncertainty is a Monte
Carlo over multipliers on each cost part and over the positions of the drivers that change
performance (latency, NIC goodput, RoCE quality), whose step times the workload model computes
at grid points (:mod:`.performance`); thousands of samples take milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fabricplan.advise.break_even import BreakEven, break_even_gpus
from fabricplan.advise.by_model import break_even_by_model
from fabricplan.advise.growth import growth_evaluation, growth_reason
from fabricplan.advise.performance import PERF_DRIVERS, perf_table
from fabricplan.advise.questions import ProviderQuestion, provider_questions
from fabricplan.advise.reasons import reasons
from fabricplan.advise.records import (
    CostIndeterminate,
    FabricAdvice,
    Recommendation,
    SensitivityRow,
    Uncertainty,
)
from fabricplan.advise.rent import Costing, costing, tier_reasons
from fabricplan.advise.roce_tuning import tuning_effect, tuning_reason
from fabricplan.advise.scoring import (
    DRIVERS,
    PER_FABRIC_DRIVERS,
    Parts,
    build_parts,
    evaluate,
    nominal_multipliers,
    range_text,
    sampled,
    scenario_at,
)
from fabricplan.advise.support import support_effect
from fabricplan.catalog import Catalog
from fabricplan.congestion.limits import not_modelled_by
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import FabricCost
from fabricplan.cost.run import dollars
from fabricplan.scenario import Scenario
from fabricplan.workload import FabricResult

# Samples per Monte Carlo: the standard error of a probability is at most 0.8 points.
MC_SAMPLES = 4000
# Confidence labels by P(recommended fabric is cheapest) over the Monte Carlo: judgement
# thresholds for wording, not measurements.
CONFIDENCE = ((0.9, "high"), (0.7, "medium"), (0.0, "low"))
# A fabric that misses the time-to-production budget loses to one that meets it when it is
# cheaper by at most this share: within it, schedule beats money. A judgement, not a measurement.
DEADLINE_TIE_SHARE = 0.05


@dataclass(frozen=True, eq=False)
class CostSamples:
    """The Monte Carlo's cost of the same work per fabric (rows, in ``fabrics`` order) and
    sample (columns), at the size the uncertainty describes."""

    fabrics: tuple[str, ...]
    usd: np.ndarray  # (fabrics, samples)

    def margin(self, runner_up: str, best: str) -> np.ndarray:
        """Sample by sample, what ``runner_up`` costs more than ``best`` (negative: less)."""
        return self.usd[self.fabrics.index(runner_up)] - self.usd[self.fabrics.index(best)]


@dataclass(frozen=True)
class Advice:
    recommendation: Recommendation
    fabrics: list[FabricAdvice]
    break_even_gpus: BreakEven
    sensitivity: list[SensitivityRow]
    uncertainty: Uncertainty
    questions: list[ProviderQuestion]
    notes: list[str] = field(default_factory=list)
    congestion_backend: str = DEFAULT_BACKEND.name  # the network backend that priced it
    costing: Costing = field(default_factory=lambda: costing("own"))  # what the score is
    # Not in ``to_dict``: each fabric's cost by part (in ``fabrics`` order) and the Monte
    # Carlo's samples, for reports that chart them.
    costs: tuple[FabricCost, ...] = field(default=(), compare=False, repr=False)
    cost_samples: CostSamples | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "congestion_backend": self.congestion_backend,
            "costing": self.costing.to_dict(),
            "recommendation": self.recommendation.to_dict(),
            "fabrics": [f.to_dict() for f in self.fabrics],
            "break_even_gpus": self.break_even_gpus.to_dict(),
            "sensitivity": [d.to_dict() for d in self.sensitivity],
            "uncertainty": self.uncertainty.to_dict(),
            "questions": [q.to_dict() for q in self.questions],
            "notes": self.notes,
        }


# Price drivers named as the quotes that would settle a cost-indeterminate choice.
SETTLING_PRICES = 2
# Positions at which a performance driver's margin is scored to find where it tips.
TIP_POSITIONS = 201


def _sensitivity(parts: Parts, best: int, other: int, names: list[str]) -> list[SensitivityRow]:
    """Tornado: the margin (runner-up minus recommended) at each driver's low and high, for
    the drivers the score depends on; a price quoted per fabric moves one fabric at a time."""
    out = []
    for key in parts.drivers():
        label, lo, hi = DRIVERS[key]
        apart = key in PER_FABRIC_DRIVERS
        for f in range(len(names)) if apart else [None]:
            m = nominal_multipliers(2)
            if f is None:
                m[key] = np.array([lo, hi])
            else:
                m[key] = np.ones((len(names), 2))
                m[key][f] = [lo, hi]
            s = parts.scores(m)
            margin = s[other] - s[best]
            out.append(
                SensitivityRow(
                    driver=key,
                    fabric=None if f is None else names[f],
                    label=label if f is None else f"{label} of {names[f]}",
                    low=lo,
                    high=hi,
                    range=range_text(key),
                    margin_at_low_usd=float(margin[0]),
                    margin_at_high_usd=float(margin[1]),
                    swing_usd=float(abs(margin[1] - margin[0])),
                    flips=bool((margin < 0).any()),
                    tips_at=_tipping_point(parts, key, lo, hi, margin, best, other),
                )
            )
    return sorted(out, key=lambda d: -d.swing_usd)


def _tipping_point(
    parts: Parts, key: str, lo: float, hi: float, margin: np.ndarray, best: int, other: int
) -> float | None:
    """The value of one driver at which the margin reaches zero, the others nominal. The cost
    is linear in every price and rate multiplier, so two points give the line. A performance
    driver moves step time, which is not linear in its position: its margin is scored across
    the range (the model's times, interpolated between its grid points) and the first sign
    change found."""
    if key in PERF_DRIVERS:
        if parts.perf is None:
            return None
        pos = np.linspace(lo, hi, TIP_POSITIONS)
        m = nominal_multipliers(TIP_POSITIONS)
        m[key] = pos
        s = parts.scores(m)
        d = s[other] - s[best]
        cross = np.flatnonzero(np.sign(d[:-1]) * np.sign(d[1:]) < 0)
        if not len(cross):
            return None
        i = int(cross[0])
        return float(pos[i] - d[i] * (pos[i + 1] - pos[i]) / (d[i + 1] - d[i]))
    slope = float(margin[1] - margin[0]) / (hi - lo)
    if slope == 0:
        return None
    at = lo - float(margin[0]) / slope
    return at if at > 0 else None


def _monte_carlo(
    parts: Parts, names: list[str], seed: int, gpus: int
) -> tuple[Uncertainty, np.ndarray]:
    """The Monte Carlo's summary (at ``gpus``, the size ``parts`` describe), and its cost
    samples (F, S)."""
    rng = np.random.default_rng(seed)
    m = nominal_multipliers(MC_SAMPLES)
    for k, (_, lo, hi) in DRIVERS.items():
        if sampled(k):
            shape = (len(names), MC_SAMPLES) if k in PER_FABRIC_DRIVERS else MC_SAMPLES
            m[k] = rng.uniform(lo, hi, shape)
    s = parts.scores(m)
    wins = np.bincount(s.argmin(axis=0), minlength=len(names)) / MC_SAMPLES
    summary = Uncertainty(
        samples=MC_SAMPLES,
        seed=seed,
        p_cheapest={n: float(w) for n, w in zip(names, wins, strict=True)},
        cost_p10_p90_usd={
            n: [float(np.percentile(s[i], 10)), float(np.percentile(s[i], 90))]
            for i, n in enumerate(names)
        },
        gpus=gpus,
    )
    return summary, s


def cost_indeterminate(
    samples: np.ndarray, best: int, other: int, sens: list[SensitivityRow]
) -> CostIndeterminate | None:
    """When the margin between the two leading fabrics (runner-up minus recommended, sample by
    sample: shared prices move both fabrics alike and cancel) spans zero between its P10 and
    P90, the prices, not the fabrics, decide: the band, and the price drivers that move the
    margin most (the quotes that would settle it)."""
    if best == other:
        return None
    lo, hi = np.percentile(samples[other] - samples[best], [10, 90])
    if lo > 0:
        return None
    prices = [d for d in sens if d.driver not in PERF_DRIVERS][:SETTLING_PRICES]
    return CostIndeterminate((float(lo), float(hi)), [d.label for d in prices])


# The kinds of unsourced price a network bill lists, each with how advise names it.
UNSOURCED_KINDS = (
    ("no_public_price", "no public price"),
    ("no_listing_cited", "no listing cited"),
)


def unpriced_notes(costs: list[FabricCost]) -> list[str]:
    """Per fabric, the parts of its network bill that no public price backs: those with none
    to cite, then those priced by a stated assumption without a cited listing."""
    out = []
    for c in costs:
        prices = c.network_prices or {}
        for key, what in UNSOURCED_KINDS:
            missing = prices.get(key) or []
            if missing:
                out.append(
                    f"{what} for {', '.join(missing)} ({c.fabric}): priced by assumption; "
                    "a quote would replace it"
                )
    return out


def advise(
    sc: Scenario,
    cat: Catalog,
    *,
    backend: NetworkBackend = DEFAULT_BACKEND,
    seed: int = 0,
    break_even: bool = True,
    by_model: bool = False,
    tick: Callable[[str], None] | None = None,
) -> Advice:
    """``backend`` prices the network's congestion everywhere (the break-even per model picks
    its plans without). ``by_model`` adds the break-even of every training model in the catalog
    (``tick`` is called after each, for a progress bar)."""
    perf, costs = evaluate(sc, cat, backend)
    names = [p.fabric for p in perf]
    parts = build_parts(sc, cat, perf, costs)
    nominal = parts.nominal()
    order = list(np.argsort(nominal))
    best = int(order[0])
    other = int(order[1]) if len(order) > 1 else best
    # a fabric whose stabilisation outlasts the time-to-production budget loses close calls
    deadline = sc.organization.time_to_production_weeks
    late = [c.stabilisation_weeks > deadline for c in costs]
    if (
        late[best]
        and not late[other]
        and nominal[other] <= nominal[best] * (1 + DEADLINE_TIE_SHARE)
    ):
        best, other = other, best
    # lock-in: a cluster that grows within its lifecycle keeps the fabric it starts with, so the
    # fabric that is cheapest at the target size is the one to build (seed 001)
    growth, target_parts = growth_evaluation(sc, cat, backend)
    now_best = names[best]
    mc_parts, mc_sc = parts, sc
    if growth and growth.locks_in and growth.cheapest not in (None, now_best):
        other, best = best, names.index(growth.cheapest)
        if target_parts is not None:  # the confidence is about the size the choice rests on
            mc_parts, mc_sc = target_parts, scenario_at(sc, cat, growth.target_gpus)
    # the performance drivers: the workload model at each one's positions, at that size
    mc_parts = mc_parts.with_perf(perf_table(mc_sc, cat, backend))
    mc_gpus = mc_sc.cluster.gpus
    mc, samples = _monte_carlo(mc_parts, names, seed, mc_gpus)
    p_best = mc.p_cheapest[names[best]]
    confidence = next(label for bound, label in CONFIDENCE if p_best >= bound)
    # the tornado describes the same size as the Monte Carlo: the one the choice rests on
    sens = _sensitivity(mc_parts, best, other, names) if other != best else []
    sens = [replace(d, gpus=mc_gpus) for d in sens]
    fabrics = [
        _fabric_advice(sc, cat, backend, r, c, float(score), misses)
        for r, c, score, misses in zip(perf, costs, nominal, late, strict=True)
    ]
    why = reasons(sc, fabrics, best, other, sens, parts.kind, tuple(tier_reasons(costs)))
    if parts.kind == "own":
        why[-1:-1] = unpriced_notes([costs[best], costs[other]])
    support = support_effect(mc_parts, costs, best, other)
    if support is not None:
        # said before the cost line: the rates are inside every owned figure above it
        why.insert(-1, support.reason(names[best], names[other]))
    undecided = cost_indeterminate(samples, best, other, sens)
    if undecided is not None:
        lo, hi = undecided.margin_p10_p90_usd
        why.append(
            f"cost-indeterminate: {names[other]} saves {dollars(-lo)} or more in 1 sample "
            f"of 10 and {names[best]} {dollars(hi)} or more in another (the margin's P10 to "
            f"P90); quotes for {' and '.join(undecided.settle_with)} would settle it"
        )
    # a backend blind to flow control gives the same step at every RoCE quality: nothing to say
    tuning = (
        tuning_effect(sc, cat, perf, {c.fabric: c.gpu_hour_cost_usd for c in costs}, backend)
        if backend.models_flow_control
        else None
    )
    if tuning is not None:
        why.append(tuning_reason(tuning))
    if growth:
        why.append(growth_reason(growth, now_best))
    rec = Recommendation(
        fabric=names[best],
        topology=sc.cluster.topology.design,
        confidence=confidence,
        p_cheapest=p_best,
        reasons=why,
        cost_indeterminate=undecided,
        support=support,
        roce_tuning=tuning,
        growth=growth,
    )
    be = break_even_gpus(sc, cat, backend) if break_even else BreakEven(None, "not computed")
    if by_model:
        be = replace(be, by_model=break_even_by_model(sc, cat, backend, tick))
    notes = ["every price and risk rate is a labelled assumption (catalog economics/costs.toml)"]
    notes += unpriced_notes(costs)
    questions = provider_questions(sc, cat)
    return Advice(
        rec,
        fabrics,
        be,
        sens,
        mc,
        questions,
        notes,
        congestion_backend=backend.name,
        costing=costing(parts.kind),
        costs=tuple(costs),
        cost_samples=CostSamples(tuple(names), samples),
    )


def _fabric_advice(
    sc: Scenario,
    cat: Catalog,
    backend: NetworkBackend,
    r: FabricResult,
    c: FabricCost,
    score: float,
    misses: bool,
) -> FabricAdvice:
    """One fabric's line of the advice; a rental has none of an owner's figures."""
    owned = c.rent is None
    fabric = cat.fabric(r.fabric)
    return FabricAdvice(
        result=r,
        family=c.family,
        capex_usd=c.capex_usd if owned else None,
        capex_network_usd=c.capex_network_usd if owned else None,
        network_prices=c.network_prices,
        opex_usd_per_year=c.opex_usd_per_year if owned else None,
        tco_usd=c.tco_usd if owned else None,
        cost_per_run_usd=c.cost_per_run_usd,
        cost_per_million_output_tokens_usd=c.cost_per_million_output_tokens_usd,
        risk_usd=c.risk_usd_per_year * (c.lifecycle_years or 0.0) if owned else None,
        risk_per_run_usd=c.risk_per_run_usd,
        risk_usd_per_hour=c.risk_usd_per_hour,
        cluster_usd_per_hour=c.cluster_usd_per_hour,
        rent_premium_share=c.rent.premium_share if c.rent else None,
        risk_events_per_year=c.risk_events_per_year,
        risk_hours_per_event=c.risk_hours_per_event,
        stabilisation_weeks=c.stabilisation_weeks,
        stabilisation_usd=c.stabilisation_usd,
        staff_fte=c.staff_fte if owned else None,
        gpu_hour_cost_usd=c.gpu_hour_cost_usd,
        cost_same_work_usd=score,
        misses_time_to_production=misses,
        not_modelled=not_modelled_by(
            backend.name,
            fabric.family,
            sc.cluster.topology.design,
            sc.cluster.routing or fabric.default_routing,
        ),
    )
