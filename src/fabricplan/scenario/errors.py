"""One clear message per problem: the field, the value and what is allowed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fabricplan.inputs import MAX_SHOWN_CHARS, short_repr

_NO_VALUE = object()


def show_value(value: Any) -> str:
    """The value as a message quotes it: bounded in length, and in the work to make it (a value
    built from YAML aliases may stand for billions of elements)."""
    return short_repr(value)


def _small_plain(value: Any) -> bool:
    """A value JSON can carry as it is, and short enough to quote whole."""
    if isinstance(value, float | bool | type(None)):
        return True
    if isinstance(value, int):
        return abs(value) < 10**MAX_SHOWN_CHARS
    return isinstance(value, str) and len(value) <= MAX_SHOWN_CHARS


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
            out["value"] = v if _small_plain(v) else show_value(v)
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
