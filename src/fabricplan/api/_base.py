"""What the front door's modules share: its error, the scenario's remembered source, the
checks of simple arguments, and DataFrames from documents."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fabricplan.ops import BadInput, range_message

if TYPE_CHECKING:
    import pandas

    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.scenario import Scenario
    from fabricplan.scenario.errors import Problem


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


def _within(name: str, value: Any, low: float, high: float | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name}: must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        raise InputError(f"{name}: {range_message(value, low, high)}")
