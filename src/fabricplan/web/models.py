"""What the API's requests carry, with the same ranges as the command line's options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import UploadFile
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from fabricplan.collectives.busbw import OPS
from fabricplan.collectives.nccl_constants import MAX_CTAS
from fabricplan.congestion.network_backend import BACKEND_NAMES
from fabricplan.ops import range_message
from fabricplan.ops.cluster import MAX_GPUS_PER_NODE, MAX_HOPS, MAX_NICS_PER_NODE, MAX_NODES
from fabricplan.scenario.load import MAX_SCENARIO_BYTES
from fabricplan.scenario.models import MAX_GPUS
from fabricplan.topology.layout import DESIGNS

# Overrides one request may carry, and the length of one: a scenario has about 80 fields, and a
# key path with its value is a line.
MAX_SETS = 256
MAX_SET_CHARS = 1000
# Catalog ids, sizes and short options: a line.
MAX_WORD_CHARS = 200
# Runs a grade request may pick (--run N), as many as one log may hold.
MAX_RUN_PICKS = 1000
# A log sent as text: the upload's limit (the body's size is checked first).
MAX_LOG_CHARS = 8 * 2**20
# Monte Carlo seeds: any 63-bit whole number.
MAX_SEED = 2**63 - 1

Congestion = Literal[BACKEND_NAMES]  # type: ignore[valid-type]
Word = Annotated[str, StringConstraints(max_length=MAX_WORD_CHARS)]


def bounded(low: int, high: int | None = None) -> Any:
    """A whole number from ``low`` to ``high``, refused in the command line's words."""

    def check(value: int) -> int:
        if value < low or (high is not None and value > high):
            raise ValueError(range_message(value, low, high))
        return value

    schema: dict[str, Any] = {"type": "integer", "minimum": low}
    if high is not None:
        schema["maximum"] = high
    return Annotated[int, AfterValidator(check), WithJsonSchema(schema)]


SetList = Annotated[
    list[Annotated[str, StringConstraints(max_length=MAX_SET_CHARS)]],
    Field(
        max_length=MAX_SETS,
        description="Overrides as the command line's --set takes them: 'key.path=value'.",
    ),
]
# The example scenario the page opens with, as the schema's example of a scenario.
DEMO_SCENARIO = (Path(__file__).parent / "static" / "demo.yaml").read_text(encoding="utf-8")
ScenarioText = Annotated[
    str,
    StringConstraints(max_length=MAX_SCENARIO_BYTES),
    Field(description="The scenario: the text of a scenario YAML file.", examples=[DEMO_SCENARIO]),
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScenarioRequest(_Request):
    """A scenario and its overrides, as `fabricplan scenario check FILE --set ...` takes them."""

    scenario: ScenarioText
    set: SetList = []


class StepRequest(ScenarioRequest):
    """`fabricplan step`."""

    fabric: Annotated[list[Word], Field(max_length=64)] | None = Field(
        None, description="Evaluate these fabric ids instead of the scenario's."
    )
    congestion: Congestion | None = Field(None, description="How congestion is priced.")


class AdviseRequest(ScenarioRequest):
    """`fabricplan advise`."""

    break_even: bool = Field(True, description="Re-evaluate at other sizes for break-even.")
    seed: bounded(0, MAX_SEED) = Field(0, description="Monte Carlo seed.")  # type: ignore[valid-type]
    congestion: Congestion | None = Field(None, description="How congestion is priced.")


class ReportRequest(ScenarioRequest):
    """`fabricplan report`: the advice as one self-contained HTML page."""

    seed: bounded(0, MAX_SEED) = Field(0, description="Monte Carlo seed.")  # type: ignore[valid-type]
    congestion: Congestion | None = Field(None, description="How congestion is priced.")


class _Cluster(_Request):
    """A cluster from flags, a scenario, or both (flags win)."""

    scenario: ScenarioText | None = None
    set: SetList = []
    gpu: Word | None = None
    gpus_per_node: bounded(1, MAX_GPUS_PER_NODE) | None = None  # type: ignore[valid-type]
    nics_per_node: bounded(1, MAX_NICS_PER_NODE) | None = None  # type: ignore[valid-type]
    fabric: Word | None = None


class CollectiveRequest(_Cluster):
    """`fabricplan collective`."""

    op: Word = Field("all_reduce", description=f"One of: {', '.join(OPS)}.")
    nodes: bounded(1, MAX_NODES) | None = None  # type: ignore[valid-type]
    hops: bounded(1, MAX_HOPS) | None = None  # type: ignore[valid-type]
    sharp: bool = False
    sizes: Word | None = Field(None, description="Comma list, e.g. 8,1K,1M,64M,1G.")
    min: Word = "8"
    max: Word = "16G"
    factor: float = 2.0
    algo: Word | None = None
    proto: Word | None = None
    min_ctas: bounded(1, MAX_CTAS) | None = None  # type: ignore[valid-type]
    max_ctas: bounded(1, MAX_CTAS) | None = None  # type: ignore[valid-type]


class TopologyRequest(_Cluster):
    """`fabricplan topology`."""

    gpus: bounded(1, MAX_GPUS) | None = None  # type: ignore[valid-type]
    design: Literal[DESIGNS] | None = None  # type: ignore[valid-type]
    switch: Word | None = None
    oversubscription: Word | None = Field(None, description="Leaf down:up ratio, or LEAF,SPINE.")
    cable_length: Annotated[list[Word], Field(max_length=16)] = []
    compatible_optics: bool | None = None


class GradeOptions(_Cluster):
    """`fabricplan grade`'s options (the log comes as an upload or as text)."""

    op: Word | None = Field(None, description="Collective, if the log does not say.")
    nodes: bounded(1, MAX_NODES) | None = None  # type: ignore[valid-type]
    hops: bounded(1, MAX_HOPS) | None = None  # type: ignore[valid-type]
    sharp: bool = False
    run: Annotated[list[bounded(1)], Field(max_length=MAX_RUN_PICKS)] = []  # type: ignore[valid-type]


class GradeForm(GradeOptions):
    """`fabricplan grade`: the log as an upload (``log``) or as text (``log_text``), and the
    options as form fields."""

    log: UploadFile | None = Field(None, description="nccl-tests output, text or -J JSON.")
    log_text: Annotated[str, StringConstraints(max_length=MAX_LOG_CHARS)] | None = Field(
        None, description="The log as text, instead of an upload."
    )


class Problem(BaseModel):
    field: str
    message: str
    value: Any = None


class ErrorDoc(BaseModel):
    """Bad input: what is wrong, and each field's problem (its value and what is allowed)."""

    error: str
    problems: list[Problem]
