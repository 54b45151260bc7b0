"""The operations behind the commands, as plain functions: inputs in, the JSON documents the
commands print with ``--json`` out, bad input raised as :class:`BadInput`.

The command line (``fabricplan.cli``) and the web planner (``fabricplan.web``) both call these,
so a figure, a document's shape and an error's wording are the same in either. Nothing here
reads a file or prints: the callers read their inputs (a path, an upload) and word the exit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from fabricplan.scenario.errors import Problem


class BadInput(ValueError):
    """Input an operation cannot use: the message, and each field's problem where there are
    some (a scenario's). The command line exits with code 2; the web planner answers 422."""

    def __init__(self, message: str, problems: Iterable[Problem] = ()) -> None:
        self.message = message
        self.problems = list(problems)
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        """The document ``--json`` prints for bad input."""
        return {"error": self.message, "problems": [p.to_dict() for p in self.problems]}


def jsonable(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no NaN) and keys as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def range_message(value: float, low: float, high: float | None = None) -> str:
    """A number outside its range, in the tool's words: the value, and what is allowed."""
    allowed = f"{low:,} to {high:,}" if high is not None else f"{low:,} or more"
    return f"{value:,} is outside the allowed range, {allowed}"


def scenario_problems_message(origin: str, count: int) -> str:
    """The headline of a scenario's problems: 'FILE: 2 problems in scenario'."""
    return f"{origin}: {count} problem{'s' if count != 1 else ''} in scenario"
