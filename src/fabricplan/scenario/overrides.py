"""``--set a.b=value`` overrides applied to scenario data before validation."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from fabricplan.inputs import RAISE_LIMITS, scaled
from fabricplan.scenario.errors import Problem, ScenarioError
from fabricplan.scenario.yaml_io import YamlError, parse_yaml

# Most keys a --set path may have. The deepest scenario field is three keys down
# (cluster.topology.oversubscription); eight leaves room and stops a path a thousand keys deep
# from building as many nested sections.
MAX_KEY_DEPTH = 8


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b=value`` into its key path and a YAML-typed value (``8`` is a number,
    ``[ib-ndr, roce-400g]`` a list, anything unparsable plain text)."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(part.strip() for part in path):
        raise ValueError("expected KEY=VALUE with a dotted key, e.g. cluster.gpus=1024")
    if len(path) > scaled(MAX_KEY_DEPTH):
        raise ValueError(
            f"the key has {len(path)} parts; scenario keys have at most {scaled(MAX_KEY_DEPTH)} "
            f"(e.g. cluster.topology.oversubscription); {RAISE_LIMITS}"
        )
    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except YamlError:
        value = raw
    return [p.strip() for p in path], value


def apply_overrides(
    data: dict[str, Any], overrides: Iterable[str], origin: str | None = None
) -> dict[str, Any]:
    """Return a copy of ``data`` with each override applied in order."""
    overrides = list(overrides)
    if not overrides:
        return data
    out = copy.deepcopy(data)
    problems: list[Problem] = []
    for text in overrides:
        try:
            path, value = parse_override(text)
        except ValueError as exc:
            problems.append(Problem("--set", str(exc), text))
            continue
        node: Any = out
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                problems.append(
                    Problem(
                        "--set",
                        f"cannot set {'.'.join(path)}: {where} is a value, not a section",
                        text,
                    )
                )
                break
            node = child
        else:
            node[path[-1]] = value
    if problems:
        raise ScenarioError(problems, origin)
    return out
