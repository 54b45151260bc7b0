"""Where a sweep's chunks run: in this process, in local worker processes, or on a Ray cluster.

Each executor takes the same context (catalog, backend, level, seed) once per worker and the
same chunks of (index, scenario, positions) tasks, and runs the same function on them, so the
rows are the same whichever runs them. A worker lives for the whole sweep: the workload model's memo
(workload.memo) then serves every combination that differs only in money from one it has
already evaluated. Chunks come back as they finish, in any order.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.scenario import Scenario
    from fabricplan.workload.positions import Positions

# A task is (combination index, scenario, hardware positions or None); its result (index,
# outcomes or None, skip reason or None, seconds since the epoch when it finished, the error
# that stopped it or None).
Task = tuple[int, "Scenario", "Positions | None"]
TaskResult = tuple[int, Any, str | None, float, str | None]


@dataclass(frozen=True)
class Context:
    """What every task of a sweep shares, sent to each worker once."""

    catalog: Catalog
    backend: str  # a network backend's name (congestion.network_backend.BACKEND_NAMES)
    what: str
    seed: int = 0
    detail: bool = False
    # an error in one combination (a fault of the model, not a refusal) is reported with it
    # and the sweep goes on; else it propagates (callers in this process see the traceback)
    keep_going: bool = False


def run_chunk(ctx: Context, chunk: Sequence[Task]) -> list[TaskResult]:
    """Evaluate each task of ``chunk``; a refused combination is a result with its reason."""
    from fabricplan.congestion.network_backend import backend
    from fabricplan.sweep.evaluate import Skip, evaluate_one

    b = backend(ctx.backend)
    out: list[TaskResult] = []
    for index, sc, positions in chunk:
        try:
            found = evaluate_one(
                sc,
                ctx.what,
                ctx.catalog,
                b,
                seed=ctx.seed,
                detail=ctx.detail,
                positions=positions,
            )
            out.append((index, found, None, time.time(), None))
        except Skip as exc:
            out.append((index, None, str(exc), time.time(), None))
        except Exception as exc:
            if not ctx.keep_going:
                raise
            out.append((index, None, None, time.time(), f"{type(exc).__name__}: {exc}"))
    return out


class Executor(Protocol):
    workers: int

    def map(self, ctx: Context, chunks: Sequence[Sequence[Task]]) -> Iterator[list[TaskResult]]:
        """Each chunk's results, as chunks finish."""
        ...


class InProcess:
    """Every chunk here, one after another: for small sweeps and for callers (advise) that are
    themselves one task of a bigger sweep."""

    workers = 1

    def map(self, ctx: Context, chunks: Sequence[Sequence[Task]]) -> Iterator[list[TaskResult]]:
        for chunk in chunks:
            yield run_chunk(ctx, chunk)


_WORKER_CONTEXT: Context | None = None


def _init_worker(ctx: Context) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = ctx


def _run_in_worker(chunk: Sequence[Task]) -> list[TaskResult]:
    assert _WORKER_CONTEXT is not None
    return run_chunk(_WORKER_CONTEXT, chunk)


def local_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Local:
    """Worker processes on this machine, all its cores by default. Workers start from a
    fork server that has imported the model already, and never inherit the caller's threads or
    open database."""

    def __init__(self, jobs: int | None = None) -> None:
        self.workers = jobs or local_cores()

    def map(self, ctx: Context, chunks: Sequence[Sequence[Task]]) -> Iterator[list[TaskResult]]:
        if self.workers == 1 or len(chunks) <= 1:
            yield from InProcess().map(ctx, chunks)
            return
        mp = multiprocessing.get_context("forkserver")
        mp.set_forkserver_preload(["fabricplan.sweep.evaluate", "fabricplan.advise"])
        with ProcessPoolExecutor(
            max_workers=min(self.workers, len(chunks)),
            mp_context=mp,
            initializer=_init_worker,
            initargs=(ctx,),
        ) as pool:
            pending: set[Future[list[TaskResult]]] = {
                pool.submit(_run_in_worker, c) for c in chunks
            }
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        yield f.result()
            finally:
                for f in pending:  # stopped early (Ctrl-C, a caller that stops reading)
                    f.cancel()


class RayExecutor:
    """The same chunks on a Ray cluster: one actor per CPU (``jobs`` of them if given), each
    holding the context and its own memo. ``address`` names a running cluster; without it a
    local instance is started (and stopped again when the sweep ends)."""

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        self.address = address
        self.jobs = jobs
        self.workers = jobs or 0

    def map(self, ctx: Context, chunks: Sequence[Sequence[Task]]) -> Iterator[list[TaskResult]]:
        import ray
        from ray.util import ActorPool

        started = not ray.is_initialized()
        if started:
            if self.address:
                ray.init(address=self.address, logging_level="WARNING")
            else:
                ray.init(
                    num_cpus=self.jobs or local_cores(),
                    include_dashboard=False,
                    logging_level="WARNING",
                )
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.workers = max(1, min(self.jobs or cpus, cpus, len(chunks) or 1))
            worker = ray.remote(num_cpus=1)(_RayWorker)
            held = ray.put(ctx)
            pool = ActorPool([worker.remote(held) for _ in range(self.workers)])
            yield from pool.map_unordered(lambda a, c: a.run.remote(c), list(chunks))
        finally:
            if started:
                ray.shutdown()


class _RayWorker:
    """A Ray actor: the context once, then chunks."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def run(self, chunk: Sequence[Task]) -> list[TaskResult]:
        return run_chunk(self.ctx, chunk)


def make_executor(engine: str, jobs: int | None = None, address: str | None = None) -> Executor:
    """``local`` (processes here), ``ray`` (a Ray cluster) or ``inprocess``."""
    if engine == "ray":
        return RayExecutor(address, jobs)
    if engine == "inprocess":
        return InProcess()
    return Local(jobs)
