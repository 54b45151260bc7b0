"""Speed of the topology layer. Targets (issue 4): the bill of materials for 100,000 GPUs in
under 50 ms; the explicit graph of a 16,384-GPU 3-tier fabric in under 3 s and 2 GiB.
Prints the figures; run with `python`."""

from __future__ import annotations

import os
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from fabricplan.topology import build_graph, design_fabric


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    # 100,000 H100s on 400G Ethernet (Tomahawk-5 class, 128 ports at 400G): 3 tiers
    design_fabric(100_000, "rail-optimized", "roce-400g")  # warm the catalog
    for design, fabric in (
        ("rail-optimized", "roce-400g"),
        ("fat-tree", "roce-400g"),
        ("rail-only", "ib-ndr"),
        ("dragonfly", "roce-800g"),
    ):
        t, d = best_of(lambda d=design, f=fabric: design_fabric(100_000, d, f), 20)
        sw = sum(d.layout.switches.values())
        print(
            f"BOM, 100,000 GPUs, {design:>14} {fabric}: {t * 1e3:6.2f} ms "
            f"({sw:,} switches, {d.layout.tiers} tier(s); target < 50 ms)"
        )

    before = peak_rss_mib()
    lay = design_fabric(16_384, "rail-optimized", "ib-ndr").layout
    t, g = best_of(lambda: build_graph(lay, nvlink_GBps=450, pcie_GBps=64), 5)
    print(
        f"graph, 16,384 GPUs, {lay.tiers} tiers: {t:.3f} s, {g.vertices:,} vertices, "
        f"{len(g.src):,} edges, {g.nbytes / 2**20:.1f} MiB of arrays, peak RSS "
        f"{peak_rss_mib():.0f} MiB (+{peak_rss_mib() - before:.0f}) (target < 3 s, < 2 GiB)"
    )
    t, paths = best_of(lambda: g.paths(g.nic(0, 0), g.nic(2047, 3)), 1)
    print(f"ECMP paths between two far NICs: {len(paths)} in {t * 1e3:.1f} ms (uncached)")


if __name__ == "__main__":
    main()
