"""Speed of the workload model: one step evaluation, and the vectorised sweep path.

Targets (issue 6): one step evaluation under 2 ms; at least 20,000 configurations per second on
one core for sweeps. The congestion factors are computed once per (fabric, pattern, nodes) and
cached, as in every real sweep; the first call pays for them and is excluded.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from step_setup import llama70b_on_512_h100, random_plans

from fabricplan.workload import Hardware, Plans, training_step
from fabricplan.workload.shapes import Shape


def main() -> None:
    s, hw = llama70b_on_512_h100()
    one = Plans.of(tp=8, pp=4, dp=16, global_batch=1024, seq_len=8192, recompute="full")
    training_step(s, one, hw)  # warm the congestion cache
    reps = 200
    t0 = time.perf_counter()
    for _ in range(reps):
        training_step(s, one, hw)
    single_ms = (time.perf_counter() - t0) / reps * 1e3
    print(f"one step evaluation (llama3-70b, 512 x H100, RoCE): {single_ms:.2f} ms (target < 2 ms)")

    n = 50_000
    plans = random_plans(n, 512)
    rate = _rate(s, plans, hw)
    print(
        f"vectorised sweep: {n:,} configurations = {rate:,.0f} configurations/s (target >= 20,000)"
    )
    # the same plans with their TP collectives behind the GEMMs
    rate = _rate(s, replace(plans, tp_comm_overlap=True), hw)
    print(f"  with tp_comm_overlap: {rate:,.0f} configurations/s (target >= 20,000)")


def _rate(s: Shape, plans: Plans, hw: Hardware) -> float:
    """Configurations per second of one vectorised step over ``plans``, after a warm-up call
    (new group shapes simulate their congestion once)."""
    training_step(s, plans, hw)
    t0 = time.perf_counter()
    res = training_step(s, plans, hw)
    dt = time.perf_counter() - t0
    assert np.isfinite(res.time).all()
    return len(plans) / dt


if __name__ == "__main__":
    main()
