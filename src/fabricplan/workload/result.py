"""A fabric's workload figures as the layers above read them: typed records, and the document
``fabricplan step --json`` prints (``to_dict``), whose keys and order they keep."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fabricplan.catalog.reliability import HOURS_PER_DAY
from fabricplan.validation.envelope import Validation
from fabricplan.workload.inference import ServingRates
from fabricplan.workload.interruptions import ExpectedRun


@dataclass(frozen=True, kw_only=True)
class StepFigures:
    """What a training step and a serving step share."""

    kind: ClassVar[str]
    step_time_s: float  # training: one step; serving: the inter-token latency
    tokens_per_s: float  # training: tokens trained; serving: output tokens, all replicas
    tflops_per_gpu: float
    mfu: float
    comm_exposed_fraction: float
    memory_per_gpu_GB: float
    breakdown: dict[str, float]  # the step's parts by name, seconds (``compute_s``, ...)
    # the whole run: None when serving, which has no end
    time_to_train_days: float | None = None
    gpu_hours: float | None = None

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class TrainingFigures(StepFigures):
    """One training step on a fabric, and the run it makes."""

    kind: ClassVar[str] = "training"
    hw_tflops_per_gpu: float  # with recomputation, which the model FLOPs leave out
    time_to_train_days: float
    gpu_hours: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "hw_tflops_per_gpu": self.hw_tflops_per_gpu,
            "mfu": self.mfu,
            "comm_exposed_fraction": self.comm_exposed_fraction,
            "time_to_train_days": self.time_to_train_days,
            "gpu_hours": self.gpu_hours,
            "memory_per_gpu_GB": self.memory_per_gpu_GB,
            "breakdown": self.breakdown,
        }


@dataclass(frozen=True, kw_only=True)
class ServingFigures(StepFigures):
    """Serving on a fabric: latencies, and token rates per replica and in total."""

    kind: ClassVar[str] = "inference"
    ttft_s: float
    itl_s: float
    rates: ServingRates
    network_fraction: float

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens per second, all replicas."""
        return self.rates.output_tokens_per_s_total

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step_time_s": self.step_time_s,
            "ttft_s": self.ttft_s,
            "itl_s": self.itl_s,
            "tokens_per_s": self.tokens_per_s,
            **self.rates.to_dict(),
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "comm_exposed_fraction": self.comm_exposed_fraction,
            "network_fraction": self.network_fraction,
            "time_to_train_days": self.time_to_train_days,
            "gpu_hours": self.gpu_hours,
            "memory_per_gpu_GB": self.memory_per_gpu_GB,
            "breakdown": self.breakdown,
        }


@dataclass(frozen=True)
class FabricResult:
    """The workload on one fabric: its figures, the expected run and where it stands against
    the published runs."""

    fabric: str
    figures: TrainingFigures | ServingFigures
    # training: the run with its checkpoints and interruptions; None when serving, or when
    # interruptions come faster than the job can recover (``expected_note`` says so)
    expected: ExpectedRun | None = None
    expected_note: str | None = None
    # where the result stands against the published runs the model was checked on
    validation: Validation | None = None

    @property
    def kind(self) -> str:
        return self.figures.kind

    @property
    def training(self) -> TrainingFigures | None:
        f = self.figures
        return f if isinstance(f, TrainingFigures) else None

    @property
    def serving(self) -> ServingFigures | None:
        f = self.figures
        return f if isinstance(f, ServingFigures) else None

    @property
    def expected_time_to_train_days(self) -> float | None:
        e = self.expected
        return None if e is None else e.expected_h / HOURS_PER_DAY

    @property
    def expected_gpu_hours(self) -> float | None:
        return None if self.expected is None else self.expected.expected_gpu_hours

    @property
    def goodput(self) -> float | None:
        """Training: the share of the run's hours that train (0 when it never finishes)."""
        if self.training is None:
            return None
        return 0.0 if self.expected is None else self.expected.goodput

    def expected_run_document(self) -> dict[str, Any] | None:
        """The expected run as ``step --json`` prints it (training), or why there is none."""
        if self.training is None:
            return None
        e = self.expected
        return {"note": self.expected_note} if e is None else e.to_dict()

    def to_dict(self) -> dict[str, Any]:
        v = None if self.validation is None else self.validation.to_dict()
        out = {"fabric": self.fabric, **self.figures.to_dict(), "validation": v}
        out |= {
            "expected_time_to_train_days": self.expected_time_to_train_days,
            "expected_gpu_hours": self.expected_gpu_hours,
            "goodput": self.goodput,
        }
        if self.training is not None:
            out["expected_run"] = self.expected_run_document()
        return out
