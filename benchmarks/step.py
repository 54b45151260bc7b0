"""Speed of the workload model: one step evaluation, and the vectorised sweep path.

Targets (issue 6): one step evaluation under 2 ms; at least 20,000 configurations per second on
one core for sweeps. The congestion factors are computed once per (fabric, pattern, nodes) and
cached, as in every real sweep; the first call pays for them and is excluded.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from fabricplan.catalog import default_catalog
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.shapes import Shape


def main() -> None:
    cat = default_catalog()
    s = shape_of(cat.model("llama3-70b"))
    hw = Hardware(
        gpu=cat.gpu("h100"),
        gpus=512,
        gpus_per_node=8,
        nics_per_node=8,
        fabric="roce-400g",
        roce_quality="default",
    )
    one = Plans.of(tp=8, pp=4, dp=16, global_batch=1024, seq_len=8192, recompute="full")
    training_step(s, one, hw)  # warm the congestion cache
    reps = 200
    t0 = time.perf_counter()
    for _ in range(reps):
        training_step(s, one, hw)
    single_ms = (time.perf_counter() - t0) / reps * 1e3
    print(f"one step evaluation (llama3-70b, 512 x H100, RoCE): {single_ms:.2f} ms (target < 2 ms)")

    rng = np.random.default_rng(0)
    n = 50_000
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8, 16], n)
    mb = rng.choice([1, 2, 4], n)
    dp = 512 // (tp * pp)
    plans = Plans.of(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=mb,
        global_batch=dp * mb * 16,
        seq_len=rng.choice([2048, 4096, 8192], n),
        zero=rng.integers(0, 4, n),
        sp=tp > 1,
        recompute="full",
    )
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
