"""``--grid`` specifications: which scenario fields a sweep varies, and over which values.

``KEY=V1,V2,...`` lists the values; ``KEY=START..END:xFACTOR`` steps geometrically from START
while at most END (``cluster.gpus=256..8192:x2``); ``KEY=START..END:+STEP`` steps
arithmetically (``costs.gpu_hour_price=2..4:+0.5``); ``KEY=START..END`` is ``+1``. Each value is
typed and range-checked by the scenario field it sets, so a typo is refused before a single
combination runs, naming the key, the value and what is allowed.
"""

from __future__ import annotations

import itertools
import math
import re
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from fabricplan.inputs import short_repr
from fabricplan.scenario.errors import Problem
from fabricplan.scenario.models import Scenario
from fabricplan.scenario.yaml_io import YamlError, parse_yaml

# Values one key may take, and combinations one sweep may hold: a million combinations of the
# step model alone take hours on a workstation; more is a typo (an extra zero in a range).
MAX_VALUES_PER_KEY = 10_000
MAX_COMBINATIONS = 1_000_000

_RANGE = re.compile(
    r"^\s*(?P<start>[^.:]+(?:\.\d+)?)\s*\.\.\s*(?P<end>[^:]+?)\s*(?::\s*(?P<op>[x+])\s*(?P<step>.+))?$"
)


class GridError(ValueError):
    """A ``--grid`` that cannot be swept; ``problems`` names each key, value and what is allowed."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Axis:
    """One swept key: its dotted path in the scenario and its values, typed by the field."""

    key: str
    values: tuple[Any, ...]
    kind: str  # the stored column's kind: int, float, bool, text


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((m for a in typing.get_args(annotation) if (m := _submodel(a))), None)
    return None


def field_of(key: str) -> Any:
    """The pydantic FieldInfo a dotted scenario key names. Raises GridError for any other key."""
    model: type[BaseModel] | None = Scenario
    info = None
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if model is None or part not in model.model_fields:
            where = ".".join(parts[:depth]) or "the top level"
            allowed = ", ".join(model.model_fields) if model else "nothing (it is a value)"
            raise GridError([Problem(key, f"unknown key; allowed under {where}: {allowed}")])
        info = model.model_fields[part]
        model = _submodel(info.annotation)
    if model is not None:
        raise GridError([Problem(key, "is a section; sweep one of its fields")])
    return info


def _bounds(info: Any) -> tuple[float | None, float | None, bool, bool]:
    """(low, high, low is exclusive, high is exclusive) of a numeric field."""
    lo = hi = None
    lo_open = hi_open = False
    for meta in info.metadata:
        for name in ("gt", "ge", "lt", "le"):
            bound = getattr(meta, name, None)
            if bound is None:
                continue
            if name in ("gt", "ge"):
                lo, lo_open = bound, name == "gt"
            else:
                hi, hi_open = bound, name == "lt"
    return lo, hi, lo_open, hi_open


def _kind(info: Any) -> str:
    args = {info.annotation, *typing.get_args(info.annotation)} - {types.NoneType}
    if bool in args:
        return "bool"
    if int in args and float not in args:
        # int | Literal['auto'] (dp) is text in the store: it holds either
        return "int" if len(args) == 1 else "text"
    if float in args:
        return "float"
    return "text"


def _allowed(info: Any) -> str:
    lo, hi, lo_open, hi_open = _bounds(info)
    if lo is None and hi is None:
        return ""
    low = f"above {lo:,}" if lo_open else f"{lo:,}"
    high = "" if hi is None else (f" to below {hi:,}" if hi_open else f" to {hi:,}")
    return f"{low}{high}" if lo is not None else f"at most {hi:,}"


def check_value(key: str, info: Any, value: Any) -> Any:
    """``value`` as the field takes it; GridError naming the key, value and allowed range."""
    lo, hi, lo_open, hi_open = _bounds(info)
    if isinstance(value, int | float) and not isinstance(value, bool):
        outside = (
            (lo is not None and (value <= lo if lo_open else value < lo))
            or (hi is not None and (value >= hi if hi_open else value > hi))
            or (isinstance(value, float) and not math.isfinite(value))
        )
        if outside:
            msg = f"{short_repr(value)} is outside the allowed range, {_allowed(info)}"
            raise GridError([Problem(key, msg, value)])
    if _kind(info) == "int" and isinstance(value, float):
        if value != int(value):
            raise GridError([Problem(key, f"must be a whole number from {_allowed(info)}", value)])
        value = int(value)
    if tuple in {typing.get_origin(a) for a in typing.get_args(info.annotation)}:
        value = [value] if isinstance(value, str) else value  # one fabric id is a list of one
    annotated = info.annotation
    if info.metadata:
        annotated = typing.Annotated[(annotated, *info.metadata)]
    try:
        typed = TypeAdapter(annotated).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        extra = f"; allowed: {_allowed(info)}" if _allowed(info) else ""
        words = str(err["msg"]).replace("Input should be", "must be")
        raise GridError([Problem(key, f"{words}{extra}", value)]) from None
    if isinstance(typed, tuple):  # a list of fabrics: stored as the list it is
        return list(typed)
    return typed


def _split(text: str) -> list[str]:
    """Split on commas outside brackets, so that ``[ib-ndr, roce-400g]`` stays one value."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _number(key: str, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GridError([Problem(key, f"the range's {what} is not a number", text)]) from None
    if not math.isfinite(value):
        raise GridError([Problem(key, f"the range's {what} must be finite", text)])
    return value


def _tidy(value: float) -> float:
    """A stepped float without its rounding noise (0.30000000000000004 -> 0.3)."""
    return float(f"{value:.12g}")


def range_values(key: str, start: float, end: float, op: str, step: float) -> list[float]:
    """START..END by xFACTOR (geometric) or +STEP (arithmetic), END included when reached."""
    if end < start:
        raise GridError([Problem(key, f"the range ends ({end:g}) below its start ({start:g})")])
    if op == "x":
        if not step > 1:
            raise GridError([Problem(key, "the range's factor must be above 1", step)])
        if start <= 0:
            raise GridError([Problem(key, "a geometric range starts above 0", start)])
        count = math.floor(math.log(end / start) / math.log(step) + 1e-9) + 1
        make = lambda i: start * step**i  # noqa: E731
    else:
        if not step > 0:
            raise GridError([Problem(key, "the range's step must be above 0", step)])
        count = math.floor((end - start) / step + 1e-9) + 1
        make = lambda i: start + i * step  # noqa: E731
    if count > MAX_VALUES_PER_KEY:
        raise GridError(
            [Problem(key, f"the range makes {count:,} values; at most {MAX_VALUES_PER_KEY:,}")]
        )
    return [_tidy(make(i)) for i in range(count)]


def parse_axis(spec: str) -> Axis:
    """One ``--grid`` option as an :class:`Axis`. Raises GridError."""
    key, sep, body = spec.partition("=")
    key = key.strip()
    if not sep or not key or not body.strip():
        raise GridError(
            [Problem("--grid", "expected KEY=V1,V2,... or KEY=START..END:xFACTOR", spec)]
        )
    info = field_of(key)
    kind = _kind(info)
    m = _RANGE.match(body)
    if m and kind in ("int", "float"):
        start, end = _number(key, m["start"], "start"), _number(key, m["end"], "end")
        op, step = (m["op"], _number(key, m["step"], "step")) if m["op"] else ("+", 1.0)
        raw: list[Any] = range_values(key, start, end, op, step)
        if kind == "int":  # a geometric range of whole numbers: each rounded, repeats dropped
            raw = list(dict.fromkeys(round(v) for v in raw))
    else:
        items = [t.strip() for t in _split(body)]
        if any(not t for t in items):
            raise GridError([Problem(key, "has an empty value", body)])
        if len(items) > MAX_VALUES_PER_KEY:
            msg = f"lists {len(items):,} values; at most {MAX_VALUES_PER_KEY:,}"
            raise GridError([Problem(key, msg)])
        raw = []
        for t in items:
            try:
                raw.append(parse_yaml(t))
            except YamlError:
                raw.append(t)
    return _axis(key, info, raw)


def _axis(key: str, info: Any, raw: Sequence[Any]) -> Axis:
    values = [check_value(key, info, v) for v in raw]
    seen: list[Any] = []
    for v in values:
        if v in seen:
            raise GridError([Problem(key, "lists a value twice", v)])
        seen.append(v)
    return Axis(key, tuple(values), _kind(info))


def axis_of(key: str, values: Sequence[Any]) -> Axis:
    """An :class:`Axis` from values already typed (the Python API's ``{key: [values]}``): each
    checked as a ``--grid`` value is. Raises GridError."""
    info = field_of(key)
    if not values:
        raise GridError([Problem(key, "has no values")])
    if len(values) > MAX_VALUES_PER_KEY:
        raise GridError(
            [Problem(key, f"lists {len(values):,} values; at most {MAX_VALUES_PER_KEY:,}")]
        )
    return _axis(key, info, list(values))


def parse_grid(specs: Sequence[str]) -> list[Axis]:
    """Every ``--grid``: each key once, at most MAX_COMBINATIONS combinations. Raises GridError
    with every problem found."""
    axes, problems = [], []
    for spec in specs:
        try:
            axes.append(parse_axis(spec))
        except GridError as exc:
            problems += exc.problems
    if not specs:
        problems.append(Problem("--grid", "give at least one, e.g. --grid cluster.gpus=256,512"))
    return check_grid(axes, problems)


def check_grid(axes: Sequence[Axis], problems: Sequence[Problem] = ()) -> list[Axis]:
    """``axes`` once each key is swept once, no key inside another and at most
    MAX_COMBINATIONS combinations; else GridError with these and ``problems``."""
    axes, problems = list(axes), list(problems)
    keys = [a.key for a in axes]
    for k in sorted({k for k in keys if keys.count(k) > 1}):
        problems.append(Problem(k, "is swept by more than one --grid; list its values in one"))
    for a in axes:
        for b in axes:
            if a.key < b.key and b.key.startswith(a.key + "."):
                problems.append(Problem(b.key, f"lies inside {a.key}, which is swept too"))
    if problems:
        raise GridError(problems)
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_COMBINATIONS:
        raise GridError(
            [Problem("--grid", f"makes {total:,} combinations; at most {MAX_COMBINATIONS:,}")]
        )
    return axes


def points(axes: Sequence[Axis]) -> Iterator[dict[str, Any]]:
    """Every combination, the last key varying fastest (as nested loops in --grid order)."""
    for combo in itertools.product(*(a.values for a in axes)):
        yield dict(zip((a.key for a in axes), combo, strict=True))


def count(axes: Sequence[Axis]) -> int:
    return math.prod(len(a.values) for a in axes)
