"""Scenario files in, validated and fully resolved :class:`Scenario` out.

Pipeline: YAML text -> mapping -> ``--set`` overrides -> structural validation (pydantic) ->
catalog and cross-field checks -> defaults resolved from the catalog. Every failure becomes a
:class:`ScenarioError` listing all problems found; nothing else escapes.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fabricplan.catalog import Catalog, count_params, default_catalog
from fabricplan.catalog.providers import node_nics
from fabricplan.inputs import (
    MIB,
    InputTooLarge,
    LimitError,
    describe_error,
    read_user_text,
)
from fabricplan.scenario.checks import catalog_id_problems, check_scenario
from fabricplan.scenario.errors import Problem, ScenarioError
from fabricplan.scenario.models import Cluster, Scenario, Workload
from fabricplan.scenario.overrides import apply_overrides
from fabricplan.scenario.yaml_io import YamlError, parse_yaml

# Chinchilla compute-optimal budget (Hoffmann et al., arXiv 2203.15556): ~20 tokens per parameter.
DEFAULT_TOKENS_PER_PARAM = 20
# Llama 2 pre-training used a 4M-token global batch (Touvron et al., arXiv 2307.09288, Sec. 2.2).
DEFAULT_BATCH_TOKENS = 4 * 2**20
DEFAULT_MAX_SEQ_LEN = 8192
# Largest scenario file read, in bytes. A scenario is a few KB of YAML (the examples are 1-3 KB);
# a megabyte is not a scenario, and refusing it before parsing bounds what a bad file costs.
MAX_SCENARIO_BYTES = 1 * MIB


def _field_path(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _submodel(arg)
            if found is not None:
                return found
    return None


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model that sits at ``loc`` in a scenario."""
    model: type[BaseModel] | None = Scenario
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            continue
        model = _submodel(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _field_info(loc: tuple[Any, ...]) -> Any:
    """The pydantic FieldInfo of the scenario field at ``loc`` (None if there is none)."""
    model: type[BaseModel] | None = Scenario
    info = None
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = _submodel(info.annotation)
    return info


def _range_text(loc: tuple[Any, ...]) -> str:
    """' from 1 to 10,000,000' for a whole-number field with bounds, else ''."""
    info = _field_info(loc)
    bounds: dict[str, Any] = {}
    for meta in getattr(info, "metadata", ()):
        for name in ("gt", "ge", "lt", "le"):
            if getattr(meta, name, None) is not None:
                bounds[name] = getattr(meta, name)
    low = bounds["gt"] + 1 if "gt" in bounds else bounds.get("ge", 0)
    high = bounds["le"] if "le" in bounds else bounds.get("lt", 0) - 1
    return f" from {low:,} to {high:,}" if "le" in bounds or "lt" in bounds else ""


def _message(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"unknown key; allowed here: {', '.join(_allowed_keys(tuple(err['loc'][:-1])))}"
    if kind == "int_parsing_size":
        return f"must be a whole number{_range_text(tuple(err['loc']))}"
    return describe_error(err)


def _structural_problems(exc: ValidationError) -> list[Problem]:
    seen: set[str] = set()
    problems: list[Problem] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        p = Problem(_field_path(loc), _message(err), err.get("input"))
        if err["type"] == "missing":
            p = Problem(p.field, p.message)  # the "input" of a missing key is its parent
        if str(p) not in seen:
            seen.add(str(p))
            problems.append(p)
    return problems


def _default_fabrics(cat: Catalog, gpu_id: str) -> tuple[str, ...]:
    """InfiniBand and RoCE at the reference node's NIC speed: the usual question."""
    return default_fabrics_at(cat, cat.gpu(gpu_id).node.nic_speed_gbps)


def default_fabric(cat: Catalog, gpu_id: str, family: str) -> str:
    """The fabric of ``family`` ("infiniband" or "roce") that a scenario on ``gpu_id`` gets by
    default, or the other family's when the catalog has none of it. Raises UnknownIdError."""
    picks = {cat.fabric(f).family: f for f in _default_fabrics(cat, gpu_id)}
    return picks.get(family) or next(iter(picks.values()))


def default_fabrics_at(cat: Catalog, speed_gbps: float) -> tuple[str, ...]:
    """One shipping InfiniBand and one shipping RoCE fabric for a NIC of ``speed_gbps``: the
    same line rate, else the fastest below it (the NIC runs it), else the slowest above."""
    picks = []
    for fam in ("infiniband", "roce"):
        fabrics = (cat.fabric(i) for i in cat.ids("fabric"))
        rates = {
            f.id: f.line_rate_gbps for f in fabrics if f.family == fam and f.status == "shipping"
        }
        if not rates:
            continue
        below = [i for i, r in rates.items() if r <= speed_gbps]
        pick = max(below, key=rates.__getitem__) if below else min(rates, key=rates.__getitem__)
        picks.append(pick)
    if not picks:
        raise ScenarioError(
            [
                Problem(
                    "cluster.fabric",
                    "the catalog has no shipping InfiniBand "
                    f"or RoCE fabric to default to; name one of "
                    f"{', '.join(cat.ids('fabric'))}",
                )
            ]
        )
    return tuple(picks)


def _resolve_workload(w: Workload, cluster: Cluster, cat: Catalog) -> Workload:
    model = cat.model(w.model)
    p = w.parallel
    dp = cluster.gpus // (p.tp * p.pp * p.cp)
    seq_len = w.seq_len or min(DEFAULT_MAX_SEQ_LEN, model.max_seq_len)
    batch = w.global_batch
    if batch is None:
        step = dp * w.micro_batch
        batch = max(1, math.ceil(DEFAULT_BATCH_TOKENS / seq_len / step)) * step
    tokens = w.tokens
    if tokens is None and w.kind == "training":
        tokens = float(DEFAULT_TOKENS_PER_PARAM * count_params(model).total)
    return w.model_copy(
        update={
            "seq_len": seq_len,
            "global_batch": batch,
            "tokens": tokens,
            "parallel": p.model_copy(update={"dp": dp}),
        }
    )


def _nics_per_fabric(c: Cluster, cat: Catalog, fabrics: tuple[str, ...]) -> dict[str, int] | None:
    """The scenario's own NICs per fabric, and where neither a fabric's entry nor the cluster's
    ``nics_per_node`` is given, each fabric's default node (``node_nics``: a fabric only rented
    comes on the node types that rent it) where it differs from the GPU's reference node."""
    reference = cat.gpu(c.gpu).node.nics_per_node
    out = dict(c.nics_per_fabric or {})
    if c.nics_per_node is None:
        for f in fabrics:
            nics = node_nics(cat, c.gpu, f)
            if f not in out and nics != reference:
                out[f] = nics
    return out or None


def resolve(s: Scenario, cat: Catalog) -> Scenario:
    """Fill every catalog-dependent default. ``s`` must have passed :func:`check_scenario`."""
    node = cat.gpu(s.cluster.gpu).node
    fabrics = s.cluster.fabric or _default_fabrics(cat, s.cluster.gpu)
    cluster = s.cluster.model_copy(
        update={
            "gpus_per_node": s.cluster.gpus_per_node or node.gpus_per_node,
            "nics_per_node": s.cluster.nics_per_node or node.nics_per_node,
            "fabric": fabrics,
            "nics_per_fabric": _nics_per_fabric(s.cluster, cat, fabrics),
        }
    )
    workload = _resolve_workload(s.workload, cluster, cat) if s.workload else None
    return s.model_copy(update={"cluster": cluster, "workload": workload})


def scenario_from_data(
    data: Any,
    *,
    overrides: Iterable[str] = (),
    catalog: Catalog | None = None,
    origin: str | None = None,
    default_name: str | None = None,
) -> Scenario:
    """Validate and resolve a scenario given as plain data (what a YAML file parses to)."""
    cat = catalog or default_catalog()
    if data is None:
        raise ScenarioError(
            [Problem("", "the scenario is empty; it needs at least 'cluster'")], origin
        )
    if not isinstance(data, dict):
        raise ScenarioError(
            [
                Problem(
                    "", "the scenario must be a mapping of sections (cluster, workload, ...)", data
                )
            ],
            origin,
        )
    data = apply_overrides(data, overrides, origin)
    if default_name and "name" not in data:
        data = {"name": default_name, **data}
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = _structural_problems(exc)
        reported = {p.field for p in problems}
        problems += [p for p in catalog_id_problems(data, cat) if p.field not in reported]
        raise ScenarioError(problems, origin) from None
    problems = check_scenario(scenario, cat)
    if problems:
        raise ScenarioError(problems, origin)
    return resolve(scenario, cat)


def load_scenario(
    path: str | Path, *, overrides: Iterable[str] = (), catalog: Catalog | None = None
) -> Scenario:
    """Read, validate and resolve the scenario file at ``path``.

    ``overrides`` are ``a.b=value`` strings (the CLI's ``--set``) applied before validation.
    Raises :class:`ScenarioError` for any problem, including an unreadable file.
    """
    path = Path(path)
    try:
        text = read_user_text(path, MAX_SCENARIO_BYTES)
    except InputTooLarge as exc:
        raise ScenarioError([Problem("", f"{exc}; a scenario is a few KB")], str(path)) from None
    except LimitError as exc:
        raise ScenarioError([Problem("", str(exc))], str(path)) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            [Problem("", f"cannot read file: not UTF-8 text (byte {exc.start + 1})")], str(path)
        ) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ScenarioError([Problem("", f"cannot read file: {reason}")], str(path)) from None
    return scenario_from_text(
        text, overrides=overrides, catalog=catalog, origin=str(path), default_name=path.stem
    )


def scenario_from_text(
    text: str,
    *,
    overrides: Iterable[str] = (),
    catalog: Catalog | None = None,
    origin: str | None = None,
    default_name: str | None = None,
) -> Scenario:
    """Validate and resolve a scenario given as YAML text (a file's contents, or a scenario sent
    to the web planner). Raises :class:`ScenarioError` for any problem."""
    try:
        data = parse_yaml(text)
    except YamlError as exc:
        raise ScenarioError([Problem("", str(exc))], origin) from None
    return scenario_from_data(
        data, overrides=overrides, catalog=catalog, origin=origin, default_name=default_name
    )
