"""The validated envelope: where a result stands against the published runs the workload model
was checked on (``fabricplan validate --suite training``, ``held-back`` and ``recipes``).

The envelope is derived from the runs themselves (:mod:`.runs`), per GPU type. The rule:
a training configuration is *inside* when

- its GPU type is one of the validated ones (by catalog id: an H200 is not an H100);
- its parameter count, GPU count, tp, pp, dp, cp, ep, vp and sequence length each lie within
  the min-max of the runs on that GPU (no extrapolation, not even a factor: the errors are only
  known where runs were measured);
- its fabric family, precision, ZeRO stage, attention kind, dense-or-MoE and pipeline engine
  (Megatron's or DeepSpeed's, none without a pipeline) are each among those of the runs on
  that GPU.

What no run has (expert parallelism, FP8, ZeRO-3, TCP fabrics, MoE or MLA models) is therefore
outside by the same rule, not by a list. Serving has no published measurement in the suites:
every serving result is "not validated". Beside the verdict comes the error the model made on
the validated runs nearest the configuration (on its GPU, or on any GPU when its GPU is not
validated), from the errors recorded in ``recorded_errors.toml``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache
from statistics import median
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.catalog.architecture import count_params
from fabricplan.scenario import Scenario
from fabricplan.validation.runs import Configuration, ValidatedRun, engine_of, validated_runs

# Numeric dimensions: (field, how it is named). Nearness is measured on the log2 of those in
# NEAR_DIMENSIONS, so that doubling any of them counts the same.
SPANS = (
    ("params", "parameter count"),
    ("gpus", "GPU count"),
    ("tp", "tensor parallel"),
    ("pp", "pipeline parallel"),
    ("dp", "data parallel"),
    ("cp", "context parallel"),
    ("ep", "expert parallel"),
    ("vp", "interleaved chunks (vp)"),
    ("seq_len", "sequence length"),
)
CHOICES = (
    ("fabric_family", "fabric family"),
    ("precision", "precision"),
    ("zero", "ZeRO stage"),
    ("attention", "attention"),
    ("moe", "architecture"),
    ("pipeline_engine", "pipeline engine"),
)
NEAR_DIMENSIONS = ("params", "gpus", "tp", "pp", "cp", "seq_len")
# Nearest runs whose errors are reported: a median over five is not one run's luck, and on
# Table 1's size ladder (each run about twice the last) five reach about 4x either way.
NEAREST_RUNS = 5
ALL_GPUS = "any validated GPU"


@dataclass(frozen=True)
class Outside:
    """One dimension on which a configuration leaves the envelope."""

    dimension: str
    value: str
    validated: str
    reason: str


@dataclass(frozen=True)
class Errors:
    """Absolute errors of some validated runs (predicted / measured throughput - 1)."""

    runs: int
    median_abs: float
    worst_abs: float

    @classmethod
    def of(cls, runs: tuple[ValidatedRun, ...]) -> Errors:
        a = [abs(r.error) for r in runs]
        return cls(len(a), median(a), max(a))

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "median_abs": self.median_abs, "worst_abs": self.worst_abs}

    @staticmethod
    def as_dict(e: Errors | None) -> dict[str, Any] | None:
        return None if e is None else e.to_dict()


@dataclass(frozen=True)
class Validation:
    """Whether a result lies inside the validated envelope, why not, and the errors seen."""

    kind: str  # "training" or "inference"
    inside: bool
    outside: tuple[Outside, ...]
    compared_on: str  # the GPU whose runs it was compared with, or ALL_GPUS
    nearest: tuple[ValidatedRun, ...] = ()
    nearest_errors: Errors | None = None
    envelope_errors: Errors | None = None  # every run it was compared with

    @property
    def suites(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.suite for r in self.nearest))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "inside": self.inside,
            "outside": [vars(o) for o in self.outside],
            "compared_on": self.compared_on,
            "nearest": [r.to_dict() for r in self.nearest],
            "suites": list(self.suites),
            "nearest_errors": Errors.as_dict(self.nearest_errors),
            "envelope_errors": Errors.as_dict(self.envelope_errors),
            "summary": self.summary(),
        }

    def summary(self) -> str:
        """One line for a person: the verdict, the reasons, the errors seen nearby."""
        parts = [o.reason for o in self.outside]
        if self.kind != "training":
            return "; ".join(parts)
        head = "inside the validated range" if self.inside else "outside the validated range"
        e = self.nearest_errors
        if e is not None:
            parts.append(
                f"errors seen on the {e.runs} nearest validated runs ({', '.join(self.suites)}"
                f"): median {_pct(e.median_abs)}, worst {_pct(e.worst_abs)}"
            )
        return f"{head}: {'; '.join(parts)}" if parts else head


SERVING = Validation(
    kind="inference",
    inside=False,
    outside=(
        Outside(
            "workload",
            "serving",
            "training only",
            "serving is not validated: the suites hold no published serving run",
        ),
    ),
    compared_on=ALL_GPUS,
)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def shown(dimension: str, v: Any) -> str:
    """A dimension's value as the envelope prints it: 70.6B, 1,008B, 16,384, MoE."""
    if dimension == "params":
        b = v / 1e9
        return f"{b:,.0f}B" if b >= 100 else f"{b:.3g}B"
    if dimension == "moe":
        return "MoE" if v else "dense"
    return f"{v:,}" if isinstance(v, int) else str(v)


@dataclass(frozen=True)
class Envelope:
    """The validated runs of one GPU type (or of all), and what they span."""

    name: str  # "H100", or ALL_GPUS
    runs: tuple[ValidatedRun, ...]

    def span(self, dim: str) -> tuple[int, int]:
        """The least and greatest value of a numeric dimension over the runs."""
        values = [getattr(r.config, dim) for r in self.runs]
        return min(values), max(values)

    def span_text(self, dim: str) -> str:
        """The span as printed: 8-16,384, or 1 when every run has the same value."""
        lo, hi = self.span(dim)
        return shown(dim, lo) + ("" if lo == hi else f"-{shown(dim, hi)}")

    def choices(self, dim: str) -> list[Any]:
        """The values a categorical dimension takes over the runs."""
        return sorted({getattr(r.config, dim) for r in self.runs})

    def outside(self, c: Configuration) -> list[Outside]:
        where = "" if self.name == ALL_GPUS else f" on {self.name}"
        out = []
        for dim, label in SPANS:
            lo, hi = self.span(dim)
            if lo <= getattr(c, dim) <= hi:
                continue
            v, seen = shown(dim, getattr(c, dim)), self.span_text(dim)
            if lo == hi:
                why = f"{label} {v} never validated{where} (validated: {seen} only)"
            else:
                why = f"{label} {v} outside the validated {seen}{where}"
            out.append(Outside(dim, v, seen, why))
        for dim, label in CHOICES:
            values = self.choices(dim)
            if getattr(c, dim) in values:
                continue
            v = shown(dim, getattr(c, dim))
            seen = ", ".join(shown(dim, x) for x in values)
            out.append(Outside(dim, v, seen, f"{label} {v} never validated{where} ({seen} only)"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.name,
            "runs": len(self.runs),
            "suites": list(dict.fromkeys(r.suite for r in self.runs)),
            "spans": {d: list(self.span(d)) for d, _ in SPANS},
            "choices": {d: self.choices(d) for d, _ in CHOICES},
            "errors": Errors.of(self.runs).to_dict(),
        }

    def nearest(self, c: Configuration) -> tuple[ValidatedRun, ...]:
        """The runs nearest ``c`` in log2 of ``NEAR_DIMENSIONS``, among those whose GEMMs run at
        the same rate (FP8, or 16-bit: BF16 and FP16 share one) when there are enough of them:
        the FP8 runs come out further from the model than the 16-bit ones, so a BF16 job is not
        told an FP8 run's error, nor the reverse. Runs of the same architecture (MoE or dense)
        come first: a MoE job is told the errors of the MoE runs on its GPU, whatever their
        precision (there are few), before any dense run's."""

        def distance(r: ValidatedRun) -> float:
            return math.dist(
                [math.log2(getattr(c, d)) for d in NEAR_DIMENSIONS],
                [math.log2(getattr(r.config, d)) for d in NEAR_DIMENSIONS],
            )

        fp8 = c.precision == "fp8"
        same = [r for r in self.runs if (r.config.precision == "fp8") == fp8]
        pool = same if len(same) >= NEAREST_RUNS else self.runs
        if c.moe:  # MoE runs are few: each of them, whatever its precision
            pool = [r for r in self.runs if r.config.moe] + [r for r in pool if not r.config.moe]
        return tuple(
            sorted(pool, key=lambda r: (r.config.moe != c.moe, distance(r)))[:NEAREST_RUNS]
        )


@cache
def envelopes() -> dict[str, Envelope]:
    """GPU id -> its envelope, once per process."""
    runs = validated_runs()
    gpus = dict.fromkeys(r.config.gpu for r in runs)
    return {g: Envelope(g.upper(), tuple(r for r in runs if r.config.gpu == g)) for g in gpus}


# Configurations whose answer is kept: advise and a sweep ask about the same configuration for
# every variant that changes prices, rates or the fabric's figures (about 40 an advise), and
# an answer walks every validated run.
CHECKED_CONFIGURATIONS = 512


@lru_cache(maxsize=CHECKED_CONFIGURATIONS)
def check(c: Configuration) -> Validation:
    """Where a training configuration stands against the validated runs (kept: frozen)."""
    env = envelopes()
    own = env.get(c.gpu)
    outside = []
    if own is None:
        names = ", ".join(e.name for e in env.values())
        outside.append(
            Outside(
                "gpu",
                c.gpu.upper(),
                names,
                f"{c.gpus:,} {c.gpu.upper()} GPUs: GPU type never validated (validated: {names})",
            )
        )
        own = Envelope(ALL_GPUS, validated_runs())
    outside += own.outside(c)
    near = own.nearest(c)
    return Validation(
        kind="training",
        inside=not outside,
        outside=tuple(outside),
        compared_on=own.name,
        nearest=near,
        nearest_errors=Errors.of(near),
        envelope_errors=Errors.of(own.runs),
    )


def configuration_of(sc: Scenario, cat: Catalog, fabric: str) -> Configuration:
    """A resolved training scenario on one of its fabrics, as the envelope compares it."""
    w = sc.workload
    assert w is not None and w.seq_len is not None, "resolve first"
    p = w.parallel
    assert p.dp != "auto", "resolve first"
    model = cat.model(w.model)
    return Configuration(
        gpu=sc.cluster.gpu,
        fabric_family=cat.fabric(fabric).family,
        params=count_params(model).total,
        moe=model.moe is not None,
        attention=model.attention,
        gpus=sc.cluster.gpus,
        tp=p.tp,
        pp=p.pp,
        dp=p.dp,
        cp=p.cp,
        ep=p.ep,
        vp=p.vp,
        zero=p.zero,
        precision=w.precision,
        seq_len=w.seq_len,
        pipeline_engine=engine_of(p.pipeline_engine, p.pp),
    )


def validation_of(sc: Scenario, cat: Catalog, fabric: str) -> Validation:
    """The scenario's result on ``fabric`` against the envelope; serving is never validated."""
    w = sc.workload
    if w is None or w.kind != "training":
        return SERVING
    return check(configuration_of(sc, cat, fabric))
