"""A scenario as the commands read it, and ``scenario check``'s document."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.ops import BadInput, scenario_problems_message
from fabricplan.scenario import Scenario, ScenarioError, scenario_from_text, summarize
from fabricplan.scenario.errors import Problem
from fabricplan.scenario.load import MAX_SCENARIO_BYTES


def scenario_from(
    text: str, overrides: Iterable[str], cat: Catalog, *, origin: str = "scenario"
) -> Scenario:
    """The scenario ``text`` (YAML) describes, with the ``--set`` overrides applied; every
    problem raised as one :class:`BadInput`, worded as for a scenario file."""
    if len(text.encode("utf-8", errors="replace")) > MAX_SCENARIO_BYTES:
        problem = Problem(
            "", f"larger than {MAX_SCENARIO_BYTES // 2**20} MiB; a scenario is a few KB"
        )
        raise BadInput(scenario_problems_message(origin, 1), [problem])
    try:
        return scenario_from_text(text, overrides=overrides, catalog=cat, origin=origin)
    except ScenarioError as exc:
        raise BadInput(scenario_problems_message(origin, len(exc.problems)), exc.problems) from None


def check_document(sc: Scenario, cat: Catalog) -> dict[str, Any]:
    """What ``scenario check --json`` prints for a valid scenario."""
    summary = summarize(sc, cat)
    return {"valid": True, "scenario": sc.model_dump(mode="json"), "warnings": summary["warnings"]}


def text_with_overrides(text: str, overrides: Iterable[str]) -> str:
    """A scenario's text as a report shows it: as given, with the --set overrides applied to it
    named at its end."""
    overrides = list(overrides)
    if overrides:
        text += "\n# applied with --set:\n" + "".join(f"#   {o}\n" for o in overrides)
    return text
