"""``sweep run`` as a function: a base scenario and a grid in, the store filled, a summary out."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricplan import __version__
from fabricplan.catalog import Catalog
from fabricplan.sweep.engine import Spec, combination_keys, evaluate_variants
from fabricplan.sweep.executors import Executor
from fabricplan.sweep.grid import Axis, count, points
from fabricplan.sweep.records import Record
from fabricplan.sweep.store import Store, StoreError
from fabricplan.sweep.variants import Variant, catalog_digest, make_variant

# Skipped combinations a summary lists (the store has them all).
SHOWN_SKIPS = 10


@dataclass
class Summary:
    out: str
    combinations: int
    already_stored: int = 0
    evaluated: int = 0
    skipped: int = 0
    failed: int = 0  # stopped by an error: not stored, retried when the sweep is run again
    rows_written: int = 0
    seconds: float = 0.0
    workers: int = 1
    engine: str = "local"
    skipped_examples: list[dict[str, Any]] = field(default_factory=list)
    failed_examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def sweep_salt(base: Mapping[str, Any], spec: Spec) -> str:
    """What makes one sweep's combination keys its own: the base scenario, catalog, backend,
    level, options and version (the swept values are added per combination)."""
    doc = {
        "base": base,
        "catalog": catalog_digest(spec.catalog),
        "backend": spec.backend,
        "what": spec.what,
        "options": spec.options(),
        "version": __version__,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def variants(
    base: Mapping[str, Any], axes: Sequence[Axis], cat: Catalog, name: str | None = None
) -> list[Variant]:
    """Every combination of ``axes`` on ``base`` (scenario data), in grid order."""
    return [make_variant(i, p, base, cat, name) for i, p in enumerate(points(axes))]


def run_sweep(
    base: Mapping[str, Any],
    axes: Sequence[Axis],
    spec: Spec,
    out: Path,
    executor: Executor,
    *,
    name: str | None = None,
    engine: str = "local",
    on_progress: Callable[[int, int], None] | None = None,
    on_records: Callable[[list[Record]], None] | None = None,
) -> Summary:
    """Evaluate every combination not already in ``out`` and store it; ``on_progress(done,
    total)`` after each batch, and ``on_records`` with the batch's records once stored. Raises
    StoreError when ``out`` holds another sweep, or the same combinations computed from another
    base scenario, catalog, level or version."""
    start = time.perf_counter()
    total = count(axes)
    summary = Summary(str(out), total, engine=engine, workers=executor.workers or 1)
    vs = variants(base, axes, spec.catalog, name)
    salt = sweep_salt(base, spec)
    keys = combination_keys(vs, spec, salt)
    store = Store(out, axes, spec.what)
    try:
        done = store.done()
        stored = store.stored_points()
        for v in vs:
            others = stored.get(store.point_cells(v.point), set()) - {keys[v.index][0]}
            if others:
                raise StoreError(
                    f"{out} holds {v.point} computed from another base scenario, catalog, "
                    "congestion backend, seed or fabricplan version: give another --out"
                )
        summary.already_stored = sum(keys[v.index][0] in done for v in vs)
        progress = [summary.already_stored]
        if on_progress is not None:
            on_progress(progress[0], total)

        def write(records: list[Record]) -> None:
            kept = [r for r in records if r.error is None]
            store.write(kept)
            summary.evaluated += len(kept)
            summary.skipped += sum(not r.ok for r in kept)
            summary.failed += len(records) - len(kept)
            summary.rows_written += sum(max(1, len(r.outcomes)) for r in kept)
            for r in records:
                if r.error is not None and len(summary.failed_examples) < SHOWN_SKIPS:
                    summary.failed_examples.append({"point": r.point, "error": r.error})
                elif not r.ok and len(summary.skipped_examples) < SHOWN_SKIPS:
                    summary.skipped_examples.append({"point": r.point, "reason": r.skipped})
            progress[0] += len(records)
            if on_records is not None:
                on_records(records)
            if on_progress is not None:
                on_progress(progress[0], total)

        evaluate_variants(vs, spec, executor=executor, salt=salt, done=done, on_records=write)
        summary.workers = executor.workers or 1
    finally:
        store.close()
    summary.seconds = time.perf_counter() - start
    return summary


__all__ = ["StoreError", "Summary", "run_sweep", "variants"]
