"""The published nccl-tests runs in ``data/nccl-tests`` against the collective model.

Accuracy is reported per run as the median absolute error of busbw for sizes >= 64 MiB and of
time for sizes <= 64 KiB; runs known to be faulty are graded instead, and must come out
`warn`/`fail` with the expected cause.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
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
    family: str = ""  # the fabric's family (infiniband, roce, tcp, srd, ...)

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
            "family": self.family,
            "held_back": bool(self.setup.get("held_back")),
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
        run = runs[0]
        if setup.get("env"):
            # the settings the run's source documents, where its log does not show them
            run = replace(run, env={**setup["env"], **run.env})
        system = build_system(
            setup["gpu"],
            setup["nodes"],
            setup["fabric"],
            gpus_per_node=setup.get("gpus_per_node"),
            nics_per_node=setup.get("nics_per_node"),
        )
        cmp = compare(run, system, setup["op"])
        large, small = cmp.sizes >= LARGE_BYTES, cmp.sizes <= SMALL_BYTES
        out.append(
            RunCheck(
                setup,
                cmp,
                grade(run, system, cmp),
                _median_abs_error(cmp.measured_busbw_GBps[large], cmp.expected_busbw_GBps[large]),
                _median_abs_error(cmp.measured_time_us[small], cmp.expected_time_us[small]),
                system.family,
            )
        )
    return out


# The size bands the accuracy targets are stated in: busbw for large and mid sizes, time for
# small messages (where busbw is ~0 and time is what a user waits for).
MID_BYTES = (2**20, 32 * 2**20)
BANDS = ("busbw >= 64 MiB", "busbw 1-32 MiB", "time <= 64 KiB")


@dataclass(frozen=True)
class BandAccuracy:
    """Median |measured / predicted - 1| over every point of one fabric family's healthy runs
    in one size band, pooled across runs: the runs the model was built on (``held_back``
    False), the held-back runs (True), or both together (None)."""

    family: str
    held_back: bool | None
    band: str
    median_abs_error: float | None
    points: int
    runs: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "held_back": self.held_back,
            "band": self.band,
            "median_abs_error": self.median_abs_error,
            "points": self.points,
            "runs": self.runs,
        }


def band_errors(c: Comparison, band: str) -> np.ndarray:
    """|measured / predicted - 1| of a run's points in one size band (busbw for the large and
    mid sizes, time for small messages)."""
    if band == BANDS[0]:
        keep, m, p = c.sizes >= LARGE_BYTES, c.measured_busbw_GBps, c.expected_busbw_GBps
    elif band == BANDS[1]:
        keep = (c.sizes >= MID_BYTES[0]) & (c.sizes <= MID_BYTES[1])
        m, p = c.measured_busbw_GBps, c.expected_busbw_GBps
    else:
        keep, m, p = c.sizes <= SMALL_BYTES, c.measured_time_us, c.expected_time_us
    ok = keep & np.isfinite(m) & np.isfinite(p) & (p > 0)
    return np.abs(m[ok] / p[ok] - 1)


def accuracy_by_family(checks: list[RunCheck]) -> list[BandAccuracy]:
    """Per fabric family (and "all"), the median error in each size band over the healthy
    runs: those the model was built on, the held-back ones, then both together."""
    healthy = [c for c in checks if c.setup["health"] == "healthy"]
    families = [*sorted({c.family for c in healthy}), "all"]
    out = []
    for held in (False, True, None):
        for fam in families:
            group = [
                c
                for c in healthy
                if held in (None, bool(c.setup.get("held_back"))) and fam in ("all", c.family)
            ]
            if not group:
                continue
            for band in BANDS:
                per_run = [band_errors(c.comparison, band) for c in group]
                errs = np.concatenate(per_run) if per_run else np.array([])
                out.append(
                    BandAccuracy(
                        fam,
                        held,
                        band,
                        float(np.median(errs)) if errs.size else None,
                        int(errs.size),
                        sum(1 for e in per_run if e.size),
                    )
                )
    return out
