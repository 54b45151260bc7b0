"""The seeds' scale claims, recomputed: under which RoCE quality and topology each holds.

Each claim names a scale, a quantity and a range. fabricplan computes the quantity from an
example scenario of that tier on every (RoCE quality, topology design, placement) it can model
and reports the value and whether it lands in the claimed range. Nothing is tuned to make a
claim true: the claims are the thing under test.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from itertools import product
from pathlib import Path
from typing import Any

from fabricplan.catalog import Catalog, default_catalog
from fabricplan.scenario import load_scenario
from fabricplan.workload import evaluate_scenario

EXAMPLES = Path(str(resources.files("fabricplan.validation") / "data" / "claims"))

QUALITIES = ("tuned", "default", "misconfigured")
DESIGNS = ("rail-optimized", "fat-tree")


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    scenario: str  # file under data/claims
    quantity: str  # roce_share | comm_fraction | ib_gain
    low: float
    high: float


CLAIMS = (
    Claim("16-gpu-roce-share", "16 GPUs: RoCE reaches 92-95 % of InfiniBand throughput",
          "16-gpu-llama3-8b.yaml", "roce_share", 0.92, 0.95),
    Claim("64-gpu-comm-share", "64 GPUs: communication is 15-25 % of step time (large hidden)",
          "64-gpu-llama3-70b.yaml", "comm_fraction", 0.15, 0.25),
    Claim("64-gpu-ib-recovers", "64 GPUs: moving to InfiniBand recovers 18-22 % of throughput",
          "64-gpu-llama3-70b.yaml", "ib_gain", 0.18, 0.22),
    Claim("256-gpu-gap", "256 GPUs: a 30-40 % throughput gap in favour of InfiniBand",
          "256-gpu-mixtral.yaml", "ib_gain", 0.30, 0.40),
)  # fmt: skip


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    roce_quality: str
    design: str
    value: float
    roce_comm_fraction: float

    @property
    def holds(self) -> bool:
        return self.claim.low <= self.value <= self.claim.high

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {"claim": c.id, "text": c.text, "quantity": c.quantity, "low": c.low,
                "high": c.high, "roce_quality": self.roce_quality, "design": self.design,
                "value": self.value, "holds": self.holds,
                "roce_comm_exposed_fraction": self.roce_comm_fraction}  # fmt: skip


def check_claims(catalog: Catalog | None = None) -> list[ClaimCheck]:
    cat = catalog or default_catalog()
    out = []
    for claim in CLAIMS:
        for quality, design in product(QUALITIES, DESIGNS):
            sets = (f"cluster.roce_quality={quality}", f"cluster.topology.design={design}")
            sc = load_scenario(EXAMPLES / claim.scenario, catalog=cat, overrides=sets)
            ib, roce = (r.values for r in evaluate_scenario(sc, cat, ["ib-ndr", "roce-400g"]))
            value = {
                "roce_share": roce["tokens_per_s"] / ib["tokens_per_s"],
                "ib_gain": ib["tokens_per_s"] / roce["tokens_per_s"] - 1,
                "comm_fraction": roce["comm_exposed_fraction"],
            }[claim.quantity]
            out.append(ClaimCheck(claim, quality, design, value, roce["comm_exposed_fraction"]))
    return out
