"""A case's seeds, side by side: each seed's own random streams, and worker processes.

A seed draws from streams of its own (the case's seed and the seed's index), so it gives the
same result in any process and however many seeds the case asks for: the first 5 of 10 seeds
are the 5 of a 5-seed run. Long cases run their seeds in forked worker processes, one per core:
forked, so they share the case's fabric and routing tables instead of pickling them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.congestion.case import Case

# A case's seeds run in worker processes when it is estimated to take at least this long per
# seed: below it, starting the workers costs more than they save.
PARALLEL_MIN_SEED_S = 0.5

R = TypeVar("R")
# the setup and the per-seed function a forked worker inherits (set just before the fork)
_FORKED: tuple[Any, Callable[[Any, int], Any]] | None = None


def stream(case: Case, seed: int, part: int) -> np.random.Generator:
    """Seed ``seed``'s own random stream number ``part`` (0: its traffic, 1: the rest)."""
    return np.random.default_rng(np.random.SeedSequence(case.seed, spawn_key=(seed, part)))


def workers_for(case: Case, cat: Catalog, asked: int | None) -> int:
    """Processes to run ``case``'s seeds in: ``asked``, or every core this process may use
    when the case is estimated at ``PARALLEL_MIN_SEED_S`` a seed or more (one otherwise, in a
    worker process itself, or where processes cannot fork)."""
    if asked is not None:
        return max(1, min(asked, case.seeds))
    import multiprocessing as mp
    import os

    from fabricplan.congestion.budget import estimate_case

    if case.seeds < 2 or mp.current_process().daemon or not hasattr(os, "fork"):
        return 1
    if estimate_case(case, cat).per_seed_s < PARALLEL_MIN_SEED_S:
        return 1
    return max(1, min(case.seeds, len(os.sched_getaffinity(0))))


def _forked(seed: int) -> Any:
    assert _FORKED is not None, "set by run_seeds before the workers fork"
    setup, one = _FORKED
    return one(setup, seed)


def run_seeds(
    setup: Any,
    seeds: int,
    workers: int,
    one: Callable[[Any, int], R],
    progress: Callable[[int], None] | None = None,
    warm: Callable[[Any], None] | None = None,
) -> list[R]:
    """``one(setup, seed)`` for every seed, in seed order; in ``workers`` forked processes
    when above one (``warm(setup)`` first, for what every seed shares)."""
    if workers <= 1:
        out = []
        for seed in range(seeds):
            out.append(one(setup, seed))
            if progress:
                progress(1)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    global _FORKED
    if warm is not None:
        warm(setup)
    _FORKED = (setup, one)
    try:
        got: dict[int, R] = {}
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            futures = {pool.submit(_forked, seed): seed for seed in range(seeds)}
            for fut in as_completed(futures):
                got[futures[fut]] = fut.result()
                if progress:
                    progress(1)
    finally:
        _FORKED = None
    return [got[seed] for seed in range(seeds)]
