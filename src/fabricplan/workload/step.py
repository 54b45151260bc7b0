"""A training step's time and its parts, per plan: the record the step model
(:mod:`.training`) hands the layers above."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from fabricplan.workload import vec
from fabricplan.workload.memory import Memory

# The parts a step's time adds up from, in the order its breakdown lists them.
STEP_PARTS = (
    "compute",
    "overlap_slowdown",
    "tp_comm",
    "pp_comm",
    "ep_comm",
    "cp_comm",
    "dp_comm",
    "bubble",
    "optimizer",
)


@dataclass(frozen=True)
class Step:
    """Seconds per training step and its parts, per plan (arrays of shape (N,))."""

    time: np.ndarray
    compute: np.ndarray
    tp_comm: np.ndarray
    pp_comm: np.ndarray
    ep_comm: np.ndarray
    cp_comm: np.ndarray  # exposed part
    dp_comm: np.ndarray  # exposed part
    dp_comm_total: np.ndarray
    bubble: np.ndarray
    optimizer: np.ndarray
    overlap_slowdown: np.ndarray  # compute lost to communication kernels running beside it
    tokens: np.ndarray  # per step
    model_flops: np.ndarray  # per step, matmul weights + attention (Megatron's MFU count)
    hw_flops: np.ndarray  # per step, with recomputation (Megatron's count)
    memory: Memory
    # all the communication of each stream per step, hidden or not
    tp_comm_total: np.ndarray
    ep_comm_total: np.ndarray
    cp_comm_total: np.ndarray

    @property
    def comm_exposed(self) -> np.ndarray:
        return self.tp_comm + self.pp_comm + self.ep_comm + self.cp_comm + self.dp_comm

    def breakdown(self, i: int = 0) -> dict[str, float]:
        return {f"{p}_s": float(getattr(self, p)[i]) for p in STEP_PARTS}


def as_rows(one: Step) -> Step:
    """A step of one plan worked out on scalars, as arrays of one like any batch's."""
    m = one.memory
    memory_rows = Memory(
        *(vec.rows(x) for x in (m.weights, m.gradients, m.optimizer, m.activations)), m.capacity
    )
    parts = {f.name: vec.rows(getattr(one, f.name)) for f in fields(Step) if f.name != "memory"}
    return Step(**parts, memory=memory_rows)
