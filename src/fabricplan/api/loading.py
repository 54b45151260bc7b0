"""Scenarios in: a file, YAML text or data, with ``--set`` overrides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricplan.api._base import InputError, _catalog, _is_path, _remember, _Source, _source_of
from fabricplan.ops import BadInput

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.scenario import Scenario


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
