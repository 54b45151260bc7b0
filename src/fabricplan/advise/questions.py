"""Seed 001's six questions for a provider, with what the scenario already plans for each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.catalog.providers import QUESTIONS
from fabricplan.scenario import Scenario


@dataclass(frozen=True)
class ProviderQuestion:
    key: str
    question: str
    planned: str | None  # what the scenario already plans for it
    provider_must_answer: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "question": self.question,
            "planned": self.planned,
            "provider_must_answer": self.provider_must_answer,
        }


def provider_questions(sc: Scenario, cat: Catalog) -> list[ProviderQuestion]:
    c = sc.cluster
    fabrics = [cat.fabric(f) for f in c.fabrics]
    roce = [f.id for f in fabrics if f.family in ("roce", "uec")]
    planned: dict[str, str | None] = {
        "topology": f"{c.topology.design}, {c.topology.oversubscription:g}:1 at the leaf",
        "generation": ", ".join(f.name for f in fabrics),
        "validated": f"{c.gpus:,} GPUs",
        "nccl_benchmarks": "check them with `fabricplan grade RESULTS --scenario FILE`",
        "roce_tuning": (
            f"RoCE quality assumed '{c.roce_quality}' for {', '.join(roce)}"
            if roce
            else "not applicable: no RoCE fabric in the scenario"
        ),
        "issue_resolution": None,
    }
    return [
        ProviderQuestion(key, text, planned[key], key != "roce_tuning" or bool(roce))
        for key, text in QUESTIONS
    ]
