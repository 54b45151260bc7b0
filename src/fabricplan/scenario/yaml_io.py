"""YAML reading that is strict where silent surprises would hurt.

- A key given twice in one mapping is an error (PyYAML would silently keep the last). Merge
  keys (``<<: *base``) are read as YAML defines them: the mapping's own keys win.
- ``1.5e13`` is a number, as in YAML 1.2 (PyYAML's YAML 1.1 rules read it as text).
- A document is refused when it nests deeper than :data:`MAX_DEPTH`, or when its aliases
  (``*name``) expand it beyond :data:`MAX_NODES` values: a few hundred bytes of aliases can
  stand for billions of values, and every later step (checks, messages) would walk them.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from fabricplan.inputs import RAISE_LIMITS, scaled

# Deepest nesting of lists and mappings a document may have. A scenario is four levels deep
# (cluster.topology.switch, within the document); 32 leaves room for any list a value takes.
MAX_DEPTH = 32
# Most values (scalars, lists and mappings, each alias counted as what it stands for) a document
# may expand to. A full scenario has about 80; 10,000 still parses in milliseconds.
MAX_NODES = 10_000
# Longest whole number a document may write, in digits: the largest count a scenario takes
# (tokens, ~1e16) has 17; Python refuses more than 4,300 in its own words.
MAX_INT_DIGITS = 30

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlError(ValueError):
    """The text is not valid YAML; the message gives line and column."""


def _limit_error(problem: str, node_or_mark: Any) -> yaml.MarkedYAMLError:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return yaml.constructor.ConstructorError(None, None, problem, mark)


class _StrictLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > scaled(MAX_DEPTH):
                event = self.peek_event()
                raise _limit_error(
                    f"nested more than {scaled(MAX_DEPTH)} levels deep; {RAISE_LIMITS}",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node)
        return node


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand it beyond MAX_NODES values. Each node is sized
    once (aliases share their node), so a bomb costs what its text does."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:  # depth is bounded by MAX_DEPTH
        known = sizes.get(id(node))
        if known is not None:
            return known
        n = 1
        if isinstance(node, yaml.SequenceNode):
            n += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            n += sum(size(k) + size(v) for k, v in node.value)
        sizes[id(node)] = n = min(n, most + 1)  # enough to know it is over
        return n

    most = scaled(MAX_NODES)
    if size(root) > most:
        raise _limit_error(
            f"the document stands for more than {most:,} values once its aliases (*name) "
            f"are expanded; a scenario needs about a hundred ({RAISE_LIMITS})",
            root,
        )


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
    digits = len(str(node.value).lstrip("+-").replace("_", ""))
    if digits > MAX_INT_DIGITS:
        raise _limit_error(f"a whole number of more than {MAX_INT_DIGITS} digits", node)
    return loader.construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)  # type: ignore[arg-type]


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # merged keys may be overridden: not duplicates
            continue
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
