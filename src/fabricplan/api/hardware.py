"""Topology and collectives: a cluster's fabric designs and its nccl-tests table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricplan.api._base import InputError, _catalog, _frame, _PerFabric, _within
from fabricplan.api.loading import _scenario
from fabricplan.ops import BadInput, jsonable

if TYPE_CHECKING:
    import pandas

    from fabricplan.catalog import Catalog
    from fabricplan.collectives import CollectiveTable
    from fabricplan.scenario import Scenario
    from fabricplan.topology import FabricDesign


@dataclass(frozen=True)
class TopologyResult(_PerFabric):
    """``topology``'s answer: the topology package's ``FabricDesign`` per fabric."""

    fabrics: tuple[FabricDesign, ...]

    def document(self) -> dict[str, Any]:
        """What ``fabricplan topology --json`` prints (one design, or ``{"designs": [...]}``)."""
        from fabricplan.ops.topology import topology_document

        return jsonable(topology_document(list(self.fabrics)))

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric; columns as ``topology --json`` names them, nested ones dotted
        (``switches.leaf``, ``cost_usd.total``)."""
        return _frame([d.to_dict() for d in self.fabrics])


def topology(
    scenario: Scenario | str | Path | Mapping[str, Any] | None = None,
    *,
    gpus: int | None = None,
    gpu: str | None = None,
    design: str | None = None,
    fabric: str | None = None,
    switch: str | None = None,
    oversubscription: float | tuple[float, float] | str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    cable_lengths: Mapping[str, float] | None = None,
    compatible_optics: bool | None = None,
    catalog: Catalog | str | Path | None = None,
) -> TopologyResult:
    """The fabric designs for a cluster, as ``fabricplan topology``: from the scenario, the
    keywords, or both (keywords win). ``oversubscription``: the leaf's ratio, or (leaf, spine);
    ``cable_lengths``: metres per tier (``{"node_leaf": 3}``)."""
    from fabricplan.ops.topology import design_fabrics

    sc, cat = None, _catalog(catalog)
    if scenario is not None:
        sc, cat, _ = _scenario(scenario, catalog)
    if isinstance(oversubscription, tuple | list):
        oversubscription = ",".join(str(v) for v in oversubscription)
    elif oversubscription is not None:
        oversubscription = str(oversubscription)
    lengths = [f"{k}={v}" for k, v in (cable_lengths or {}).items()]
    if gpus is not None:
        _within("gpus", gpus, 1)
    try:
        designs = design_fabrics(
            gpus=gpus,
            gpu=gpu,
            design=design,
            fabric=fabric,
            switch=switch,
            oversubscription=oversubscription,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            cable_length=lengths,
            compatible_optics=compatible_optics,
            scenario=sc,
            catalog=cat,
        )
    except BadInput as exc:
        raise InputError.of(exc) from None
    return TopologyResult(tuple(designs))


def collective(
    op: str = "all_reduce",
    scenario: Scenario | str | Path | Mapping[str, Any] | None = None,
    *,
    sizes: str | Sequence[int | str] | None = None,
    min_size: str | int = "8",
    max_size: str | int = "16G",
    factor: float = 2.0,
    gpu: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    fabric: str | None = None,
    hops: int | None = None,
    sharp: bool = False,
    algo: str | None = None,
    proto: str | None = None,
    min_ctas: int | None = None,
    max_ctas: int | None = None,
    catalog: Catalog | str | Path | None = None,
) -> CollectiveTable:
    """The nccl-tests table a cluster should produce, as ``fabricplan collective``: the
    collectives package's ``CollectiveTable`` (``.rows``: size, time, algbw, busbw, NCCL's
    algorithm and protocol; ``to_dict()`` is ``collective --json``). ``sizes`` lists sizes
    (bytes, or ``"64M"``); without it, ``min_size`` to ``max_size`` by ``factor``."""
    from fabricplan.collectives.nccl_constants import MAX_CTAS
    from fabricplan.ops.cluster import (
        MAX_GPUS_PER_NODE,
        MAX_HOPS,
        MAX_NICS_PER_NODE,
        MAX_NODES,
        ClusterFlags,
        comm_system,
    )
    from fabricplan.ops.collective import collective_table, op_and_sizes

    for name, value, hi in (
        ("nodes", nodes, MAX_NODES),
        ("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE),
        ("nics_per_node", nics_per_node, MAX_NICS_PER_NODE),
        ("hops", hops, MAX_HOPS),
        ("min_ctas", min_ctas, MAX_CTAS),
        ("max_ctas", max_ctas, MAX_CTAS),
    ):
        _within(name, value, 1, hi)
    if sizes is not None and not isinstance(sizes, str):
        sizes = ",".join(str(s) for s in sizes)
    try:
        op, size_values = op_and_sizes(op, sizes, str(min_size), str(max_size), factor)
    except BadInput as exc:
        raise InputError.of(exc) from None
    sc, cat = None, _catalog(catalog)
    if scenario is not None:
        sc, cat, _ = _scenario(scenario, catalog)
    try:
        flags = ClusterFlags(
            gpu=gpu,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            fabric=fabric,
            hops=hops,
            sharp=sharp,
        )
        system = comm_system(flags, scenario=sc, catalog=cat)
        return collective_table(
            system, op, size_values, algo=algo, proto=proto, min_ctas=min_ctas, max_ctas=max_ctas
        )
    except BadInput as exc:
        raise InputError.of(exc) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _collective_frame(t: CollectiveTable) -> pandas.DataFrame:
    """One row per size: ``op``, ``nranks``, then ``collective --json``'s row columns."""
    doc = t.to_dict()
    return _frame([{"op": doc["op"], "nranks": doc["nranks"], **r} for r in doc["rows"]])
