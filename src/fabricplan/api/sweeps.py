"""Sweeps: every combination of a grid evaluated on a scenario, stored or not."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fabricplan.api._base import Congestion, InputError, _backend, _within
from fabricplan.api.loading import _scenario
from fabricplan.ops import jsonable

if TYPE_CHECKING:
    import pandas

    from fabricplan.catalog import Catalog
    from fabricplan.scenario import Scenario
    from fabricplan.sweep.grid import Axis
    from fabricplan.sweep.records import Record
    from fabricplan.sweep.run import Summary


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
    spec = Spec(what, cat, backend.name, seed, keep_going=True)
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
            summary.failed = sum(r.error is not None for r in got)
            summary.evaluated = len(got) - summary.failed
            summary.skipped = sum(r.skipped is not None for r in got)
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
