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
import pickle
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.scenario import Scenario

# Evaluations kept: an entry is a few KB; one `advise` makes about 35.
MAX_ENTRIES = 2048


class EvaluationMemo:
    """A thread-safe LRU of pickled evaluation results."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        # key -> (the catalog, kept alive so that its id is not reused, and the pickled result)
        self._items: OrderedDict[str, tuple[Any, bytes]] = OrderedDict()
        self._lock = threading.Lock()

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

    def get(self, key: str) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
        return pickle.loads(found[1])

    def put(self, key: str, cat: Catalog, result: Any) -> None:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._items[key] = (cat, data)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


MEMO = EvaluationMemo()
