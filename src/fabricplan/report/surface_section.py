"""The break-even surface: InfiniBand's cost margin over RoCE for the same work, by cluster size,
network maturity and model, as ``advise``'s break-even sweep evaluated it.

Nothing is evaluated here. The scenario's own model is the break-even sweep ``advise`` always
runs (its plan, at node-count doublings, every maturity); with ``--break-even-models`` every
training model of the catalog follows, each with its reference plan (``advise.by_model``). Both
run on the sweep engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabricplan.report import charts, fmt
from fabricplan.report.html import Column, Html, bullets, figure, join, table, tag
from fabricplan.scenario.models import MATURITIES

if TYPE_CHECKING:
    from fabricplan.advise import Advice
    from fabricplan.advise.break_even import SizeRow
    from fabricplan.report.scenario_report import ScenarioReport

MIN_LIMIT_PCT = 0.5  # the colour scale spans at least +-0.5 %: noise stays pale


@dataclass(frozen=True)
class Surface:
    """One model's margins: advise's break-even rows for every maturity."""

    model: str
    plan: str  # which plan it ran with, in words
    ib: str
    roce: str
    rows: Mapping[str, Sequence[SizeRow]]  # maturity -> rows by size
    break_even: Mapping[str, int | None]  # maturity -> break-even size

    @property
    def sizes(self) -> list[int]:
        return sorted({r.gpus for rows in self.rows.values() for r in rows})

    def margins(self) -> dict[tuple[str, int], tuple[float, float]]:
        """(maturity, GPUs) -> (IB minus RoCE in dollars, that as a percentage of RoCE's)."""
        out = {}
        for m, rows in self.rows.items():
            for r in rows:
                ib, roce = r.ib_usd, r.roce_usd
                out[m, r.gpus] = (ib - roce, 100.0 * (ib - roce) / roce if roce else 0.0)
        return out


def surfaces(a: Advice, model: str | None) -> list[Surface]:
    """The scenario's own model (its plan), then each catalog model ``advise`` was asked for."""
    be = a.break_even_gpus
    out = []
    if be.ib is None or be.roce is None:
        return out
    own = be.sizes_by_maturity
    if own and any(own.values()):
        out.append(
            Surface(
                model or "this scenario",
                "this scenario's plan",
                be.ib,
                be.roce,
                own,
                be.by_maturity or {},
            )
        )
    for row in be.by_model or []:
        rows = row.sizes_by_maturity
        if not any(rows.values()):
            continue
        origins = list(dict.fromkeys(p.origin for p in row.plans))
        plan = f"{' or '.join(origins)} plan" if origins else "its plan"
        out.append(Surface(row.model, plan, be.ib, be.roce, rows, row.by_maturity))
    return out


def _phrase(s: Surface, m: str) -> str:
    rows = s.rows.get(m) or []
    if not rows:
        return "not evaluated"
    found = s.break_even.get(m)
    cheaper = [r.gpus for r in rows if r.ib_cheaper]
    largest = rows[-1].gpus
    if found is not None and found == rows[0].gpus:
        return f"at every size evaluated ({rows[0].gpus:,} to {largest:,} GPUs)"
    if found is not None:
        return f"from {found:,} GPUs"
    if cheaper:
        at = " and ".join(f"{n:,}" for n in cheaper).replace(" and ", ", ", len(cheaper) - 2)
        return f"at {at} GPUs but not at every larger size"
    return f"never up to the largest size evaluated ({largest:,} GPUs)"


def words(s: Surface) -> str:
    """``InfiniBand (ib-ndr) is no dearer than RoCE (roce-400g) for the same work: at low
    maturity, from 256 GPUs; at medium and high maturity, never up to the largest size
    evaluated (1,024 GPUs).``"""
    groups: dict[str, list[str]] = {}
    for m in MATURITIES:
        groups.setdefault(_phrase(s, m), []).append(m)
    said = "; ".join(f"at {_maturities(ms)}, {p}" for p, ms in groups.items())
    return f"InfiniBand ({s.ib}) is no dearer than RoCE ({s.roce}) for the same work: {said}."


def _maturities(ms: list[str]) -> str:
    if len(ms) == len(MATURITIES):
        return "every maturity"
    return f"{', '.join(ms[:-1])} and {ms[-1]} maturity" if len(ms) > 1 else f"{ms[0]} maturity"


def _pct(v: float) -> str:
    return f"{v:+.1f} %"


def surface_charts(r: ScenarioReport) -> dict[str, Html]:
    """One heat map per model, keyed ``surface0``, ``surface1``, ...; one colour scale for all."""
    found = surfaces(r.advice, _model(r))
    if not found:
        return {}
    every = [pct for s in found for _, pct in s.margins().values()]
    limit = max([MIN_LIMIT_PCT, *(abs(v) for v in every)])
    columns = sorted({n for s in found for n in s.sizes})  # aligned from one model to the next
    out = {}
    for i, s in enumerate(found):
        heat = charts.Heat(
            f"{s.model} ({s.plan})",
            columns,
            [m for m in MATURITIES if s.rows.get(m)],
            {k: pct for k, (_, pct) in s.margins().items()},
            {m: g for m, g in s.break_even.items() if g is not None},
            lambda v: f"{v:+.1f}%",
        )
        out[f"surface{i}"] = charts.heat_map(
            f"surface{i}",
            heat,
            limit,
            f"{s.ib} minus {s.roce}, % of {s.roce}",
            "GPUs",
            f"break-even surface of {s.model}",
        )
    return out


def _model(r: ScenarioReport) -> str | None:
    w = r.scenario.workload
    return None if w is None else w.model


def surface_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    found = surfaces(a, _model(r))
    if not found:
        note = a.break_even_gpus.note
        return tag("p", f"Not evaluated: {note}.", cls="note")
    said = [f"{s.model} ({s.plan}): {words(s)}" for s in found]
    head = tag("p", said[0].split(": ", 1)[1], cls="verdict") if len(found) == 1 else None
    out = [head if head is not None else bullets(said)]
    s0 = found[0]
    caption = (
        f"Cost for the same work on {s0.ib} minus {s0.roce}, as a share of {s0.roce}'s, at each "
        "size and network maturity: blue where InfiniBand is cheaper, red where RoCE is. The "
        "black bar marks the break-even, the smallest size from which InfiniBand costs no more "
        "at every larger size evaluated; a dash, a size not evaluated for that model (its plan "
        "does not divide or fit it)."
    )
    for i, s in enumerate(found):
        out.append(figure(ch[f"surface{i}"], caption if i == 0 else f"{s.model}: as above."))
        out.append(_table(s))
    if not a.break_even_gpus.by_model:
        out.append(
            tag(
                "p",
                "fabricplan report --break-even-models adds every training model in the "
                "catalog, each with its published training layout where it runs, else a "
                "searched plan (as advise --break-even-models).",
                cls="note",
            )
        )
    return join(out)


def _table(s: Surface) -> Html:
    ms = [m for m in MATURITIES if s.rows.get(m)]
    margins = s.margins()
    cols = [Column("GPUs", numeric=True), *(Column(m, numeric=True) for m in ms)]

    def cell(m: str, n: int) -> str:
        got = margins.get((m, n))
        if got is None:
            return fmt.NONE
        return f"{fmt.money(got[0])} ({_pct(got[1])})"

    body = [[f"{n:,}", *(cell(m, n) for m in ms)] for n in s.sizes]
    be = [s.break_even.get(m) for m in ms]
    body.append(["break-even", *(fmt.gpus(g) if g else "none" for g in be)])
    return table(
        cols,
        body,
        caption=f"{s.model}: {s.ib} minus {s.roce} by size and network maturity",
    )
