"""Speed of the collective model. Targets (issue 3): a full 8 B - 16 GiB table for one
configuration in under 1 ms after import; >= 100,000 (configuration, size) points per second
through the vectorised entry point, on one core. Prints the figures; run with `python`."""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says

import numpy as np

from fabricplan.collectives import DEFAULT_SIZES, SystemArrays, build_system, predict, sweep


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    system = build_system("h100", 8, "roce-400g")
    predict(system, "all_reduce")  # warm caches
    table = best_of(lambda: predict(system, "all_reduce", DEFAULT_SIZES), 200)
    print(
        f"one table, {len(DEFAULT_SIZES)} sizes (8 B - 16 GiB): {table * 1e3:.3f} ms "
        f"(target < 1 ms)"
    )

    rng = np.random.default_rng(0)
    gpus = ["h100", "a100", "b200", "h200", "mi300x"]
    fabrics = ["ib-ndr", "roce-400g", "ib-hdr", "roce-200g", "tcp-100g"]
    systems = [
        build_system(gpus[i % 5], int(n), fabrics[(i // 5) % 5])
        for i, n in enumerate(rng.integers(1, 2048, size=2000))
    ]
    sa = SystemArrays.of(systems)
    sizes = np.array(DEFAULT_SIZES, dtype=float)
    for op in ("all_reduce", "all_gather", "alltoall"):
        sweep(sa, op, sizes)
        t = best_of(lambda op=op: sweep(sa, op, sizes), 5)
        points = len(systems) * len(sizes)
        print(
            f"vectorised {op}: {points:,} points in {t * 1e3:.1f} ms = "
            f"{points / t:,.0f} points/s (target >= 100,000)"
        )


if __name__ == "__main__":
    main()
