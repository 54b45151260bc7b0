"""Interruption rates of large training runs, by cause, and what an interruption costs.

Typed from ``data/reliability/interruptions.toml`` (the per-cause counts, restart time and
checkpoint bandwidth) and ``data/economics/costs.toml`` [risk] (the fabric-caused rate and its
multiplier by fabric family and network maturity). The workload layer's expected time-to-train
and the cost layer's run-loss risk both read them here.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

HOURS_PER_DAY = 24.0
HOURS_PER_YEAR = 365.0 * HOURS_PER_DAY


@dataclass(frozen=True)
class Cause:
    """One root cause of interruptions; ``per_gpu_hour`` excludes any fabric multiplier."""

    name: str
    category: str
    observed_events: int
    per_gpu_hour: float
    planned: bool = False  # checkpoints first: costs the restart, no lost work
    fabric: bool = False  # scaled by the fabric family's and maturity's multiplier


def fabric_events_per_gpu_hour(risk: Mapping[str, Any], family: str, maturity: str) -> float:
    """Fabric-caused interruptions per GPU-hour from costs.toml [risk]: the base rate per
    1,000 GPU-years times the misconfiguration multiplier of ``family`` at ``maturity``."""
    mult = risk["misconfig_multiplier"]
    if family not in mult:
        raise KeyError(
            f"costs.toml: [risk] misconfig_multiplier has no entry for fabric family {family!r}"
        )
    per_gpu_year = float(risk["events_per_1k_gpu_year"]) / 1000
    return per_gpu_year * float(mult[family][maturity]) / HOURS_PER_YEAR


@dataclass(frozen=True)
class Reliability:
    causes: tuple[Cause, ...]
    observed_gpus: int
    observed_days: float
    observed_goodput_above: float  # the run's published effective training time, a lower bound
    restart_h: float  # detection and restart, until training resumes
    checkpoint_bytes_per_s_per_gpu: float  # storage write bandwidth provisioned per GPU
    risk: Mapping[str, Any]  # costs.toml [risk]

    def rate(self, cause: Cause, family: str, maturity: str) -> float:
        """Interruptions per GPU-hour of ``cause`` on a fabric of ``family`` at ``maturity``."""
        if cause.fabric:
            return fabric_events_per_gpu_hour(self.risk, family, maturity)
        return cause.per_gpu_hour


def _causes(doc: Mapping[str, Any]) -> tuple[Cause, ...]:
    obs = doc["observed"]
    gpu_hours = float(obs["gpus"]) * float(obs["days"]) * HOURS_PER_DAY
    return tuple(
        Cause(
            name=str(c["name"]),
            category=str(c["category"]),
            observed_events=int(c["events"]),
            per_gpu_hour=int(c["events"]) / gpu_hours,
            planned=bool(c.get("planned", False)),
            fabric=bool(c.get("fabric", False)),
        )
        for c in doc["cause"]
    )


@cache
def load_reliability() -> Reliability:
    data = resources.files("fabricplan.catalog") / "data"
    doc = tomllib.loads((data / "reliability" / "interruptions.toml").read_text("utf-8"))
    costs = tomllib.loads((data / "economics" / "costs.toml").read_text("utf-8"))
    obs, ck = doc["observed"], doc["checkpoint"]
    return Reliability(
        causes=_causes(doc),
        observed_gpus=int(obs["gpus"]),
        observed_days=float(obs["days"]),
        observed_goodput_above=float(obs["effective_training_time_above"]),
        restart_h=float(doc["restart"]["minutes"]) / 60,
        checkpoint_bytes_per_s_per_gpu=float(ck["storage_bytes_per_s"]) / int(ck["storage_gpus"]),
        risk=costs["risk"],
    )
