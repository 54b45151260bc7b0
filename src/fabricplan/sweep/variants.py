"""A sweep's combinations as scenario variants: each point set on the base scenario, the fields
that depend on a swept one made to follow it, then validated and resolved as a scenario file
is; a combination that is still not a scenario is skipped with the checks' reasons.

Dependent fields (why each follows rather than failing the combination):
- ``workload.parallel.dp`` follows ``cluster.gpus`` (and the model-parallel sizes): a written
  data-parallel size fits one cluster size only, and the plan's intent is "the rest is data
  parallel";
- ``organization.growth.target_gpus`` is at least ``cluster.gpus``: a target below the swept
  size would be refused, and a cluster already at its target has no growth left to judge.
A plan that does not divide the swept size (tp x pp x cp, the global batch) is not adjusted:
that would change the experiment; the combination is skipped with the reason.
"""

from __future__ import annotations

import copy
import hashlib
import json
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricplan import __version__
from fabricplan.catalog import Catalog
from fabricplan.scenario import Scenario, ScenarioError, scenario_from_data
from fabricplan.workload.positions import Positions

# Keys whose change makes a written dp wrong.
_SIZES_DP = ("cluster.gpus", "workload.parallel.tp", "workload.parallel.pp", "workload.parallel.cp")


@dataclass(frozen=True)
class Variant:
    """One combination: its swept values, and the scenario they make or why there is none."""

    index: int  # position in the sweep's order
    point: dict[str, Any]
    scenario: Scenario | None = None
    skipped: str | None = None
    followed: tuple[str, ...] = field(default=())  # "KEY -> VALUE" for each field that followed
    # hardware figures away from the catalog's typical values (advise's sensitivity and Monte
    # Carlo, the claims' latency cases): part of what is evaluated, so of the content hash
    positions: Positions | None = None


def _get(data: Mapping[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def follow(data: dict[str, Any], swept: set[str]) -> list[str]:
    """Make the fields that depend on a swept key follow it (in place); what followed."""
    notes = []
    dp = _get(data, "workload.parallel.dp")
    if swept & set(_SIZES_DP) and "workload.parallel.dp" not in swept and dp not in (None, "auto"):
        _set(data, "workload.parallel.dp", "auto")
        notes.append("workload.parallel.dp -> auto")
    target, gpus = _get(data, "organization.growth.target_gpus"), _get(data, "cluster.gpus")
    growth_swept = "organization.growth.target_gpus" in swept
    if isinstance(target, int) and isinstance(gpus, int) and target < gpus and not growth_swept:
        _set(data, "organization.growth.target_gpus", gpus)
        notes.append(f"organization.growth.target_gpus -> {gpus}")
    return notes


def make_variant(
    index: int,
    point: dict[str, Any],
    base: Mapping[str, Any],
    cat: Catalog,
    default_name: str | None = None,
) -> Variant:
    """The combination ``point`` of ``base`` (scenario data, as a file parses to)."""
    data = copy.deepcopy(dict(base))
    for key, value in point.items():
        _set(data, key, value)
    notes = follow(data, set(point))
    try:
        sc = scenario_from_data(data, catalog=cat, default_name=default_name)
    except ScenarioError as exc:
        return Variant(index, point, skipped="; ".join(map(str, exc.problems)), followed=())
    return Variant(index, point, sc, followed=tuple(notes))


def variant_of(
    index: int,
    point: dict[str, Any],
    build: Callable[[], Scenario | None],
    positions: Positions | None = None,
) -> Variant:
    """A variant a caller builds its own way (advise's sizes): ``build`` returns the scenario,
    None to skip it, or raises ScenarioError (skipped with its problems)."""
    try:
        sc = build()
    except ScenarioError as exc:
        return Variant(index, point, skipped="; ".join(map(str, exc.problems)))
    if sc is None:
        return Variant(index, point, skipped="not a combination this analysis evaluates")
    return Variant(index, point, sc, positions=positions)


# Digests by catalog object: a catalog is immutable, and hashing its entries takes milliseconds.
_DIGESTS: weakref.WeakKeyDictionary[Catalog, str] = weakref.WeakKeyDictionary()


def catalog_digest(cat: Catalog) -> str:
    """What the catalog holds, entry by entry (not which files it came from: a catalog changed
    in memory, as advise's latency and goodput variants are, hashes apart from its files)."""
    found = _DIGESTS.get(cat)
    if found is None:
        h = hashlib.sha256()
        for e in cat:
            h.update(type(e).KIND.encode())
            h.update(e.model_dump_json().encode())
        found = _DIGESTS[cat] = h.hexdigest()
    return found


def scenario_hash(
    sc: Scenario,
    catalog: str,
    backend: str,
    what: str,
    options: Any,
    positions: Positions | None = None,
) -> str:
    """The content hash a result is cached and stored under: the resolved scenario, the
    catalog's digest, the hardware's positions in the catalog's ranges (when not typical), the
    network backend, what is computed (with its options) and the version of fabricplan that
    computed it."""
    doc = {
        "scenario": sc.model_dump(mode="json"),
        "catalog": catalog,
        "backend": backend,
        "what": what,
        "options": options,
        "version": __version__,
    }
    if positions is not None:
        doc["positions"] = positions.to_dict()
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def combination_key(point: Mapping[str, Any], content: str) -> str:
    """A combination's identity in the store: its swept values and what they evaluate (two
    points that resolve to one scenario, say through a followed field, stay two rows)."""
    text = json.dumps({"point": point, "content": content}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
