"""The Python front door, for notebooks and scripts: load a scenario, evaluate it, sweep it, search
its plans, get the recommendation; results as typed records and as pandas DataFrames.

>>> from fabricplan import api
>>> sc = api.load("examples/llama3-70b-512-h100.yaml", set=["cluster.gpus=1024"])
>>> steps = api.step(sc)                        # one typed record per fabric
>>> steps["roce-400g"].outputs.step_time_s      # doctest: +SKIP
>>> api.to_frame(steps)                         # one row per fabric, columns as `step --json`
>>> api.sweep(sc, {"cluster.gpus": [256, 512, 1024]}).to_frame()

Every function calls the operations the command line and the web planner call
(:mod:`fabricplan.ops`, the sweep engine, the plan search, ``advise``), so a figure here is the
command's figure, and :func:`document` gives what the command prints with ``--json``. Bad input
raises :class:`InputError` with the command's message and, for a scenario or a grid, every
problem (field, message, value). Importing this module is light: the model, pandas, DuckDB and
Ray are imported by the functions that use them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fabricplan.api._base import Congestion, InputError, _frame
from fabricplan.api.evaluation import (
    PLAN_ROLES,
    FabricStep,
    PlanResult,
    StepResult,
    _advice_frame,
    advise,
    plan,
    step,
)
from fabricplan.api.hardware import TopologyResult, _collective_frame, collective, topology
from fabricplan.api.loading import load
from fabricplan.api.sweeps import SweepResult, load_sweep, sweep
from fabricplan.ops import jsonable

if TYPE_CHECKING:
    import pandas

__all__ = [
    "PLAN_ROLES",
    "Congestion",
    "FabricStep",
    "InputError",
    "PlanResult",
    "StepResult",
    "SweepResult",
    "TopologyResult",
    "advise",
    "collective",
    "document",
    "load",
    "load_sweep",
    "plan",
    "step",
    "sweep",
    "to_frame",
    "topology",
]


def to_frame(results: Any) -> pandas.DataFrame:
    """Any result of this module as a pandas DataFrame: one row per fabric (``step``,
    ``advise``, ``topology``), per fabric and plan (``plan``), per size (``collective``), per
    combination and fabric (``sweep``). Columns are named as the command's ``--json`` names
    them; nested mappings become dotted columns (``breakdown.tp_comm_s``). Also takes the
    workload model's ``FabricResult`` records and lists of documents."""
    from fabricplan.advise import Advice
    from fabricplan.collectives import CollectiveTable

    if isinstance(results, StepResult | PlanResult | TopologyResult | SweepResult):
        return results.to_frame()
    if isinstance(results, Advice):
        return _advice_frame(results)
    if isinstance(results, CollectiveTable):
        return _collective_frame(results)
    if isinstance(results, Sequence) and not isinstance(results, str):
        items = list(results)
        if all(hasattr(r, "to_dict") for r in items):
            return _frame([r.to_dict() for r in items])
        if all(isinstance(r, Mapping) for r in items):
            return _frame([dict(r) for r in items])
    raise TypeError(f"to_frame takes a result of fabricplan.api, not {type(results).__name__}")


def document(results: Any) -> Any:
    """What the command prints with ``--json`` for a result of this module (non-finite numbers
    as None, as JSON has no NaN)."""
    if isinstance(results, StepResult | PlanResult | TopologyResult | SweepResult):
        return results.document()
    if hasattr(results, "to_dict"):
        return jsonable(results.to_dict())
    raise TypeError(f"document takes a result of fabricplan.api, not {type(results).__name__}")
