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

import dataclasses
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fabricplan.ops import BadInput, jsonable, range_message

if TYPE_CHECKING:
    import pandas

    from fabricplan.advise import Advice
    from fabricplan.catalog import Catalog
    from fabricplan.collectives import CollectiveTable
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.planning.scenario import FabricSearch
    from fabricplan.planning.search import Candidate
    from fabricplan.scenario import Scenario
    from fabricplan.scenario.errors import Problem
    from fabricplan.sweep.grid import Axis
    from fabricplan.sweep.records import Record, StepOutputs
    from fabricplan.sweep.run import Summary
    from fabricplan.topology import FabricDesign
    from fabricplan.workload import FabricResult

__all__ = [
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

Congestion = Literal["flow", "closed-form", "none"]


class InputError(BadInput):
    """Input fabricplan cannot use: what the command line reports with exit code 2. ``message``
    is the command's message; ``problems`` lists each field's problem where there are some (a
    scenario's or a grid's), each with ``field``, ``message`` and ``value``. A ``ValueError``."""

    def __init__(self, message: str, problems: Iterable[Problem] = ()) -> None:
        super().__init__(message, problems)

    @classmethod
    def of(cls, exc: BadInput) -> InputError:
        return cls(exc.message, exc.problems)

    def __str__(self) -> str:
        return self.message + "".join(f"\n  - {p}" for p in self.problems)


# --- scenarios -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """What a scenario was loaded from: its data with the overrides applied, before the defaults
    are resolved (a sweep varies this, so that dp and the batch follow a swept size), the name
    a file gives it, and the catalog it was checked against."""

    data: dict[str, Any]
    name: str | None
    catalog: Catalog


# Scenarios :func:`load` returned, by identity, while they live.
_SOURCES: dict[int, tuple[weakref.ref[Any], _Source]] = {}


def _remember(sc: Scenario, source: _Source) -> None:
    key = id(sc)
    _SOURCES[key] = (weakref.ref(sc, lambda _r: _SOURCES.pop(key, None)), source)


def _source_of(sc: Scenario) -> _Source | None:
    found = _SOURCES.get(id(sc))
    if found is None or found[0]() is not sc:
        return None
    return found[1]


def _catalog(catalog: Catalog | str | Path | None) -> Catalog:
    from fabricplan.ops.options import catalog_with

    if catalog is None or isinstance(catalog, str | Path):
        try:
            return catalog_with(catalog)
        except BadInput as exc:
            raise InputError.of(exc) from None
    return catalog


def _is_path(source: str | Path) -> bool:
    if isinstance(source, Path):
        return True
    if "\n" in source or ":" in source.split("/")[-1].split("\\")[-1]:
        return False
    if source.strip().endswith((".yaml", ".yml")):
        return True
    try:
        return Path(source).is_file()
    except (OSError, ValueError):  # a name too long to be a path, a NUL byte
        return False


def load(
    source: str | Path | Mapping[str, Any],
    set: Iterable[str] = (),  # named as the command line's --set
    catalog: Catalog | str | Path | None = None,
) -> Scenario:
    """A validated scenario with every default resolved, as ``step``, ``advise`` and the other
    commands read it.

    ``source`` is a scenario file's path, its YAML text, or its data (a mapping). ``set`` lists
    overrides as ``--set`` takes them (``["cluster.gpus=1024", "workload.parallel.tp=4"]``).
    ``catalog`` is a catalog, or a catalog file to layer on the default one (as ``--catalog``).
    Raises :class:`InputError` with every problem found, as ``scenario check`` lists them."""
    from fabricplan.inputs import read_user_text
    from fabricplan.ops import scenario_problems_message
    from fabricplan.ops.scenario import scenario_from
    from fabricplan.scenario import ScenarioError, load_scenario, scenario_from_data
    from fabricplan.scenario.load import MAX_SCENARIO_BYTES
    from fabricplan.scenario.overrides import apply_overrides
    from fabricplan.scenario.yaml_io import parse_yaml

    cat = _catalog(catalog)
    overrides = [str(o) for o in set]
    name = None
    if isinstance(source, Mapping):
        origin = "scenario"
        try:
            sc = scenario_from_data(dict(source), overrides=overrides, catalog=cat, origin=origin)
        except ScenarioError as exc:
            msg = scenario_problems_message(origin, len(exc.problems))
            raise InputError(msg, exc.problems) from None
        data = apply_overrides(dict(source), overrides, origin)
    elif _is_path(source):
        path = Path(source)
        origin, name = str(path), path.stem
        try:
            sc = load_scenario(path, overrides=overrides, catalog=cat)
        except ScenarioError as exc:
            msg = scenario_problems_message(origin, len(exc.problems))
            raise InputError(msg, exc.problems) from None
        data = apply_overrides(
            parse_yaml(read_user_text(path, MAX_SCENARIO_BYTES)), overrides, origin
        )
    else:
        origin = "scenario"
        try:
            sc = scenario_from(str(source), overrides, cat, origin=origin)
        except BadInput as exc:
            raise InputError.of(exc) from None
        data = apply_overrides(parse_yaml(str(source)), overrides, origin)
    _remember(sc, _Source(data, name, cat))
    return sc


def _scenario(
    scenario: Scenario | str | Path | Mapping[str, Any], catalog: Catalog | str | Path | None
) -> tuple[Scenario, Catalog, _Source]:
    """The scenario (loaded when given as a path, text or data), the catalog to use (the one
    given, else the one it was loaded with) and its source."""
    from fabricplan.scenario import Scenario

    if not isinstance(scenario, Scenario):
        scenario = load(scenario, catalog=catalog)
    source = _source_of(scenario)
    cat = _catalog(catalog) if catalog is not None or source is None else source.catalog
    if source is None:  # built elsewhere: its resolved fields are its data
        source = _Source(scenario.model_dump(mode="json"), None, cat)
    return scenario, cat, source


def _backend(congestion: str | None) -> NetworkBackend:
    from fabricplan.ops.options import backend_named

    try:
        return backend_named(congestion)
    except BadInput as exc:
        raise InputError.of(exc) from None


def _refused(exc: Exception) -> InputError:
    """The model's refusal of a scenario (a design a fabric cannot build, a plan a backend
    cannot price, a cost it cannot compute): exit 2 on the command line."""
    return InputError(str(exc))


def _fabrics(sc: Scenario, cat: Catalog, fabrics: str | Sequence[str] | None) -> list[str]:
    from fabricplan.ops.step import step_fabrics

    asked = [fabrics] if isinstance(fabrics, str) else list(fabrics or [])
    try:
        return step_fabrics(sc, cat, asked or None)
    except BadInput as exc:
        raise InputError.of(exc) from None


def _frame(rows: list[dict[str, Any]]) -> pandas.DataFrame:
    """Documents as rows, nested mappings flattened to dotted columns (``breakdown.tp_comm_s``),
    lists kept as cells."""
    import pandas as pd

    return pd.json_normalize(rows) if rows else pd.DataFrame()


# --- step ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FabricStep:
    """One fabric's step: the headline figures typed (``outputs``: the sweep's columns), the
    whole ``step --json`` entry (``document``: breakdown, validation, expected run, what is
    not modelled) and the model's own record (``result``)."""

    fabric: str
    outputs: StepOutputs
    document: dict[str, Any] = dataclasses.field(repr=False)
    result: FabricResult = dataclasses.field(repr=False)

    @property
    def breakdown(self) -> dict[str, float]:
        """The step by part, seconds (``compute_s``, ``tp_comm_s``, ``bubble_s``, ...)."""
        return dict(self.document.get("breakdown") or {})


class _PerFabric:
    """Results with one entry per fabric: iterate them, index by position or fabric id."""

    fabrics: tuple[Any, ...]

    def _fabric_of(self, item: Any) -> str:
        return str(item.fabric)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fabrics)

    def __len__(self) -> int:
        return len(self.fabrics)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            for item in self.fabrics:
                if self._fabric_of(item) == key:
                    return item
            known = ", ".join(self._fabric_of(i) for i in self.fabrics)
            raise KeyError(f"no fabric {key!r} here; these have {known}")
        return self.fabrics[key]


@dataclass(frozen=True)
class StepResult(_PerFabric):
    """``step``'s answer: a :class:`FabricStep` per fabric, in the scenario's order."""

    fabrics: tuple[FabricStep, ...]
    congestion_backend: str

    def document(self) -> list[dict[str, Any]]:
        """What ``fabricplan step --json`` prints."""
        return jsonable([f.document for f in self.fabrics])

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric; columns as ``step --json`` names them, nested ones dotted
        (``breakdown.dp_comm_s``, ``validation.inside``, ``expected_run.goodput``)."""
        return _frame([f.document for f in self.fabrics])


def step(
    scenario: Scenario | str | Path | Mapping[str, Any],
    fabrics: str | Sequence[str] | None = None,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
) -> StepResult:
    """Step time, throughput, MFU, time-to-train and its breakdown per fabric (serving: TTFT,
    ITL and token rates), as ``fabricplan step``.

    ``fabrics``: catalog fabric ids to evaluate instead of the scenario's. ``congestion``:
    ``"flow"`` (the default), ``"closed-form"`` or ``"none"``, as ``--congestion``."""
    from fabricplan.ops.step import step_document
    from fabricplan.sweep.records import StepOutputs, pick
    from fabricplan.workload import WorkloadError, evaluate_scenario

    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    names = _fabrics(sc, cat, fabrics)
    try:
        found = evaluate_scenario(sc, cat, names, backend=backend)
    except WorkloadError as exc:
        raise _refused(exc) from exc
    out = []
    for r in found:
        doc = step_document(r, sc, cat, backend)
        out.append(FabricStep(r.fabric, pick(StepOutputs, doc), doc, r))
    return StepResult(tuple(out), backend.name)


# --- plan ----------------------------------------------------------------------------------

# The roles of a plan in :meth:`PlanResult.to_frame`, in row order per fabric.
PLAN_ROLES = ("best", "alternative", "faster_but_does_not_fit", "scenario_plan")


@dataclass(frozen=True)
class PlanResult(_PerFabric):
    """``plan``'s answer: the plan search on each fabric (``fabrics``: the planning package's
    ``FabricSearch``, with ``.result`` the best plan, the runners-up and the faster plans that
    do not fit, and ``.scenario_plan`` the scenario's own plan priced the same way)."""

    fabrics: tuple[FabricSearch, ...]
    congestion_backend: str

    def _fabric_of(self, item: Any) -> str:
        return str(item.result.fabric)

    @property
    def best(self) -> dict[str, Candidate | None]:
        """The fastest fitting plan per fabric (None where none fits)."""
        return {f.result.fabric: f.result.best for f in self.fabrics}

    def document(self) -> list[dict[str, Any]]:
        """What ``fabricplan plan --json`` prints."""
        from fabricplan.ops.plan import plan_document

        return jsonable([plan_document(f, _backend(self.congestion_backend)) for f in self.fabrics])

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric and plan: ``role`` is best, alternative, faster_but_does_not_fit
        or scenario_plan, ``rank`` its place among its role's; then the plan's columns as
        ``plan --json`` names them (``tp`` ... ``fits``, ``relative_throughput``,
        ``breakdown.*_s``) and ``why``, the reasons it loses as one text."""
        rows = []
        for doc in self.document():
            lists = {
                "best": [doc["best"]] if doc["best"] else [],
                "alternative": doc["alternatives"],
                "faster_but_does_not_fit": doc["faster_but_does_not_fit"],
                "scenario_plan": [doc["scenario_plan"]],
            }
            for role in PLAN_ROLES:
                for rank, p in enumerate(lists[role]):
                    why = "; ".join(w["text"] for w in p.get("why", []))
                    plan = {k: v for k, v in p.items() if k != "why"}
                    head = {"fabric": doc["fabric"], "role": role, "rank": rank}
                    rows.append({**head, **plan, "why": why})
        return _frame(rows)


def plan(
    scenario: Scenario | str | Path | Mapping[str, Any],
    top: int = 5,
    fabrics: str | Sequence[str] | None = None,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
) -> PlanResult:
    """The fastest training plan that fits on each fabric, from every plan of the space, with
    the best of the next ``top`` layouts and why each loses, as ``fabricplan plan``."""
    from fabricplan.planning import search_scenario
    from fabricplan.workload import WorkloadError

    if not isinstance(top, int) or not 0 <= top <= 100:
        raise InputError(f"top: {range_message(top, 0, 100)}")
    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    names = _fabrics(sc, cat, fabrics)
    try:
        found = search_scenario(sc, cat, names, backend=backend, top=top)
    except WorkloadError as exc:
        raise _refused(exc) from exc
    return PlanResult(tuple(found), backend.name)


# --- advise --------------------------------------------------------------------------------


def advise(
    scenario: Scenario | str | Path | Mapping[str, Any],
    seed: int = 0,
    break_even: bool = True,
    by_model: bool = False,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
    tick: Callable[[str], None] | None = None,
) -> Advice:
    """The recommendation, as ``fabricplan advise``: the advise package's ``Advice``, whose
    ``to_dict()`` is ``advise --json`` (``recommendation``, ``fabrics``, ``break_even_gpus``,
    ``sensitivity``, ``uncertainty``, ``questions``, ``notes``). ``seed`` seeds the Monte
    Carlo; ``by_model`` adds every catalog model's break-even (``tick`` after each)."""
    from fabricplan.advise import advise as _advise
    from fabricplan.cost import CostError
    from fabricplan.workload import WorkloadError

    if not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed: {range_message(seed, 0)}")
    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    try:
        return _advise(
            sc, cat, backend=backend, seed=seed, break_even=break_even, by_model=by_model, tick=tick
        )
    except (WorkloadError, CostError) as exc:
        raise _refused(exc) from exc


def _advice_frame(a: Advice) -> pandas.DataFrame:
    """One row per fabric, columns as ``advise --json``'s ``fabrics`` entries, and
    ``recommended``: this fabric is the recommendation."""
    rows = jsonable(a.to_dict())["fabrics"]
    pick = a.recommendation.get("fabric")
    return _frame([{**r, "recommended": r["fabric"] == pick} for r in rows])


# --- topology and collective ---------------------------------------------------------------


@dataclass(frozen=True)
class TopologyResult(_PerFabric):
    """``topology``'s answer: the topology package's ``FabricDesign`` per fabric."""

    fabrics: tuple[FabricDesign, ...]

    def document(self) -> dict[str, Any]:
        """What ``fabricplan topology --json`` prints (one design, or ``{"designs": [...]}``)."""
        from fabricplan.ops.topology import topology_document

        return jsonable(topology_document(list(self.fabrics)))

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric; columns as ``topology --json`` names them, nested ones dotted
        (``switches.leaf``, ``cost_usd.total``)."""
        return _frame([d.to_dict() for d in self.fabrics])


def topology(
    scenario: Scenario | str | Path | Mapping[str, Any] | None = None,
    *,
    gpus: int | None = None,
    gpu: str | None = None,
    design: str | None = None,
    fabric: str | None = None,
    switch: str | None = None,
    oversubscription: float | tuple[float, float] | str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    cable_lengths: Mapping[str, float] | None = None,
    compatible_optics: bool | None = None,
    catalog: Catalog | str | Path | None = None,
) -> TopologyResult:
    """The fabric designs for a cluster, as ``fabricplan topology``: from the scenario, the
    keywords, or both (keywords win). ``oversubscription``: the leaf's ratio, or (leaf, spine);
    ``cable_lengths``: metres per tier (``{"node_leaf": 3}``)."""
    from fabricplan.ops.topology import design_fabrics

    sc, cat = None, _catalog(catalog)
    if scenario is not None:
        sc, cat, _ = _scenario(scenario, catalog)
    if isinstance(oversubscription, tuple | list):
        oversubscription = ",".join(str(v) for v in oversubscription)
    elif oversubscription is not None:
        oversubscription = str(oversubscription)
    lengths = [f"{k}={v}" for k, v in (cable_lengths or {}).items()]
    if gpus is not None:
        _within("gpus", gpus, 1)
    try:
        designs = design_fabrics(
            gpus=gpus,
            gpu=gpu,
            design=design,
            fabric=fabric,
            switch=switch,
            oversubscription=oversubscription,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            cable_length=lengths,
            compatible_optics=compatible_optics,
            scenario=sc,
            catalog=cat,
        )
    except BadInput as exc:
        raise InputError.of(exc) from None
    return TopologyResult(tuple(designs))


def _within(name: str, value: Any, low: float, high: float | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name}: must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        raise InputError(f"{name}: {range_message(value, low, high)}")


def collective(
    op: str = "all_reduce",
    scenario: Scenario | str | Path | Mapping[str, Any] | None = None,
    *,
    sizes: str | Sequence[int | str] | None = None,
    min_size: str | int = "8",
    max_size: str | int = "16G",
    factor: float = 2.0,
    gpu: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    fabric: str | None = None,
    hops: int | None = None,
    sharp: bool = False,
    algo: str | None = None,
    proto: str | None = None,
    min_ctas: int | None = None,
    max_ctas: int | None = None,
    catalog: Catalog | str | Path | None = None,
) -> CollectiveTable:
    """The nccl-tests table a cluster should produce, as ``fabricplan collective``: the
    collectives package's ``CollectiveTable`` (``.rows``: size, time, algbw, busbw, NCCL's
    algorithm and protocol; ``to_dict()`` is ``collective --json``). ``sizes`` lists sizes
    (bytes, or ``"64M"``); without it, ``min_size`` to ``max_size`` by ``factor``."""
    from fabricplan.collectives.busbw import resolve_op
    from fabricplan.collectives.nccl_constants import MAX_CTAS
    from fabricplan.ops.cluster import (
        MAX_GPUS_PER_NODE,
        MAX_HOPS,
        MAX_NICS_PER_NODE,
        MAX_NODES,
        comm_system,
        size_list,
    )
    from fabricplan.ops.collective import collective_table

    for name, value, hi in (
        ("nodes", nodes, MAX_NODES),
        ("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE),
        ("nics_per_node", nics_per_node, MAX_NICS_PER_NODE),
        ("hops", hops, MAX_HOPS),
        ("min_ctas", min_ctas, MAX_CTAS),
        ("max_ctas", max_ctas, MAX_CTAS),
    ):
        _within(name, value, 1, hi)
    if sizes is not None and not isinstance(sizes, str):
        sizes = ",".join(str(s) for s in sizes)
    try:
        op = resolve_op(op)
        size_values = size_list(sizes, str(min_size), str(max_size), factor)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    sc, cat = None, _catalog(catalog)
    if scenario is not None:
        sc, cat, _ = _scenario(scenario, catalog)
    try:
        system = comm_system(
            gpu=gpu,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            fabric=fabric,
            hops=hops,
            sharp=sharp,
            scenario=sc,
            catalog=cat,
        )
        return collective_table(
            system, op, size_values, algo=algo, proto=proto, min_ctas=min_ctas, max_ctas=max_ctas
        )
    except BadInput as exc:
        raise InputError.of(exc) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _collective_frame(t: CollectiveTable) -> pandas.DataFrame:
    """One row per size: ``op``, ``nranks``, then ``collective --json``'s row columns."""
    doc = t.to_dict()
    return _frame([{"op": doc["op"], "nranks": doc["nranks"], **r} for r in doc["rows"]])


# --- sweep ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepResult:
    """A sweep's answer: the engine's typed ``Record`` per combination evaluated in this call
    (``records``; each with its swept ``point`` and an ``Outcome`` per fabric, whose
    ``outputs`` are typed per level, or why it was skipped), the grid's axes, the level, the
    summary ``sweep run --json`` prints, and the DuckDB file when one was written."""

    records: tuple[Record, ...]
    axes: tuple[Axis, ...]
    what: str
    summary: Summary
    out: Path | None = None

    def document(self) -> dict[str, Any]:
        """What ``fabricplan sweep run --json`` prints (for a sweep not stored, ``out`` is
        None)."""
        doc = jsonable(self.summary.to_dict())
        if self.out is None:
            doc["out"] = None
        return doc

    def to_frame(self) -> pandas.DataFrame:
        """One row per combination and fabric (one, without a fabric, per skipped combination),
        in grid order, with the store's columns: ``combination``, ``combination_index``, each
        swept key (``cluster.gpus``), ``fabric``, ``status``, ``reason``, ``followed``, the
        level's outputs, ``what``, ``fabricplan_version``, ``scenario_hash``, ``time``. A
        stored sweep is read back from its file, so a resumed one has every row."""
        import pandas as pd

        from fabricplan.sweep.store import columns, load, rows_of

        if self.out is not None:
            return load(self.out)
        names = [n for n, _ in columns(self.axes, self.what)]
        rows = [row for r in self.records for row in rows_of(r, self.axes, self.what)]
        frame = pd.DataFrame(rows, columns=names)
        return frame.sort_values(["combination_index", "fabric"], kind="stable").reset_index(
            drop=True
        )


def _axes(grid: Mapping[str, Any] | Sequence[str] | str) -> list[Axis]:
    from fabricplan.sweep.grid import GridError, axis_of, check_grid, parse_axis, parse_grid

    try:
        if isinstance(grid, str):
            return parse_grid([grid])
        if not isinstance(grid, Mapping):
            return parse_grid([str(g) for g in grid])
        axes, problems = [], []
        for key, values in grid.items():
            try:
                if isinstance(values, str):  # "256..8192:x2", "256,512"
                    axes.append(parse_axis(f"{key}={values}"))
                else:
                    many = isinstance(values, Iterable) and not isinstance(values, Mapping)
                    axes.append(axis_of(str(key), list(values) if many else [values]))
            except GridError as exc:
                problems += exc.problems
        if not grid:
            return parse_grid([])
        return check_grid(axes, problems)
    except GridError as exc:
        n = len(exc.problems)
        raise InputError(f"--grid: {n} problem{'s' if n != 1 else ''}", exc.problems) from None


def sweep(
    scenario: Scenario | str | Path | Mapping[str, Any],
    grid: Mapping[str, Any] | Sequence[str] | str,
    what: Literal["step", "cost", "advise"] = "step",
    engine: Literal["local", "ray"] = "local",
    jobs: int | None = None,
    out: str | Path | None = None,
    *,
    address: str | None = None,
    seed: int = 0,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Every combination of ``grid`` evaluated on the scenario, as ``fabricplan sweep run``.

    ``grid`` maps each swept key to its values (``{"cluster.gpus": [256, 512, 1024]}``, or a
    ``--grid`` text as the value: ``{"cluster.gpus": "256..8192:x2"}``), or lists ``--grid``
    specifications (``["cluster.gpus=256,512", "costs.gpu_hour_price=2..4:+0.5"]``). Fields
    that depend on a swept one follow it (dp, the growth target); a combination that is still
    not a scenario is skipped with the reason. A scenario from :func:`load` is swept from its
    file's data, as the command does; one built elsewhere from its resolved fields.

    ``what``: ``step``, ``cost`` or ``advise`` (``seed``: advise's Monte Carlo seed).
    ``engine``: ``local`` (``jobs`` processes, default every core) or ``ray`` (``address``: a
    running cluster). ``out``: a DuckDB file to store the rows in, as the command does (an
    existing one from the same sweep is resumed); without it nothing is written.
    ``progress(done, total)`` is called after each batch. Local workers are new processes that
    import the calling script: in a script, call this under ``if __name__ == "__main__":`` (a
    notebook needs nothing), or give ``jobs=1`` to evaluate in this process."""
    from fabricplan.sweep.engine import Spec, evaluate_variants
    from fabricplan.sweep.executors import make_executor
    from fabricplan.sweep.grid import count
    from fabricplan.sweep.records import WHATS
    from fabricplan.sweep.run import Summary, run_sweep, sweep_salt, variants
    from fabricplan.sweep.store import StoreError

    if what not in WHATS:
        raise InputError(f"--what: unknown level '{what}'; allowed: {', '.join(WHATS)}")
    if engine not in ("local", "ray"):
        raise InputError(f"--engine: unknown engine '{engine}'; allowed: local, ray")
    if address and engine != "ray":
        raise InputError("--address names a Ray cluster: give it with --engine ray")
    _within("jobs", jobs, 1, 4096)
    _within("seed", seed, 0)
    backend = _backend(congestion)
    axes = _axes(grid)
    sc, cat, source = _scenario(scenario, catalog)
    if engine == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise InputError("--engine ray needs Ray: pip install 'fabricplan[ray]'")
    name = source.name or sc.name
    spec = Spec(what, cat, backend.name, seed)
    executor = make_executor(engine, jobs, address)
    got: list[Record] = []
    try:
        if out is not None:
            summary = run_sweep(
                source.data,
                axes,
                spec,
                Path(out),
                executor,
                name=name,
                engine=engine,
                on_progress=progress,
                on_records=got.extend,
            )
        else:
            total = count(axes)
            summary = Summary("", total, engine=engine)
            done = [0]

            def batch(records: list[Record]) -> None:
                done[0] += len(records)
                if progress is not None:
                    progress(done[0], total)

            vs = variants(source.data, axes, cat, name)
            salt = sweep_salt(source.data, spec)
            got = evaluate_variants(vs, spec, executor=executor, salt=salt, on_records=batch)
            summary.evaluated = len(got)
            summary.skipped = sum(not r.ok for r in got)
            summary.workers = executor.workers or 1
            summary.skipped_examples = [
                {"point": r.point, "reason": r.skipped} for r in got if not r.ok
            ][:10]
    except StoreError as exc:
        raise InputError(str(exc)) from None
    except ConnectionError as exc:  # a Ray address nothing answers at
        raise InputError(f"--address: {exc}") from None
    got.sort(key=lambda r: r.index)
    return SweepResult(tuple(got), tuple(axes), what, summary, None if out is None else Path(out))


def load_sweep(path: str | Path) -> pandas.DataFrame:
    """A stored sweep's rows (``sweep run``'s DuckDB file) as a DataFrame, in grid order, as
    ``sweep export`` writes them. Raises :class:`InputError` for a file that is not one."""
    from fabricplan.sweep.store import StoreError, load

    try:
        return load(Path(path))
    except StoreError as exc:
        raise InputError(str(exc)) from None


# --- any result ----------------------------------------------------------------------------


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
