"""Speed of the sweep engine.

1. Target (issue 25): an advise-level sweep of 1,000 scenarios of the 512-GPU example in under
   60 s on 2 cores, with the local engine. The grid: 5 cluster sizes x 3 network maturities x 67
   GPU-hour prices (1,005 combinations), every combination a whole ``advise`` (break-even,
   tornado, Monte Carlo, RoCE tuning, growth), each stored in DuckDB as it finishes.
2. The Ray engine on a local instance against one process and against the local engine: the
   speed-up on this machine's cores, and the overhead per task (a chunk with nothing in it, sent
   and answered) of each executor.

Each run starts from empty caches and fresh workers. The machine's cores are shared with other
work: run it more than once (``--repeats``) and read the range.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fabricplan.catalog import default_catalog
from fabricplan.scenario.yaml_io import parse_yaml
from fabricplan.sweep.engine import CACHE, Spec
from fabricplan.sweep.executors import Executor, InProcess, Local, RayExecutor
from fabricplan.sweep.grid import count, parse_grid
from fabricplan.sweep.run import run_sweep
from fabricplan.workload.memo import MEMO

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "llama3-70b-512-h100.yaml"
TARGET_S = 60.0
BIG = [
    "cluster.gpus=256..4096:x2",
    "organization.network_maturity=low,medium,high",
    "costs.gpu_hour_price=1.7..5:+0.05",
]
# The comparison of executors: a fifth of the big grid's prices.
SMALL = [*BIG[:2], "costs.gpu_hour_price=2..4.5:+0.2"]
EMPTY_TASKS = 200


def timed(grid: list[str], executor: Executor, what: str = "advise") -> float:
    cat = default_catalog()
    base = parse_yaml(SCENARIO.read_text())
    CACHE.clear()
    MEMO.clear()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        s = run_sweep(base, parse_grid(grid), Spec(what, cat), Path(tmp) / "s.duckdb", executor)
        seconds = time.perf_counter() - t0
    assert s.evaluated == s.combinations, s
    return seconds


def overhead(executor: Executor) -> float:
    """Seconds per empty task, the workers already started."""
    ctx = Spec("step", default_catalog()).context()
    list(executor.map(ctx, [[] for _ in range(8)]))  # start the workers
    t0 = time.perf_counter()
    n = sum(1 for _ in executor.map(ctx, [[] for _ in range(EMPTY_TASKS)]))
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-big", action="store_true", help="only the executors' comparison")
    args = ap.parse_args()
    if not args.skip_big:
        n = count(parse_grid(BIG))
        runs = [timed(BIG, Local(2)) for _ in range(args.repeats)]
        lo, hi = min(runs), max(runs)
        print(
            f"advise-level sweep, {n:,} scenarios of {SCENARIO.name}, local engine, 2 cores: "
            f"{lo:.1f}-{hi:.1f} s ({n / hi:.0f}-{n / lo:.0f} scenarios/s), "
            f"{lo / TARGET_S:.2f}-{hi / TARGET_S:.2f}x the {TARGET_S:g} s target"
        )
    import ray

    m = count(parse_grid(SMALL))
    one = [timed(SMALL, InProcess()) for _ in range(args.repeats)]
    local = [timed(SMALL, Local(2)) for _ in range(args.repeats)]
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    start = time.perf_counter() - t0
    try:
        on_ray = [timed(SMALL, RayExecutor(jobs=2)) for _ in range(args.repeats)]
        per_ray = overhead(RayExecutor(jobs=2))
    finally:
        ray.shutdown()
    per_local = overhead(Local(2))
    best = min(one)
    print(
        f"{m} advise-level scenarios: one process {min(one):.1f}-{max(one):.1f} s; "
        f"local engine (2 workers) {min(local):.1f}-{max(local):.1f} s, speed-up "
        f"{best / max(local):.2f}-{best / min(local):.2f}x; Ray (local instance, 2 CPUs) "
        f"{min(on_ray):.1f}-{max(on_ray):.1f} s, speed-up {best / max(on_ray):.2f}-"
        f"{best / min(on_ray):.2f}x (Ray's start, {start:.1f} s, not counted)"
    )
    print(
        f"overhead per task: local engine {per_local * 1e3:.2f} ms, Ray "
        f"{per_ray * 1e3:.2f} ms (each task is a chunk of up to 8 combinations)"
    )


if __name__ == "__main__":
    main()
