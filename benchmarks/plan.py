"""Speed of the step model as the plan search uses it, and of the search itself.

Targets (issue 25, point 6; one core, warm: the congestion factors already simulated):
- a 10k-plan step sweep with the congestion backend on: >= 500,000 plan evaluations per second;
- a 152-plan batch: >= 50,000 per second;
- one plan: under 0.2 ms, each call a different plan (nothing kept from an identical call
  can answer it). Printed twice: with the prices of single collectives that earlier plans
  asked for kept (as a planner or sweep asking plan after plan of one cluster runs), and with
  them forgotten before each call (the figure for a plan whose collectives are all new).
Each figure is printed with its ratio to the target (>= 1 meets it), as the median of
``REPEATS`` runs with the range, in wall time and in CPU time (``time.process_time``), since
a shared machine's wall time is noisy. Then the exhaustive ``plan`` search on the examples.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from step_setup import llama70b_on_512_h100, random_plans

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import backend
from fabricplan.planning import search_scenario
from fabricplan.scenario import load_scenario
from fabricplan.workload import Plans, comm, training_step

REPEATS = 7
# Distinct single-plan batches the one-plan figure cycles through.
ONE_PLANS = 300
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SEARCHED = (
    "llama3-70b-512-h100.yaml",
    "256-gpu-moe.yaml",
    "16-gpu-finetune.yaml",
    "1024-gpu-30-day-pretraining.yaml",
)


def _timed(run: Callable[[], object], reps: int) -> tuple[list[float], list[float]]:
    """Seconds per call of ``run`` (wall, CPU), one figure per repeat of ``reps`` calls."""
    run()  # warm: congestion factors, caches
    wall, cpu = [], []
    for _ in range(REPEATS):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(reps):
            run()
        wall.append((time.perf_counter() - t0) / reps)
        cpu.append((time.process_time() - c0) / reps)
    return wall, cpu


def _distinct_plans(n: int, gpus: int) -> list[Plans]:
    """``n`` different single plans, drawn as ``random_plans(1, gpus, seed)`` for seeds 0, 1, ...
    (a seed whose plan was drawn already is skipped)."""
    found: dict[tuple[object, ...], Plans] = {}
    seed = 0
    while len(found) < n:
        q = random_plans(1, gpus, seed=seed)
        found.setdefault(tuple(str(v) for v in vars(q).values()), q)
        seed += 1
    return list(found.values())


def _rate_line(what: str, n: int, wall: list[float], cpu: list[float], target: float) -> str:
    rates = sorted(n / w for w in wall)
    cpu_rate = n / statistics.median(cpu)
    med = statistics.median(rates)
    return (
        f"{what}: {med:,.0f} plans/s (range {rates[0]:,.0f}-{rates[-1]:,.0f}; CPU "
        f"{cpu_rate:,.0f}/s), target >= {target:,.0f}: ratio {med / target:.2f}"
    )


def _one_line(what: str, wall: list[float], cpu: list[float]) -> str:
    ms = sorted(w * 1e3 for w in wall)
    med = statistics.median(ms)
    return (
        f"{what}: {med:.3f} ms (range {ms[0]:.3f}-{ms[-1]:.3f}; CPU "
        f"{statistics.median(cpu) * 1e3:.3f} ms), target < 0.2 ms: ratio {0.2 / med:.2f}"
    )


def main() -> None:
    cat = default_catalog()
    s, hw = llama70b_on_512_h100()
    flow = backend("flow")
    for n, target, reps in ((10_000, 500_000, 3), (152, 50_000, 30)):
        plans = random_plans(n, 512)
        wall, cpu = _timed(lambda p=plans: training_step(s, p, hw, backend=flow), reps)
        print(_rate_line(f"{n:,}-plan step, flow backend", n, wall, cpu, target))
    # one plan per call, each call a different plan (``ONE_PLANS`` drawn like the batches,
    # taken in turn), so that nothing kept from an identical earlier call can answer it
    ones = _distinct_plans(ONE_PLANS, 512)
    for q in ones:  # warm: the congestion factors and NCCL tables of the groups they form
        training_step(s, q, hw, backend=flow)
    turn = itertools.cycle(ones)
    wall, cpu = _timed(lambda: training_step(s, next(turn), hw, backend=flow), ONE_PLANS)
    print(_one_line(f"one plan ({ONE_PLANS} distinct plans in turn), flow backend", wall, cpu))

    # the same, each call's collectives priced afresh (the kept prices of single collectives
    # forgotten before it): what a plan whose groups and sizes were never asked about costs
    def fresh() -> None:
        comm.forget_one_plan_prices()
        training_step(s, next(turn), hw, backend=flow)

    wall, cpu = _timed(fresh, ONE_PLANS)
    print(_one_line("one plan, its collectives priced afresh", wall, cpu))

    for name in SEARCHED:
        sc = load_scenario(EXAMPLES / name, catalog=cat)
        search_scenario(sc, cat, backend=flow)  # warm: the congestion factors
        t0, c0 = time.perf_counter(), time.process_time()
        found = search_scenario(sc, cat, backend=flow)
        wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        n = found[0].result.evaluated
        print(
            f"plan {name}: {n:,} plans x {len(found)} fabrics in {wall_s:.2f} s "
            f"(CPU {cpu_s:.2f} s; {n * len(found) / cpu_s:,.0f} plans per CPU-second)"
        )


if __name__ == "__main__":
    main()
