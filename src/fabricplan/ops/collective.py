"""``collective``'s table: what nccl-tests should measure on a cluster."""

from __future__ import annotations

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
        return predict(
            system,
            op,
            sizes,
            algorithms=algo.split(",") if algo else None,
            protocols=proto.split(",") if proto else None,
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from None
