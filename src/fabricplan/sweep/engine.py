"""The sweep engine: scenario variants in, one typed :class:`Record` per combination out.

Every evaluation of scenario variants goes through :func:`evaluate_variants`: ``sweep run``'s
grid, and advise's own re-evaluations (break-even sizes, the growth target, RoCE qualities).
The engine
- gives each variant a content hash (the resolved scenario, the catalog's digest, the network
  backend, the level and its options, fabricplan's version) and evaluates each content once:
  equal variants in one call share an evaluation, and results are kept across calls in this
  process (:data:`CACHE`);
- groups the variants that share a cluster and workload into the same chunks, so a worker's
  workload memo answers every money-only variant after the first;
- runs the chunks on an executor (this process, local processes, or Ray) and hands each
  finished chunk's records to ``on_records`` (the store writes them, a progress bar advances)
  before the next.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabricplan.lru import PickledLRU
from fabricplan.sweep.executors import Context, Executor, InProcess, Task, TaskResult
from fabricplan.sweep.records import Record
from fabricplan.sweep.variants import Variant, catalog_digest, combination_key, scenario_hash

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog

# Combinations per chunk: at least MIN_CHUNK (sending a chunk costs little next to evaluating
# it), at most MAX_CHUNK (a killed sweep loses its chunks in flight, and the progress bar moves).
MIN_CHUNK = 8
MAX_CHUNK = 32
# Chunks per worker at least, so that the last ones finish together.
CHUNKS_PER_WORKER = 4


class ResultCache(PickledLRU):
    """Outcomes by content hash, in this process (each caller gets its own copy)."""

    def __init__(self, max_entries: int = 4096) -> None:
        super().__init__(max_entries)


CACHE = ResultCache()


@dataclass(frozen=True)
class Spec:
    """What a sweep computes, apart from its variants."""

    what: str  # step | cost | advise
    catalog: Catalog
    backend: str = "flow"
    seed: int = 0
    detail: bool = False  # keep the full step documents (callers in this process)
    keep_going: bool = False  # an error in one combination is reported, not raised

    def options(self) -> dict[str, Any]:
        return {"seed": self.seed} if self.what == "advise" else {}

    def context(self) -> Context:
        return Context(
            self.catalog, self.backend, self.what, self.seed, self.detail, self.keep_going
        )


def _workload_key(v: Variant) -> str:
    """Variants equal in this share every workload evaluation (money does not enter it)."""
    assert v.scenario is not None
    key = v.scenario.model_dump_json(include={"cluster", "workload", "organization"})
    return key if v.positions is None else f"{key}{v.positions}"


def chunks_of(tasks: list[tuple[str, Task]], workers: int) -> list[list[tuple[str, Task]]]:
    """Tasks in chunks, each chunk of one workload: the first combination of a workload pays
    for its evaluation and the others (money only) come from the worker's memo, so a
    workload split over fewer chunks is evaluated by fewer workers."""
    if not tasks:
        return []
    size = math.ceil(len(tasks) / (workers * CHUNKS_PER_WORKER))
    size = max(MIN_CHUNK, min(MAX_CHUNK, size))
    groups: dict[str, list[tuple[str, Task]]] = {}
    for key, task in tasks:
        groups.setdefault(key, []).append((key, task))
    out = []
    for g in groups.values():
        pieces = math.ceil(len(g) / size)
        step = math.ceil(len(g) / pieces)  # near-equal pieces
        out += [g[i : i + step] for i in range(0, len(g), step)]
    return out


def combination_keys(
    variants: Sequence[Variant], spec: Spec, salt: str = ""
) -> dict[int, tuple[str, str | None]]:
    """Each variant's (combination key, content hash); a skipped variant has no content."""
    digest = catalog_digest(spec.catalog)
    out = {}
    for v in variants:
        content = (
            None
            if v.scenario is None
            else scenario_hash(
                v.scenario, digest, spec.backend, spec.what, spec.options(), v.positions
            )
        )
        out[v.index] = (combination_key(v.point, f"{salt}:{content or v.skipped}"), content)
    return out


def evaluate_variants(
    variants: Iterable[Variant],
    spec: Spec,
    *,
    executor: Executor | None = None,
    salt: str = "",
    done: Iterable[str] = (),
    on_records: Callable[[list[Record]], None] | None = None,
) -> list[Record]:
    """A record per variant, in variant order, except those whose combination key is in
    ``done`` (already stored). ``salt`` makes the keys one sweep's (its base scenario and
    settings); ``on_records`` gets each batch of records as it is finished."""
    executor = executor or InProcess()
    variants = list(variants)
    keys = combination_keys(variants, spec, salt)
    done = set(done)
    out: dict[int, Record] = {}
    todo: dict[str, list[Variant]] = {}  # content hash -> variants that evaluate it
    batch: list[Record] = []
    for v in variants:
        combo, content = keys[v.index]
        if combo in done:
            continue
        if content is None:
            batch.append(Record(v.index, v.point, combo, None, skipped=v.skipped))
            continue
        cached = CACHE.get(f"{content}:{spec.detail}")
        if cached is not None:
            outcomes, skipped, at = cached
            batch.append(
                Record(v.index, v.point, combo, content, outcomes, skipped, v.followed, at)
            )
            continue
        todo.setdefault(content, []).append(v)

    def deliver(records: list[Record]) -> None:
        for r in records:
            out[r.index] = r
        if on_records is not None and records:
            on_records(records)

    deliver(batch)
    tasks = [
        (_workload_key(vs[0]), (vs[0].index, vs[0].scenario, vs[0].positions))
        for vs in todo.values()
    ]
    by_first = {vs[0].index: vs for vs in todo.values()}
    chunks = chunks_of(tasks, max(1, executor.workers))  # type: ignore[arg-type]
    plain = [[task for _, task in c] for c in chunks]
    results: Iterable[list[TaskResult]] = executor.map(spec.context(), plain)
    for found in results:
        records = []
        for index, outcomes, skipped, at, error in found:
            first = by_first[index]
            content = keys[index][1]
            assert content is not None
            if error is None:  # an error is retried next time, never remembered
                CACHE.put(f"{content}:{spec.detail}", (outcomes or (), skipped, at))
            for v in first:
                records.append(
                    Record(
                        v.index,
                        v.point,
                        keys[v.index][0],
                        content,
                        tuple(outcomes or ()),
                        skipped,
                        v.followed,
                        at,
                        error,
                    )
                )
        deliver(records)
    return [out[i] for i in sorted(out)]


def evaluate_scenarios(
    variants: Sequence[Variant], cat: Catalog, backend: Any, *, what: str = "step"
) -> list[Record]:
    """In this process, with the full step documents: for advise's own re-evaluations."""
    spec = Spec(what, cat, backend.name, detail=True)
    return evaluate_variants(variants, spec)
