"""Answers kept by what was asked: the same scenario, overrides and operation are computed once.

Every operation is a pure function of its request (the catalog is fixed while the server runs),
so an answer can be reused for an identical request. Keys are SHA-256 digests of the operation
and the request's canonical JSON (and an upload's bytes); values are the response bodies as
sent. The cache is bounded by entries and bytes, oldest use evicted first. Requests that arrive
while the same one is being computed wait for it instead of computing it again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

# Entries and bytes kept: an `advise` answer is about 50 KB, a long `collective` table a few
# hundred; 256 entries within 64 MiB keep a session's edits and a few people's.
MAX_ENTRIES = 256
MAX_BYTES = 64 * 2**20


class Answer(NamedTuple):
    """A response as sent: status, body and media type."""

    status: int
    body: bytes
    media_type: str = "application/json"


def request_key(operation: str, request: Any, *extra: bytes) -> str:
    """A digest of what determines the answer."""
    h = hashlib.sha256(operation.encode())
    h.update(b"\0")
    h.update(json.dumps(request, sort_keys=True, separators=(",", ":")).encode())
    for part in extra:
        h.update(b"\0")
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


class AnswerCache:
    """A thread-safe LRU of answers by key, with single-flight computation."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[str, Answer] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}
        self.hits = self.misses = 0

    def peek(self, key: str) -> Answer | None:
        """The answer kept for ``key``, if there is one (without computing it)."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                self.hits += 1
            return found

    def get_or_compute(self, key: str, compute: Callable[[], Answer]) -> Answer:
        """The answer for ``key``: kept, or computed by ``compute`` (once, however many ask at
        the same time). Answers other than 200 and 422 are not kept."""
        while True:
            with self._lock:
                found = self._items.get(key)
                if found is not None:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return found
                running = self._running.get(key)
                if running is None:
                    self._running[key] = threading.Event()
                    self.misses += 1
                    break
            running.wait()  # another thread is computing it; then look again
        try:
            answer = compute()
            if answer.status in (200, 422):
                self._put(key, answer)
            return answer
        finally:
            with self._lock:
                self._running.pop(key).set()

    def _put(self, key: str, answer: Answer) -> None:
        size = len(answer.body)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = answer
            self._bytes += size
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old.body)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
