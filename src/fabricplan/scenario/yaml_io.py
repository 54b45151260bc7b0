"""YAML reading that is strict where silent surprises would hurt.

- A key given twice in one mapping is an error (PyYAML would silently keep the last).
- ``1.5e13`` is a number, as in YAML 1.2 (PyYAML's YAML 1.1 rules read it as text).
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class YamlError(ValueError):
    """The text is not valid YAML; the message gives line and column."""


class _StrictLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {key!r} appears twice (first on line {seen[key] + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)
_FLOAT_12 = re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)$")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def parse_yaml(text: str) -> Any:
    """Parse one YAML document with the strict rules above."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = exc.problem or exc.context or "invalid YAML"
        raise YamlError(f"{where}{what}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"invalid YAML: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # constructors can fail on odd scalars (e.g. a timestamp out of range)
        raise YamlError(f"invalid value: {exc}") from None
