"""One clear message per problem: the field, the value and what is allowed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_NO_VALUE = object()
_MAX_VALUE_CHARS = 60


def show_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


@dataclass(frozen=True)
class Problem:
    """What is wrong with one field of a scenario."""

    field: str  # dotted path such as "workload.parallel.tp" or "cluster.fabric[1]"
    message: str
    value: Any = _NO_VALUE

    @property
    def has_value(self) -> bool:
        return self.value is not _NO_VALUE

    def __str__(self) -> str:
        got = f" (got {show_value(self.value)})" if self.has_value else ""
        return f"{self.field or '(top level)'}: {self.message}{got}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field": self.field, "message": self.message}
        if self.has_value:
            v = self.value
            out["value"] = v if isinstance(v, str | int | float | bool | type(None)) else repr(v)
        return out


class ScenarioError(ValueError):
    """A scenario could not be loaded; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[Problem], origin: str | None = None) -> None:
        self.problems = list(problems)
        self.origin = origin
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.origin}: " if self.origin else ""
        n = len(self.problems)
        head = f"{where}{n} problem{'s' if n != 1 else ''} in scenario"
        return head + "".join(f"\n  - {p}" for p in self.problems)
