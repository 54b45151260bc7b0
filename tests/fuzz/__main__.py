"""``python tests/fuzz --cases N``: run N hostile cases and report them against the targets.

Prints progress every few hundred cases, then the summary: cases, refusals, internal errors and
crashes, runs over 60 s or 2 GB, the slowest case and the peak memory; every case that missed a
target is listed with its message. Exit code 1 when any did.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests folder: `fuzz` package

from fuzz.runner import Report, explore, lines
from fuzz.strategies import CASES

# Cases between two progress lines.
PROGRESS_EVERY = 250


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the summary and misses here")
    args = parser.parse_args()

    def progress(report: Report) -> None:
        if len(report.outcomes) % PROGRESS_EVERY == 0:
            s = report.summary()
            print(
                f"{s['cases']} cases, {s['outcomes']}, bad {len(report.bad)}, {s['wall_s']} s",
                file=sys.stderr,
                flush=True,
            )

    report = explore(CASES, args.cases, args.seed, progress)
    for line in lines(report):
        print(line)
    if args.json:
        misses = [
            {
                "kind": o.kind,
                "case": o.case.describe(),
                "stderr": o.stderr_tail,
                "seconds": o.seconds,
                "peak_bytes": o.peak_bytes,
            }
            for o in report.bad
        ]
        args.json.write_text(json.dumps({"summary": report.summary(), "misses": misses}, indent=2))
    return 1 if report.bad else 0


if __name__ == "__main__":
    sys.exit(main())
