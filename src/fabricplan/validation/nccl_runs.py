"""The published nccl-tests runs in ``data/nccl-tests`` against the collective model.

Accuracy is reported per run as the median absolute error of busbw for sizes >= 64 MiB and of
time for sizes <= 64 KiB; runs known to be faulty are graded instead, and must come out
`warn`/`fail` with the expected cause.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from fabricplan.collectives import build_system
from fabricplan.nccltests.compare import Comparison, compare
from fabricplan.nccltests.grade import LARGE_BYTES, SMALL_BYTES, Grade, grade
from fabricplan.nccltests.parse import Run, parse_file

DATA = Path(str(resources.files("fabricplan.validation") / "data"))


@dataclass(frozen=True)
class RunCheck:
    setup: dict[str, Any]
    comparison: Comparison
    grade: Grade
    busbw_error: float | None  # median |measured/predicted - 1|, sizes >= 64 MiB
    time_error: float | None  # the same for time, sizes <= 64 KiB

    @property
    def grade_ok(self) -> bool:
        s = self.setup
        cause = s.get("cause")
        found = {f.code for f in self.grade.findings}
        return self.grade.verdict == s["expect_grade"] and (not cause or cause in found)

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "file": self.setup["file"],
            "run": self.setup["select"],
            "health": self.setup["health"],
            "nodes": self.setup["nodes"],
            "fabric": self.setup["fabric"],
            "busbw_median_abs_error": self.busbw_error,
            "time_median_abs_error": self.time_error,
            "verdict": self.grade.verdict,
            "expected_verdict": self.setup["expect_grade"],
            "findings": [f.code for f in self.grade.findings],
            "grade_ok": self.grade_ok,
            "points": [
                {
                    "size_bytes": int(c.sizes[i]),
                    "measured_time_us": float(c.measured_time_us[i]),
                    "predicted_time_us": float(c.expected_time_us[i]),
                    "measured_busbw_GBps": float(c.measured_busbw_GBps[i]),
                    "predicted_busbw_GBps": float(c.expected_busbw_GBps[i]),
                    "algorithm": c.algorithm[i],
                }
                for i in range(len(c.sizes))
            ],
        }


def load_manifest(path: Path | None = None) -> list[dict[str, Any]]:
    return tomllib.loads((path or DATA / "runs.toml").read_text())["run"]


def _median_abs_error(measured: np.ndarray, predicted: np.ndarray) -> float | None:
    ok = np.isfinite(measured) & np.isfinite(predicted) & (predicted > 0)
    if not ok.any():
        return None
    return float(np.median(np.abs(measured[ok] / predicted[ok] - 1)))


def check_runs(manifest: list[dict[str, Any]] | None = None) -> list[RunCheck]:
    out = []
    parsed: dict[str, list[Run]] = {}  # several setups read the same file
    for setup in manifest or load_manifest():
        if setup["file"] not in parsed:
            parsed[setup["file"]] = parse_file(DATA / "nccl-tests" / setup["file"])
        runs = [r for r in parsed[setup["file"]] if setup["select"] in r.label]
        if len(runs) != 1:
            raise ValueError(f"{setup['file']}: '{setup['select']}' matches {len(runs)} runs")
        system = build_system(setup["gpu"], setup["nodes"], setup["fabric"],
                              gpus_per_node=setup.get("gpus_per_node"),
                              nics_per_node=setup.get("nics_per_node"))  # fmt: skip
        cmp = compare(runs[0], system, setup["op"])
        large, small = cmp.sizes >= LARGE_BYTES, cmp.sizes <= SMALL_BYTES
        out.append(RunCheck(
            setup, cmp, grade(runs[0], system, cmp),
            _median_abs_error(cmp.measured_busbw_GBps[large], cmp.expected_busbw_GBps[large]),
            _median_abs_error(cmp.measured_time_us[small], cmp.expected_time_us[small]),
        ))  # fmt: skip
    return out
