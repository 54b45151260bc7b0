"""``collective``'s table: what nccl-tests should measure on a cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from fabricplan.ops import BadInput

if TYPE_CHECKING:
    from fabricplan.collectives import CollectiveTable, CommSystem


def op_and_sizes(
    op: str, sizes: str | None, min_size: str, max_size: str, factor: float
) -> tuple[str, list[int]]:
    """The collective asked for and its sizes: ``sizes`` (a comma list) or ``min_size`` to
    ``max_size`` by ``factor``. Raises BadInput for an unknown op or a size that is not one."""
    from fabricplan.collectives import resolve_op
    from fabricplan.ops.cluster import size_list

    try:
        return resolve_op(op), size_list(sizes, min_size, max_size, factor)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def collective_table(
    system: CommSystem,
    op: str,
    sizes: list[int],
    *,
    algo: str | None = None,
    proto: str | None = None,
    min_ctas: int | None = None,
    max_ctas: int | None = None,
) -> CollectiveTable:
    """The predicted table for ``op`` at ``sizes``; ``algo`` and ``proto`` limit NCCL's choice
    (comma lists, as NCCL_ALGO and NCCL_PROTO; they replace the fabric's own), the CTA counts
    bound the channels (the fabric's own bound moves with a given one). Raises BadInput for an
    algorithm or protocol NCCL does not have, or a minimum above the maximum."""
    from fabricplan.collectives import predict

    if min_ctas and max_ctas and min_ctas > max_ctas:
        raise BadInput(f"--min-ctas {min_ctas} is above --max-ctas {max_ctas}")
    if min_ctas or max_ctas:
        low, high = min_ctas or system.min_ctas, max_ctas or system.max_ctas
        if min_ctas is None:
            low = min(low, high)
        if max_ctas is None:
            high = max(low, high)
        system = system.with_(min_ctas=low, max_ctas=high)
    try:
        table = predict(
            system,
            op,
            sizes,
            algorithms=algo.split(",") if algo else None,
            protocols=proto.split(",") if proto else None,
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    note = rented_node_note(system)
    return replace(table, warnings=(note,)) if note else table


def rented_node_note(system: CommSystem) -> str | None:
    """A warning where the fabric, rented only, comes on node types (the providers catalog)
    none of which has the NIC count used: A3 High runs GPUDirect-TCPX over 4 NICs, not the H100
    reference node's 8. None where a documented node matches, or none is documented."""
    from fabricplan.catalog.providers import nics_mismatch

    if not system.rented_only:
        return None
    listed = nics_mismatch(system.gpu, system.fabric, system.ports_per_node)
    if listed is None:
        return None
    return (
        f"{system.fabric} with {system.gpu} is rented as {listed}; this table uses "
        f"{system.ports_per_node} NICs a node: set the NICs per node, or predict the provider's "
        "node type (providers --predict)"
    )
