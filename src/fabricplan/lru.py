"""A thread-safe LRU of pickled values, for results kept across calls in one process.

Values are stored pickled, so each caller gets its own copy: nothing a caller changes in what
it got reaches the next. The workload model's memo and the sweep engine's result cache use it.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from typing import Any


class PickledLRU:
    """At most ``max_entries`` values by key, the least recently used evicted first."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        # key -> (an object kept alive with the entry, the pickled value)
        self._items: OrderedDict[str, tuple[Any, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        """A copy of the value kept for ``key``, or None."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
        return pickle.loads(found[1])

    def put(self, key: str, value: Any, keep: Any = None) -> None:
        """Keep ``value`` for ``key``; ``keep`` lives as long as the entry (a key that holds an
        object's id needs the object alive, or the id could be reused)."""
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._items[key] = (keep, data)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
