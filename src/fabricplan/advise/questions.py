"""Seed 001's six questions for a provider, with what the scenario already plans for each."""

from __future__ import annotations

from fabricplan.catalog import Catalog
from fabricplan.catalog.providers import QUESTIONS
from fabricplan.scenario import Scenario


def provider_questions(sc: Scenario, cat: Catalog) -> list[dict[str, object]]:
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
        {
            "key": key,
            "question": text,
            "planned": planned[key],
            "provider_must_answer": key != "roce_tuning" or bool(roce),
        }
        for key, text in QUESTIONS
    ]
