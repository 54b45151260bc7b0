"""Speed of ``fabricplan advise``: the whole process, cold start included.

Target (issue 7): under 1 s for a 16k-GPU scenario. Each run is a fresh process, so imports,
catalog loading, the congestion simulations and the Monte Carlo are all counted.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "16k-gpu-frontier.yaml"
TARGET_S = 1.0
REPEATS = 3


def wall(*args: str) -> float:
    exe = Path(sys.executable).with_name("fabricplan")
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        subprocess.run(
            [str(exe), "advise", str(SCENARIO), "--json", *args],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    for label, args in (("with break-even", ()), ("--no-break-even", ("--no-break-even",))):
        t = wall(*args)
        print(
            f"advise 16k-gpu-frontier ({label}): {t:.2f} s per process, "
            f"{t / TARGET_S:.2f}x the {TARGET_S:g} s target"
        )


if __name__ == "__main__":
    main()
