"""Expected time-to-train: the ideal run plus checkpoints and interruptions.

A synchronous job stops whenever any of its GPUs, hosts or links fails, so interruptions arrive
at a rate proportional to its GPU count (``catalog.reliability``: Llama 3's causes per GPU-hour,
the fabric's own from the cost model's [risk]). Each unplanned one loses the work done since
the last checkpoint, half an interval on average, and the restart; a planned one only the
restart. Checkpoints are taken at Young's optimum interval, sqrt(2 x write time x MTBF)
(Young 1974, "A first order approximation to the optimum checkpoint interval", CACM 17(9)),
and each one pauses training for its write time. First order: the interval is short against
the run, and interruptions do not strike during a restart.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from fabricplan.catalog import Catalog
from fabricplan.catalog.reliability import Reliability, load_reliability
from fabricplan.scenario import Scenario
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.plan import OPTIMIZER_BYTES, WEIGHT_BYTES
from fabricplan.workload.shapes import Shape, shape_of

SECONDS_PER_HOUR = 3600.0
# A checkpoint holds the 16-bit weights and the optimizer's FP32 state, not the gradients.
CHECKPOINT_BYTES_PER_WEIGHT = WEIGHT_BYTES + OPTIMIZER_BYTES


def checkpoint_bytes(s: Shape) -> float:
    return s.params_total * CHECKPOINT_BYTES_PER_WEIGHT


@dataclass(frozen=True)
class CheckpointPlan:
    """How often a job checkpoints and what an interruption costs it (wall-clock hours)."""

    write_s: float  # one checkpoint, written at the storage bandwidth of the job's GPUs
    unplanned_per_h: float  # unplanned interruptions per wall-clock hour of the job
    planned_per_h: float
    interval_s: float  # Young's optimum
    restart_h: float

    @property
    def mtbf_h(self) -> float:
        return 1 / self.unplanned_per_h

    @property
    def lost_work_h(self) -> float:
        return self.interval_s / 2 / SECONDS_PER_HOUR

    @property
    def loss_per_event_h(self) -> float:
        """An unplanned interruption: half an interval of work, then detection and restart."""
        return self.lost_work_h + self.restart_h


def checkpoint_plan(
    rel: Reliability, gpus: int, ckpt_bytes: float, family: str, maturity: str
) -> CheckpointPlan:
    rates = [(c, rel.rate(c, family, maturity) * gpus) for c in rel.causes]
    unplanned = sum(r for c, r in rates if not c.planned)
    write_s = ckpt_bytes / (rel.checkpoint_bytes_per_s_per_gpu * gpus)
    interval_s = math.sqrt(2 * write_s * SECONDS_PER_HOUR / unplanned)
    return CheckpointPlan(
        write_s=write_s,
        unplanned_per_h=unplanned,
        planned_per_h=sum(r for c, r in rates if c.planned),
        interval_s=interval_s,
        restart_h=rel.restart_h,
    )


def hours_per_interruption(sc: Scenario, cat: Catalog, family: str) -> float:
    """What one unplanned interruption costs the scenario's job on a fabric of ``family``, in
    hours of the whole job: the cost layer's price of a fabric-caused event. Without a training
    workload there is no work to lose, only the restart."""
    rel = load_reliability()
    w = sc.workload
    if w is None or w.kind != "training":
        return rel.restart_h
    ckpt = checkpoint_bytes(shape_of(cat.model(w.model)))
    maturity = sc.organization.network_maturity
    return checkpoint_plan(rel, sc.cluster.gpus, ckpt, family, maturity).loss_per_event_h


@dataclass(frozen=True)
class CauseCount:
    cause: str
    category: str
    interruptions: float  # expected in the run
    hours_lost: float  # wall-clock hours of the whole job


@dataclass(frozen=True)
class ExpectedRun:
    """The run with its checkpoints and interruptions, beside the ideal (wall-clock hours)."""

    gpus: int
    ideal_h: float
    expected_h: float
    checkpoint_write_s: float
    checkpoint_interval_h: float
    checkpoints: float
    checkpoint_h: float  # time spent writing checkpoints
    restart_h: float
    lost_work_per_interruption_h: float
    interruptions: float
    fabric_interruptions: float
    interruption_h: float  # lost work and restarts, all causes
    fabric_interruption_h: float
    by_cause: tuple[CauseCount, ...]

    @property
    def expected_gpu_hours(self) -> float:
        return self.expected_h * self.gpus

    @property
    def goodput(self) -> float:
        """Share of the wall-clock time that advances training."""
        return self.ideal_h / self.expected_h

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["by_cause"] = [asdict(c) for c in self.by_cause]
        return {**d, "expected_gpu_hours": self.expected_gpu_hours, "goodput": self.goodput}


def expected_run(
    ideal_h: float, gpus: int, ckpt_bytes: float, rel: Reliability, family: str, maturity: str
) -> ExpectedRun:
    """``ideal_h`` of training on ``gpus``, interrupted at ``rel``'s rates on a fabric of
    ``family`` run at ``maturity``. Interruptions arrive over the whole wall-clock time W, so
    W = ideal + checkpoints + W x (rate x loss per event), solved for W."""
    plan = checkpoint_plan(rel, gpus, ckpt_bytes, family, maturity)
    loss = plan.loss_per_event_h
    lost_share = plan.unplanned_per_h * loss + plan.planned_per_h * plan.restart_h
    if lost_share >= 1:
        raise WorkloadError(
            f"cluster.gpus: {gpus:,} GPUs are interrupted every {plan.mtbf_h * 60:.1f} min on "
            f"average and each interruption costs {loss * 60:.1f} min, so a synchronous run "
            "never finishes; use fewer GPUs per job"
        )
    checkpoints = ideal_h * SECONDS_PER_HOUR / plan.interval_s
    checkpoint_h = checkpoints * plan.write_s / SECONDS_PER_HOUR
    wall_h = (ideal_h + checkpoint_h) / (1 - lost_share)
    by_cause = []
    for c in rel.causes:
        n = rel.rate(c, family, maturity) * gpus * wall_h
        each = plan.restart_h if c.planned else loss
        by_cause.append(CauseCount(c.name, c.category, n, n * each))
    fabric = [b for b, c in zip(by_cause, rel.causes, strict=True) if c.fabric]
    return ExpectedRun(
        gpus=gpus,
        ideal_h=ideal_h,
        expected_h=wall_h,
        checkpoint_write_s=plan.write_s,
        checkpoint_interval_h=plan.interval_s / SECONDS_PER_HOUR,
        checkpoints=checkpoints,
        checkpoint_h=checkpoint_h,
        restart_h=plan.restart_h,
        lost_work_per_interruption_h=plan.lost_work_h,
        interruptions=sum(b.interruptions for b in by_cause),
        fabric_interruptions=sum(b.interruptions for b in fabric),
        interruption_h=sum(b.hours_lost for b in by_cause),
        fabric_interruption_h=sum(b.hours_lost for b in fabric),
        by_cause=tuple(by_cause),
    )
