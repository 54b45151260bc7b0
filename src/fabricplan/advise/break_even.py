"""Break-even: the cluster size at which InfiniBand's shorter runs repay its premium over RoCE,
per organisation maturity.

The scenario is re-evaluated at node-count doublings up to ``MAX_SCALE`` times its size, with
the same model, plan (``dp`` refilled) and organisation; sizes the plan cannot divide are
skipped. Step times do not depend on maturity, so each size's workload is evaluated once and
only the costs are redone per maturity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabricplan.advise.scoring import build_parts, costs_of, first_of_family, scenario_at
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import CostError
from fabricplan.scenario import Scenario
from fabricplan.scenario.models import MATURITIES
from fabricplan.workload import FabricResult

if TYPE_CHECKING:
    from fabricplan.advise.by_model import ModelBreakEven

MAX_SIZES = 6  # evaluations: each re-runs the workload and congestion layers
MAX_SCALE = 2  # largest size evaluated, relative to the scenario's
MIN_NODES = 2  # below two nodes no traffic crosses the fabric


@dataclass(frozen=True)
class SizeRow:
    """InfiniBand and RoCE at one size and maturity: the cost of the same work, and the step."""

    gpus: int
    ib_usd: float
    roce_usd: float
    ib_step_s: float | None
    roce_step_s: float | None
    ib_cheaper: bool  # InfiniBand costs no more

    def to_dict(self, ib: str, roce: str) -> dict[str, Any]:
        """As ``advise --json`` prints it: the figures named after the fabrics ``ib``, ``roce``."""
        return {
            "gpus": self.gpus,
            f"{ib}_usd": self.ib_usd,
            f"{roce}_usd": self.roce_usd,
            f"{ib}_step_s": self.ib_step_s,
            f"{roce}_step_s": self.roce_step_s,
            "ib_cheaper": self.ib_cheaper,
        }


def rows_document(rows: dict[str, list[SizeRow]], ib: str, roce: str) -> dict[str, Any]:
    """Each maturity's rows as ``advise --json`` prints them."""
    return {m: [r.to_dict(ib, roce) for r in rs] for m, rs in rows.items()}


@dataclass(frozen=True)
class BreakEven:
    """The size from which InfiniBand costs no more for the same work, per maturity, and the
    sizes evaluated; or why there is none (``note``)."""

    gpus: int | None  # at the scenario's maturity
    note: str
    ib: str | None = None  # the fabrics compared; None when not evaluated
    roce: str | None = None
    sizes: list[SizeRow] | None = None  # at the scenario's maturity
    by_maturity: dict[str, int | None] | None = None
    sizes_by_maturity: dict[str, list[SizeRow]] | None = None  # the report's surface
    by_model: list[ModelBreakEven] | None = None  # asked for: every training model's

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpus": self.gpus}
        if self.ib is None or self.roce is None:
            out["note"] = self.note
        else:
            ib, roce = self.ib, self.roce
            out |= {
                "ib": ib,
                "roce": roce,
                "note": self.note,
                "sizes": [r.to_dict(ib, roce) for r in self.sizes or []],
                "by_maturity": self.by_maturity,
                "sizes_by_maturity": rows_document(self.sizes_by_maturity or {}, ib, roce),
            }
        if self.by_model is not None:
            out["by_model"] = [m.to_dict() for m in self.by_model]
        return out


def sizes(sc: Scenario, limit: int | None = MAX_SIZES) -> list[int]:
    """Node-count doublings from ``MIN_NODES`` nodes to ``MAX_SCALE`` times the scenario's size;
    the largest ``limit`` of them."""
    per_node = sc.cluster.gpus_per_node
    assert per_node is not None, "resolve the scenario first"
    out, n = [], MIN_NODES * per_node
    while n <= MAX_SCALE * sc.cluster.gpus:
        out.append(n)
        n *= 2
    return out if limit is None else out[-limit:]


def _stays_cheaper(rows: list[SizeRow]) -> int | None:
    """The smallest size from which InfiniBand is no dearer at every larger size evaluated."""
    out = None
    for r in reversed(rows):
        if not r.ib_cheaper:
            break
        out = r.gpus
    return out


def with_maturity(sc: Scenario, maturity: str) -> Scenario:
    org = sc.organization.model_copy(update={"network_maturity": maturity})
    return sc.model_copy(update={"organization": org})


def _scores(sc: Scenario, cat: Catalog, perf: list[FabricResult]) -> tuple[float, float]:
    ib, roce = build_parts(sc, cat, perf, costs_of(sc, cat, perf)).nominal()
    return float(ib), float(roce)


def ib_and_roce(sc: Scenario, cat: Catalog) -> tuple[str, str] | None:
    """The scenario's first InfiniBand and first RoCE fabric, if it has both."""
    ib, roce = first_of_family(sc, cat, "infiniband"), first_of_family(sc, cat, "roce")
    return None if ib is None or roce is None else (ib, roce)


def sweep(
    at_sizes: list[int],
    at: Callable[[int], Scenario | None],
    cat: Catalog,
    ib: str,
    roce: str,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> dict[str, list[SizeRow]]:
    """IB and RoCE cost for the same work, and step time, at each size, per maturity.
    ``at(n)`` is the scenario on ``n`` GPUs (None, or a ScenarioError, skips the size).
    Re-evaluating the scenario's own size is cheap: its congestion runs are cached where they
    are simulated, and its workload by the sweep engine."""
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import variant_of

    rows: dict[str, list[SizeRow]] = {m: [] for m in MATURITIES}
    # the sizes as the sweep engine's variants: each evaluated once (a size another analysis
    # of this scenario evaluated already comes from the engine's cache); a size the plan does
    # not divide, or the model refuses, comes back skipped
    variants = [
        variant_of(i, {"cluster.gpus": n}, lambda n=n: at(n)) for i, n in enumerate(at_sizes)
    ]
    for rec in evaluate_scenarios(variants, cat, backend):
        s = variants[rec.index].scenario
        if not rec.ok or s is None:
            continue
        n = at_sizes[rec.index]
        perf = [o.detail for o in rec.outcomes if o.detail is not None]
        step = {p.fabric: p.figures.step_time_s for p in perf}
        try:
            for m in MATURITIES:
                i, r = _scores(with_maturity(s, m), cat, perf)
                rows[m].append(SizeRow(n, i, r, step.get(ib), step.get(roce), bool(i <= r)))
        except CostError:
            continue
    return rows


def summary(rows: dict[str, list[SizeRow]], maturity: str) -> tuple[dict[str, int | None], str]:
    """Break-even per maturity, and a sentence on the one asked about."""
    found = {m: _stays_cheaper(rows[m]) for m in MATURITIES}
    cheaper = [r.gpus for r in rows[maturity] if r.ib_cheaper]
    if not rows[maturity]:
        note = "no size evaluated: the plan does not divide or fit any of them"
    elif found[maturity]:
        note = "smallest size from which InfiniBand costs no more for the same work"
    elif cheaper:
        note = (
            f"InfiniBand costs no more at {', '.join(map(str, cheaper))} GPUs but not at "
            "every larger size evaluated"
        )
    else:
        note = "InfiniBand does not repay its premium at any size evaluated"
    return found, note


def break_even_gpus(
    sc: Scenario, cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND
) -> BreakEven:
    pair = ib_and_roce(sc, cat)
    if pair is None or sc.workload is None:
        return BreakEven(None, "needs an InfiniBand and a RoCE fabric in the scenario")
    ib, roce = pair
    rows = sweep(sizes(sc), lambda n: scenario_at(sc, cat, n, [ib, roce]), cat, ib, roce, backend)
    own = sc.organization.network_maturity
    found, note = summary(rows, own)
    return BreakEven(found[own], note, ib, roce, rows[own], found, rows)
