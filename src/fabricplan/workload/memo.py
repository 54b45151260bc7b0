"""Workload evaluations kept across calls in one process, by what determines them.

``advise`` re-runs the workload model a few dozen times (each fabric at the break-even sizes,
at the ends of the latency and goodput ranges, at other RoCE settings); a web planner asked
about the same cluster and workload with other prices or rates runs the very same
evaluations again. An evaluation reads the scenario's cluster, workload and organisation, never
its costs, so it is kept under a digest of everything but the costs, the fabrics, the network
backend (its settings) and, for a variant of the hardware, the variant's name. A result is
stored pickled and each caller gets its own copy: nothing a caller changes reaches the next.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from fabricplan.lru import PickledLRU

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.scenario import Scenario

# Evaluations kept: an entry is a few KB; one `advise` makes about 35.
MAX_ENTRIES = 2048


class EvaluationMemo(PickledLRU):
    """Evaluation results by what determines them."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        super().__init__(max_entries)

    def key(
        self,
        sc: Scenario,
        cat: Catalog,
        fabrics: Sequence[str],
        backend: Any,
        variant: Hashable | None,
    ) -> str:
        h = hashlib.sha256(sc.model_dump_json(exclude={"costs"}).encode())
        h.update(repr((id(cat), tuple(fabrics), repr(backend), variant)).encode())
        return h.hexdigest()


MEMO = EvaluationMemo()
