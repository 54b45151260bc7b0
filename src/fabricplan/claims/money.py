"""Money claims: seed 001's run-cost example, the InfiniBand premium, whether InfiniBand pays
for itself at a scale, and whether one fabric fault can cost more than the fabric difference.

Capex comes from the topology layer's bill of materials at catalog prices (nominal figures with
ranges; most are labelled assumptions); the premium claims are retried across the optics each
fabric buys and InfiniBand's switch price range, and say under which of them they hold.
"""

from __future__ import annotations

import numpy as np

from fabricplan.advise.break_even import ib_and_roce, with_maturity
from fabricplan.advise.scoring import build_parts, costs_of, nominal_multipliers
from fabricplan.catalog import Catalog
from fabricplan.claims.result import Case, ClaimResult, in_range, near, source
from fabricplan.claims.scale import EXAMPLES, IB, ROCE
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import CostError, FabricCost, fabric_cost, load_assumptions, run_cost
from fabricplan.scenario import Scenario, load_scenario, scenario_from_data
from fabricplan.scenario.models import MATURITIES
from fabricplan.workload import FabricResult

# "approximately $2.2 million": the seeds round to two significant figures
ROUNDING_TOLERANCE = 0.05
PREMIUM_SIZES = (16, 64, 256, 1024, 16384)
# Hours a fault could waste on the whole cluster: the cost model's own figure (for these
# clusters, which run no training job, the restart), a degraded run found after a day, and after
# three days.
UNDETECTED_HOURS = (None, 24.0, 72.0)
# What a bill's parts lack, as FabricCost.network_prices names them.
PRICE_GAPS = (("no_public_price", "no public price"), ("no_listing_cited", "no listing cited"))


def price_gaps(*costs: FabricCost) -> tuple[dict[str, dict[str, list[str]]], str]:
    """Per fabric, the parts of its network bill priced by assumption (none with a public
    price, then none with a cited listing), and the same as a sentence."""
    gaps = {
        c.fabric: {key: list((c.network_prices or {}).get(key) or []) for key, _ in PRICE_GAPS}
        for c in costs
    }
    said = [
        f"{', '.join(parts[key])} ({fabric}, {what})"
        for fabric, parts in gaps.items()
        for key, what in PRICE_GAPS
        if parts[key]
    ]
    text = f"priced by assumption: {'; '.join(said)}" if said else "every price cited"
    return gaps, text


def run_cost_claim() -> ClaimResult:
    r = run_cost(1024, 30, 3.0, 0.05)
    checks = {
        "cost_usd": near(r.cost_usd, 2.2e6, ROUNDING_TOLERANCE),
        "wasted_gpu_hours": r.wasted_gpu_hours == 36_864,
        "wasted_usd": near(r.wasted_usd, 110_000, ROUNDING_TOLERANCE),
        "extra_days": near(r.extra_days, 1.5, ROUNDING_TOLERANCE),
    }
    return ClaimResult(
        id="run-cost-1024-gpus-30-days",
        source=source("001"),
        claim="1,024 GPUs for 30 days at $3/GPU-hour cost about $2.2M; a 5 % network-induced "
        "loss wastes 36,864 GPU-hours, about $110,000, and adds about 1.5 days",
        conditions={"gpus": 1024, "days": 30, "gpu_hour_price": 3.0, "loss": 0.05},
        claimed={
            "cost_usd": 2.2e6,
            "wasted_gpu_hours": 36_864,
            "wasted_usd": 110_000,
            "extra_days": 1.5,
        },
        computed={
            **r.to_dict(),
            "summary": f"${r.cost_usd:,.0f}; {r.wasted_gpu_hours:,.0f} "
            f"GPU-hours = ${r.wasted_usd:,.0f}; {r.extra_days:.2f} days "
            "(fabricplan cost --gpus 1024 --days 30 --gpu-hour-price 3 --loss 0.05)",
        },
        holds=all(checks.values()),
        basis="arithmetic",
        cases=(Case({"as stated": True}, r.wasted_usd, all(checks.values())),),
    )


# InfiniBand's switch price, the one network price with public quotes: the claims are tried at
# the reseller-branded listing (the catalog's low), the nominal, and the NVIDIA-branded figure
# (its high).
SWITCH_PRICES = ("low", "nominal", "high")
# Optics: each fabric's policy (NVIDIA LinkX on InfiniBand, multi-vendor on Ethernet), or OEM or
# compatible parts on both.
OPTICS = ("policy", "oem", "compatible")
PREMIUM_BASES = ("cluster capex", "network capex", "network capex and lifecycle support")

Key = tuple[int, str, str]
Pairs = dict[Key, tuple[FabricCost, FabricCost]]


def ib_switch_priced(cat: Catalog, at: str) -> tuple[Catalog, float]:
    """The catalog with InfiniBand's default switch at its ``low``, ``nominal`` or ``high``
    price, and that price."""
    sw = cat.switch(cat.fabric(IB).default_switch)
    low, high = sw.price.band
    usd = {"low": low, "nominal": sw.price.usd, "high": high}[at]
    priced = sw.model_copy(update={"price": sw.price.model_copy(update={"usd": usd})})
    return cat.with_entry(priced), usd


def _pair(
    cat: Catalog, gpus: int, optics: str, known: Pairs | None = None, switch_price: str = "nominal"
) -> tuple[FabricCost, FabricCost]:
    """IB and RoCE costs of an H100 cluster of ``gpus``; ``known`` keeps them for reuse."""
    key = (gpus, optics, switch_price)
    if known is not None and key in known:
        return known[key]
    priced, _ = ib_switch_priced(cat, switch_price)
    sc = scenario_from_data(
        {
            "cluster": {"gpu": "h100", "gpus": gpus, "fabric": [IB, ROCE]},
            "costs": {"optics": optics},
        },
        catalog=priced,
    )
    a = load_assumptions()
    pair = fabric_cost(sc, priced, a, IB), fabric_cost(sc, priced, a, ROCE)
    if known is not None:
        known[key] = pair
    return pair


def _premiums(ib: FabricCost, roce: FabricCost) -> dict[str, float]:
    """IB over RoCE, on each basis; support is each family's assumed rate over the lifecycle."""
    years = ib.lifecycle_years or 0.0
    with_support = [c.capex_network_usd + years * c.support_usd_per_year for c in (ib, roce)]
    return {
        "cluster capex": ib.capex_usd / roce.capex_usd - 1,
        "network capex": ib.capex_network_usd / roce.capex_network_usd - 1,
        "network capex and lifecycle support": with_support[0] / with_support[1] - 1,
    }


def _premium_cases(
    cat: Catalog, low: float, high: float, sizes: tuple[int, ...], known: Pairs
) -> list[Case]:
    cases = []
    for gpus in sizes:
        for optics in OPTICS:
            for at in SWITCH_PRICES:
                ib, roce = _pair(cat, gpus, optics, known, at)
                share = roce.capex_network_usd / roce.capex_usd
                _, usd = ib_switch_priced(cat, at)
                for basis, v in _premiums(ib, roce).items():
                    note = f"network is {share:.1%} of the RoCE cluster's capex"
                    cond = {
                        "gpus": gpus,
                        "optics": optics,
                        "ib_switch_usd": usd,
                        "premium_of": basis,
                    }
                    cases.append(Case(cond, v, in_range(v, low, high), note))
    return cases


def holds_when(cases: list[Case], gpus: int, basis: str) -> str:
    """The price conditions under which a premium claim holds at one size and basis."""
    mine = [
        c for c in cases if c.conditions["gpus"] == gpus and c.conditions["premium_of"] == basis
    ]
    ok = [c for c in mine if c.holds]
    if not ok:
        lo = min(c.value or 0.0 for c in mine)
        hi = max(c.value or 0.0 for c in mine)
        return f"at {gpus:,} GPUs on {basis} it holds under none of them ({lo:+.1%} to {hi:+.1%})"
    parts = [
        f"{c.conditions['optics']} optics with the IB switch at "
        f"${c.conditions['ib_switch_usd']:,.0f} ({c.value:+.1%})"
        for c in ok
    ]
    return f"at {gpus:,} GPUs on {basis} it holds with {'; '.join(parts)}"


def premium_claims(cat: Catalog, known: Pairs | None = None) -> list[ClaimResult]:
    known = {} if known is None else known
    out = []
    _, nominal_usd = ib_switch_priced(cat, "nominal")
    for cid, seed, text, low, high, own in (
        (
            "ib-premium-16-gpus-15-20pct",
            "000",
            "At 16 GPUs InfiniBand adds roughly 15-20 % to the total cluster cost",
            0.15,
            0.20,
            {
                "gpus": 16,
                "optics": "policy",
                "ib_switch_usd": nominal_usd,
                "premium_of": "cluster capex",
            },
        ),
        (
            "ib-premium-15-30pct",
            "002",
            "InfiniBand typically carries a 15-30 % premium (HCAs, cables, proprietary switches)",
            0.15,
            0.30,
            {
                "gpus": 1024,
                "optics": "policy",
                "ib_switch_usd": nominal_usd,
                "premium_of": "network capex",
            },
        ),
    ):
        cases = _premium_cases(cat, low, high, PREMIUM_SIZES, known)
        first = next(c for c in cases if c.conditions == own)
        cases.remove(first)
        cases.insert(0, first)
        vals = [c.value or 0.0 for c in cases]
        where = holds_when(cases, own["gpus"], own["premium_of"])
        gaps, unsourced = price_gaps(*_pair(cat, own["gpus"], own["optics"], known))
        out.append(
            ClaimResult(
                id=cid,
                claim=text,
                source=source(seed),
                conditions={
                    **own,
                    "topology": "rail-optimized, non-blocking",
                    "prices": "catalog prices: nominal, with their ranges and sources",
                },
                claimed={"low": low, "high": high, "unit": "IB cost / RoCE cost - 1"},
                computed={
                    "value": first.value,
                    "unit": "IB cost / RoCE cost - 1",
                    "summary": f"{first.value:+.1%} under the claim's own conditions "
                    f"({first.note}); {where}; {min(vals):+.1%} to {max(vals):+.1%} over "
                    "sizes 16-16,384, each fabric's optics policy or OEM or compatible on "
                    "both, the IB switch at its low, nominal and high price, and the three "
                    f"bases; {unsourced}",
                    "holds_when": where,
                    "unsourced_prices": gaps,
                },
                holds=first.holds,
                basis="model",
                cases=tuple(cases),
            )
        )
    return out


# Operating costs the seeds' "pays for itself in GPU-hours" argument leaves out: scoring
# without them leaves hardware, power and GPU-hours (or the rented run) against the premium.
OPERATING = ("staff", "stabilisation", "risk")


def _scores(
    cat: Catalog, sc: Scenario, perf: list[FabricResult], mode: str, maturity: str
) -> tuple[float, float, float, float, float] | str:
    """IB and RoCE cost for the same work on hardware and GPU-hours alone, then with operating
    costs, and RoCE's step time relative to IB's, owned or rented at a network maturity. Step
    times (``perf``) depend on neither, so only the costs are redone."""
    sc = with_maturity(sc, maturity)
    sc = sc.model_copy(update={"costs": sc.costs.model_copy(update={"mode": mode})})
    try:
        parts = build_parts(sc, cat, perf, costs_of(sc, cat, perf))
    except (CostError, ValueError) as exc:
        return str(exc).splitlines()[0]
    m = nominal_multipliers(1)
    full = parts.nominal()
    bare = parts.scores({**m, **{k: np.zeros(1) for k in OPERATING}})[:, 0]
    pair = ib_and_roce(sc, cat)
    if pair is None:
        return "the scenario needs an InfiniBand and a RoCE fabric"
    names = [p.fabric for p in perf]
    ib, roce = names.index(pair[0]), names.index(pair[1])
    step = parts.time[roce] / parts.time[ib] - 1
    return (float(bare[ib]), float(bare[roce]), float(full[ib]), float(full[roce]), float(step))


UNIT = "RoCE / IB cost of the same work - 1 (hardware, power, GPU-hours)"


def _step_documents(
    cat: Catalog, scenario: str, backend: NetworkBackend
) -> tuple[Scenario | None, list[FabricResult] | str]:
    """The example's scenario and each fabric's result (sweep engine), or why the model
    refuses it."""
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import variant_of

    v = variant_of(
        0, {"scenario": scenario}, lambda: load_scenario(EXAMPLES / scenario, catalog=cat)
    )
    (rec,) = evaluate_scenarios([v], cat, backend)
    if v.scenario is None or not rec.ok:
        return v.scenario, (rec.skipped or "refused").splitlines()[0]
    return v.scenario, [o.detail for o in rec.outcomes if o.detail is not None]


def pays_claims(cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND) -> list[ClaimResult]:
    """Seed 000's rules: InfiniBand does not pay at 16 GPUs, pays at 64, is the only sane choice
    at 256, all through GPU-hours. Judged on fabricplan's cost of the same work (owned TCO
    scaled by step time, or the rented run's cost) on hardware, power and GPU-hours, the
    argument the seed makes; the cost with staff, stabilisation and risk is shown beside it."""
    out = []
    for cid, text, scenario, ib_should_win in (
        (
            "16-gpu-ib-does-not-pay",
            "At 16 GPUs the InfiniBand premium does not pay for itself; "
            "spend the savings on compute",
            "16-gpu-llama3-8b.yaml",
            False,
        ),
        (
            "64-gpu-ib-pays-for-itself",
            "At 64 GPUs and above (models over 30B) InfiniBand pays "
            "for itself in reduced GPU-hours",
            "64-gpu-llama3-70b.yaml",
            True,
        ),
        (
            "256-gpu-ethernet-false-economy",
            "At 256 GPUs Ethernet is a false economy for training",
            "256-gpu-mixtral.yaml",
            True,
        ),
    ):
        cases = []
        sc, perf = _step_documents(cat, scenario, backend)
        gaps, unsourced = {}, "prices not evaluated"
        if not isinstance(perf, str):
            assert sc is not None  # evaluated, so built
            try:
                costs = costs_of(sc, cat, perf)
            except (CostError, ValueError):
                costs = []
            gaps, unsourced = price_gaps(*(c for c in costs if c.fabric in (IB, ROCE)))
        for mode in ("own", "rent"):
            for maturity in MATURITIES:
                cond = {"costs.mode": mode, "organization.network_maturity": maturity}
                r = perf if isinstance(perf, str) else _scores(cat, sc, perf, mode, maturity)
                if isinstance(r, str):
                    cases.append(Case(cond, None, None, f"not evaluable: {r}"))
                    continue
                margin = r[1] / r[0] - 1  # > 0: RoCE costs more for the same work
                note = (
                    f"IB ${r[0]:,.0f} vs RoCE ${r[1]:,.0f}; RoCE step time {r[4]:+.1%}; "
                    f"with staff, stabilisation and risk: RoCE {r[3] / r[2] - 1:+.1%}"
                )
                cases.append(Case(cond, margin, (margin >= 0) == ib_should_win, note))
        own = next(c for c in cases if c.conditions["organization.network_maturity"] == "medium")
        cases.remove(own)
        cases.insert(0, own)
        n_ok = sum(bool(c.holds) for c in cases)
        out.append(
            ClaimResult(
                id=cid,
                claim=text,
                source=source("000"),
                conditions={
                    "scenario": scenario,
                    "fabrics": [IB, ROCE],
                    "roce_quality": "tuned",
                    "costs.mode": "own",
                    "organization.network_maturity": "medium",
                },
                claimed={"cheaper": IB if ib_should_win else ROCE, "unit": UNIT},
                computed={
                    "value": own.value,
                    "unit": UNIT,
                    "summary": f"{(own.value or 0):+.1%} ({own.note}); the claim holds in "
                    f"{n_ok} of {len(cases)} maturity x ownership cases; {unsourced}",
                    "unsourced_prices": gaps,
                },
                holds=own.holds,
                basis="model",
                cases=tuple(cases),
            )
        )
    return out


# Cluster sizes where the seed's "large cluster" fault argument is tried (GPUs).
FAULT_SIZES = (1024, 4096, 16384)


def fault_claim(cat: Catalog, known: Pairs | None = None) -> ClaimResult:
    cases = []
    for gpus in FAULT_SIZES:
        ib, roce = _pair(cat, gpus, "policy", known)
        diff = abs(ib.capex_usd - roce.capex_usd)
        for hours in UNDETECTED_HOURS:
            h = roce.risk_hours_per_event if hours is None else hours
            event = gpus * h * roce.gpu_hour_cost_usd
            label = (
                f"{h:.3g} h (cost model: without a training job, the restart)"
                if hours is None
                else f"{h:g} h undetected"
            )
            cases.append(
                Case(
                    {"gpus": gpus, "whole_cluster_hours_lost": label},
                    event / diff,
                    event >= diff,
                    f"event ${event:,.0f} vs capex difference "
                    f"${diff:,.0f}; {diff / (gpus * roce.gpu_hour_cost_usd):.0f} h of "
                    "the whole cluster needed to match it",
                )
            )
    first = cases[0]
    gaps, unsourced = price_gaps(*_pair(cat, FAULT_SIZES[0], "policy", known))
    return ClaimResult(
        id="one-fault-exceeds-capex-difference",
        source=source("001"),
        claim="In a large cluster a single RoCE misconfiguration event can exceed the capital "
        "cost difference between the two fabrics",
        conditions={
            "gpus": 1024,
            "optics": "policy",
            "event": "an interruption, as the cost "
            "model prices it (no training job here: the restart)",
        },
        claimed={"value": 1.0, "unit": "x the capex difference (event cost, at least)"},
        computed={
            "value": first.value,
            "unit": "event cost / capex difference",
            "summary": f"{first.note}; {unsourced}",
            "unsourced_prices": gaps,
        },
        holds=first.holds,
        basis="model",
        cases=tuple(cases),
    )


def money_claims(cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND) -> list[ClaimResult]:
    known: Pairs = {}  # the premium and fault claims price the same clusters
    return [
        run_cost_claim(),
        *premium_claims(cat, known),
        *pays_claims(cat, backend),
        fault_claim(cat, known),
    ]


__all__ = ["money_claims"]
