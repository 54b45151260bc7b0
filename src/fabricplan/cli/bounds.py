"""Range checks for numeric options, in the tool's own words (the value, and what is allowed):
click's own ``min``/``max`` checks print the library's sentence without the value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from fabricplan.ops import range_message


def within(low: float, high: float | None = None) -> Callable[[Any], Any]:
    """A typer option callback refusing values outside ``low`` .. ``high`` (exit 2); a
    repeatable option's values are checked one by one."""

    def one(value: float) -> None:
        if value < low or (high is not None and value > high):
            raise typer.BadParameter(range_message(value, low, high))

    def check(value: Any) -> Any:
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is not None:
                one(v)
        return value

    return check
