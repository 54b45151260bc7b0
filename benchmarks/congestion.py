"""Speed and scale of the flow-level congestion simulator.

Targets: one ring all-reduce step over 16,384 GPUs (3-tier fat-tree, ECMP, one seed) under 2 s
and 4 GiB; 100 seeds at 1,024 GPUs under 5 s; and how the cost grows with the GPU count.
Run: python benchmarks/congestion.py
"""

from __future__ import annotations

import resource
import time

from fabricplan.catalog import default_catalog
from fabricplan.congestion.case import ROUTE_MEMORY_BUDGET_BYTES, Case
from fabricplan.congestion.simulate import run_case

# The targets in the docstring above.
TARGET_16K_S = 2.0
TARGET_16K_MB = ROUTE_MEMORY_BUDGET_BYTES // 2**20
TARGET_100_SEEDS_S = 5.0


def _timed(case: Case) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = run_case(case, default_catalog()).to_dict()
    return time.perf_counter() - t0, out


def main() -> None:
    default_catalog()
    run_case(Case(gpus=64, seeds=1))  # warm imports and caches
    print("ring all-reduce, 1 GiB, fat-tree, ECMP, one seed:")
    print(f"{'GPUs':>7} {'fabric':>10} {'tiers':>5} {'seconds':>8} {'slowdown':>9} {'peak RSS':>9}")
    worst_16k, rss_16k = 0.0, 0.0
    for gpus in (1024, 4096, 16384, 65536):
        for fabric in ("ib-ndr", "roce-400g"):
            case = Case(gpus=gpus, fabric=fabric, design="fat-tree", routing="ecmp", seeds=1)
            secs, out = _timed(case)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            if gpus == 16384:  # peak RSS so far: nothing larger has run yet
                worst_16k, rss_16k = max(worst_16k, secs), rss
            print(f"{gpus:>7} {fabric:>10} {out['fabric_layout']['tiers']:>5} {secs:>8.3f} "
                  f"{out['network_slowdown_p50']:>9.3f} {rss:>7.0f} MB")  # fmt: skip
    print(f"16,384 GPUs: {worst_16k:.2f} s = {worst_16k / TARGET_16K_S:.2f} x the "
          f"{TARGET_16K_S:g} s target; peak RSS {rss_16k:.0f} MB = "
          f"{rss_16k / TARGET_16K_MB:.2f} x the {TARGET_16K_MB} MB target")  # fmt: skip
    secs, out = _timed(Case(gpus=1024, fabric="roce-400g", routing="ecmp", seeds=100))
    print(f"100 seeds at 1,024 GPUs (roce-400g, ECMP): {secs:.2f} s = "
          f"{secs / TARGET_100_SEEDS_S:.2f} x the {TARGET_100_SEEDS_S:g} s target "
          f"({100 / secs:.0f} seeds/s), p50 slowdown {out['p50_slowdown']:.3f}")  # fmt: skip
    secs, out = _timed(Case(gpus=256, fabric="roce-400g", pattern="alltoall",
                            size_bytes=2**28, seeds=1))  # fmt: skip
    print(
        f"all-to-all at 256 GPUs, one seed: {secs:.2f} s (no target: its cost grows with the "
        "square of the node count)"
    )


if __name__ == "__main__":
    main()
