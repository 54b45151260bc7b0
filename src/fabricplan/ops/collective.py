"""``collective``'s table: what nccl-tests should measure on a cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabricplan.collectives import CollectiveTable, CommSystem


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
    (comma lists, as NCCL_ALGO and NCCL_PROTO), the CTA counts bound NVLS channels. Raises
    ValueError for an algorithm or protocol NCCL does not have."""
    from fabricplan.collectives import predict

    if min_ctas or max_ctas:
        system = system.with_(
            min_ctas=min_ctas or system.min_ctas, max_ctas=max_ctas or system.max_ctas
        )
    return predict(
        system,
        op,
        sizes,
        algorithms=algo.split(",") if algo else None,
        protocols=proto.split(",") if proto else None,
    )
