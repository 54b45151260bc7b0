"""What a checked claim looks like: the claim, where it comes from, the conditions it assumes,
what fabricplan computes under them, and whether it holds, plus the other conditions tried."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The seeds our users start from, by number (DESIGN.md): cited so a reader can find the sentence.
SOURCES = {
    "000": "seed 000, 'InfiniBand vs Ethernet: Choosing the Right Interconnect for Your GPU "
    "Cluster'",
    "001": "seed 001, 'GPU Cluster Networking: InfiniBand vs. RoCE for Large-Scale AI Training'",
    "002": "seed 002, 'InfiniBand vs. RoCE for AI Training' (GPU cloud comparison)",
    "003": "seed 003, 'InfiniBand vs Ethernet' (2026, compatible-hardware vendor)",
    "004": "seed 004, 'InfiniBand vs RoCEv2: the networking decision that defines your training "
    "cluster'",
}

# A single-number claim (e.g. "47 us") holds when fabricplan's figure is within this share of
# it: the seeds round and rarely state message size, hop count or software version.
POINT_TOLERANCE = 0.20


@dataclass(frozen=True)
class Case:
    """One set of conditions and what fabricplan computes under them."""

    conditions: dict[str, Any]
    value: float | None
    holds: bool | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "conditions": self.conditions,
            "value": self.value,
            "holds": self.holds,
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class ClaimResult:
    """``holds`` is judged under the claim's own conditions (the first case); ``None`` when the
    claim is outside what fabricplan models. ``cases`` shows where else it holds or fails."""

    id: str
    claim: str
    source: str
    conditions: dict[str, Any]
    claimed: dict[str, Any]  # {"low", "high", "unit"} or {"value", "unit"}
    computed: dict[str, Any]  # {"value", "unit", "summary"}
    holds: bool | None
    basis: str  # model | catalog | arithmetic | outside-model
    cases: tuple[Case, ...] = field(default=())

    @property
    def holds_under(self) -> list[dict[str, Any]]:
        return [c.conditions for c in self.cases if c.holds]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "claim": self.claim,
            "source": self.source,
            "conditions": self.conditions,
            "claimed": self.claimed,
            "computed": self.computed,
            "holds": self.holds,
            "basis": self.basis,
            "holds_under": self.holds_under,
            "cases": [c.to_dict() for c in self.cases],
        }


def in_range(value: float, low: float, high: float) -> bool:
    return low <= value <= high


def near(value: float, target: float, tolerance: float = POINT_TOLERANCE) -> bool:
    return abs(value / target - 1) <= tolerance


def source(*seeds: str) -> str:
    return "; ".join(SOURCES[s] for s in seeds)
