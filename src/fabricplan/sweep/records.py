"""The typed records a sweep produces: one per combination, with one outcome per fabric.

The outputs are dataclasses per level (``step`` < ``cost`` < ``advise``, each adding fields), so
that the store's columns, the CSV's header and the Python API all come from one definition.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabricplan.workload import FabricResult


@dataclass(frozen=True)
class StepOutputs:
    """The workload model's figures (``fabricplan step``)."""

    kind: str | None = None  # training | inference
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    comm_exposed_fraction: float | None = None
    time_to_train_days: float | None = None
    gpu_hours: float | None = None
    expected_time_to_train_days: float | None = None
    expected_gpu_hours: float | None = None
    goodput: float | None = None
    memory_per_gpu_GB: float | None = None
    ttft_s: float | None = None
    itl_s: float | None = None


@dataclass(frozen=True)
class CostOutputs(StepOutputs):
    """With each fabric's cost (``advise``'s per-fabric money, without its uncertainty)."""

    capex_usd: float | None = None
    capex_network_usd: float | None = None
    opex_usd_per_year: float | None = None
    tco_usd: float | None = None
    cost_per_run_usd: float | None = None
    cost_per_million_output_tokens_usd: float | None = None
    cost_same_work_usd: float | None = None  # the score fabrics are ranked on
    cheapest: bool | None = None  # lowest cost for the same work among the scenario's fabrics


@dataclass(frozen=True)
class AdviseOutputs(CostOutputs):
    """With ``advise``'s answer: the recommendation, its confidence and the break-even."""

    recommended: bool | None = None  # this fabric is the recommendation
    recommendation: str | None = None
    confidence: str | None = None
    p_cheapest: float | None = None  # this fabric's Monte Carlo probability of being cheapest
    cost_indeterminate: bool | None = None
    break_even_gpus: int | None = None


OUTPUTS: dict[str, type[StepOutputs]] = {
    "step": StepOutputs,
    "cost": CostOutputs,
    "advise": AdviseOutputs,
}
WHATS = tuple(OUTPUTS)


def output_columns(what: str) -> list[tuple[str, str]]:
    """(name, kind) of each output of ``what``; kind is int, float, bool or text."""
    hints = typing.get_type_hints(OUTPUTS[what])
    kinds = {int: "int", float: "float", bool: "bool", str: "text"}
    out = []
    for f in dataclasses.fields(OUTPUTS[what]):
        base = next(a for a in typing.get_args(hints[f.name]) if a is not type(None))
        out.append((f.name, kinds[base]))
    return out


@dataclass(frozen=True)
class Outcome:
    """One fabric's result in one combination."""

    fabric: str
    outputs: StepOutputs
    # the workload model's whole record, for callers in this process that need more than the
    # stored columns (advise's break-even); never stored
    detail: FabricResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Record:
    """One combination: its swept values and an outcome per fabric, or why it was skipped."""

    index: int
    point: dict[str, Any]
    combination: str  # identity in the store (swept values and what they evaluate)
    scenario_hash: str | None  # content hash of what was evaluated (None: skipped)
    outcomes: tuple[Outcome, ...] = ()
    skipped: str | None = None
    followed: tuple[str, ...] = ()
    computed_at: float = 0.0  # seconds since the epoch
    # an error that stopped the evaluation (a fault, not a refusal): such a record is not
    # stored, so that running the sweep again retries it
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.error is None


def pick(cls: type[StepOutputs], values: dict[str, Any]) -> StepOutputs:
    """``cls`` from a document's values (the fields it has; the others None)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})
