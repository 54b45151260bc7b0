"""Rows no GPU could have measured, the same test for text and JSON logs.

nccl-tests derives algbw from the size and the time (algbw = size / time) and busbw from algbw
by a factor below 2 for every collective (all-reduce's 2(n-1)/n). A row whose figures break
those relations was edited, truncated or corrupted; grading it or fitting a fabric to it would
report a fabric that does not exist.
"""

from __future__ import annotations

from fabricplan.nccltests.parse import Result, Run

# From this size on, algbw must agree with size / time: below it nccl-tests prints algbw with
# too few digits (8 B in 20 us is 0.0004 GB/s, printed 0.00), and under -C the printed time is
# the CPU's, which launch overhead dominates. 1 MiB moves in 10 us to 50 ms on any fabric.
CONSISTENCY_MIN_BYTES = 2**20
# How far algbw may sit from size / time: a factor of 2 either way. Rounding costs at most 5 %
# (a time printed as "1.2e+07"), and -C's CPU time runs within a few % of the GPU's at 1 MiB
# and above; a factor of 2 separates those from a figure typed or cut wrongly.
CONSISTENCY_FACTOR = 2.0
# busbw over algbw: at most 2(n-1)/n < 2 (all-reduce); 0.01 GB/s for the printed rounding.
MAX_BUS_FACTOR = 2.0
ROUNDING_GBPS = 0.01


def row_problem(r: Result) -> str | None:
    """Why ``r`` cannot be a measurement, or None."""
    if r.size_bytes > 0 and r.time_us <= 0:
        return f"a collective of {r.size_bytes:,} bytes took 0 us"
    if r.busbw_GBps > MAX_BUS_FACTOR * r.algbw_GBps + ROUNDING_GBPS:
        return (
            f"busbw {r.busbw_GBps:g} GB/s is more than {MAX_BUS_FACTOR:g}x algbw "
            f"{r.algbw_GBps:g} GB/s, which no collective gives"
        )
    if r.size_bytes >= CONSISTENCY_MIN_BYTES:
        implied = r.size_bytes / (r.time_us * 1e3)  # GB/s
        if not implied / CONSISTENCY_FACTOR <= r.algbw_GBps <= implied * CONSISTENCY_FACTOR:
            return (
                f"algbw {r.algbw_GBps:g} GB/s, but {r.size_bytes:,} bytes in "
                f"{r.time_us:g} us is {implied:.4g} GB/s"
            )
    return None


def impossible_rows(run: Run) -> list[str]:
    """Each row of ``run`` that cannot be real, with where it is and why."""
    out = []
    for i, r in enumerate(run.results, start=1):
        if problem := row_problem(r):
            where = f"line {r.line}" if r.line else f"result {i}"
            out.append(f"{where} ({r.size_bytes:,} B): {problem}")
    return out
