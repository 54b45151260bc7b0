"""What a pipeline stage spends a micro-batch on at its boundaries, by the engine that runs the
pipeline schedule: its sends and receives, and what it does with what it receives.

A stage's output is split over its tensor-parallel ranks for the send (each rank sends its slice
on its own NIC: the step model prices one such transfer). How many transfers hold up a stage,
and what the receiver does with the slices, differ by engine:

- ``megatron``: a stage's two exchanges a micro-batch each send and receive at once
  (``send_forward_recv_backward``, ``send_backward_recv_forward``: batched isend/irecv), two
  transfers' time. With sequence parallelism the slices are what each rank works on, so nothing
  more happens (Megatron-Core). Without it, Megatron-LM's scatter/gather optimisation
  (Narayanan et al. SC'21, Sec. 4.1; ``--scatter-gather-tensors-in-pipeline``, on by default in
  Megatron-LM's 2021-2022 releases) all-gathers the full tensor over the TP group after each
  receive: the activations in the forward pass and their gradient in the backward pass, two a
  micro-batch (megatron/p2p_communication.py, ``_communicate``: ``gather_split_1d_tensor``).
  Megatron-Core dropped that optimisation: without sequence parallelism each TP rank sends its
  whole copy, tp times the bytes on the NICs and no gather. Not modelled (its runs use
  sequence parallelism wherever TP > 1).
- ``deepspeed``: DeepSpeed's PipelineEngine (as Megatron-DeepSpeed, BLOOM's and MT-NLG's
  trainer, runs it) splits every tensor it sends over the TP group whenever TP > 1
  (deepspeed/runtime/pipe/engine.py v0.5.4, ``is_pipe_partitioned = is_model_parallel``, the
  same for gradients). It sends and receives one tensor at a time, each a blocking call
  (runtime/pipe/p2p.py: ``dist.send`` / ``dist.recv``, a broadcast in a two-rank group before
  PyTorch 1.8), and a stage's micro-batch has four of them in turn
  (runtime/pipe/schedule.py, ``TrainSchedule.steps``: receive the activations and send a
  gradient before a forward pass, send the activations and receive a gradient before a backward
  pass): four transfers' time. Where a stage would wait for its neighbour anyway, part of a
  transfer hides in that wait, so four errs slow by a fraction of a transfer. It rebuilds what
  it split with ``PartitionedTensor.full`` (runtime/utils.py): a
  zero-filled buffer of the whole tensor, the rank's own slice copied in, an all-gather over
  TP, and a clone of the result. It rebuilds three times a micro-batch: the received input
  before the forward pass, the stage's own output before the backward pass (it was freed after
  the send) and the received gradient (``_exec_forward_pass``, ``_exec_backward_pass``). The
  engine has no interleaved schedule.

Each rebuild or gather waits for its receive and the pass waits for it: on the critical path.
Only the transfers cross between stages (the fabric, where the stages are on different nodes):
a gather is an all-gather in the TP group (NVLink, unless TP spans nodes), and a rebuild's
zero fill and copies are memory-bound kernels, so the step model counts them as tensor-parallel
communication and as compute.
The counts are a middle stage's, which sets the pace from three stages on. A stage at either end
of the chain receives one way only (the first no activations, the last no gradients), so in a
two-stage pipeline (pp x vp = 2) each stage gathers once, and DeepSpeed's stages make two
transfers and at most two rebuilds (the first stage rebuilds its output and the gradient it
receives). Megatron's transfers stay two there too, which errs slow by one: the model's count
before the engines came in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec

PIPELINE_ENGINES = ("megatron", "deepspeed")
# Transfers that hold up a middle stage per micro-batch (and model chunk), see the docstring;
# DeepSpeed's in a two-stage pipeline.
TRANSFERS_PER_MICRO_BATCH = {"megatron": 2, "deepspeed": 4}
DEEPSPEED_TWO_STAGE_TRANSFERS = 2
# Megatron-LM's scatter/gather: one all-gather per receive, the forward's and the backward's
# (one in a two-stage chain).
MEGATRON_GATHERS_PER_MICRO_BATCH = 2
# DeepSpeed's PartitionedTensor.full calls per micro-batch on a middle stage (see the
# docstring), and on the busier of two stages.
DEEPSPEED_REBUILDS_PER_MICRO_BATCH = 3
DEEPSPEED_TWO_STAGE_REBUILDS = 2
# HBM bytes one rebuild moves per byte of the whole tensor, besides the all-gather: the zero
# fill writes it (1), the clone reads and writes it (2); the rank's own slice, copied in, adds
# 2 / tp of it (``rebuild_hbm_share``).
DEEPSPEED_REBUILD_HBM_PER_BYTE = 3.0


def gather_ranks(engine: str, tp: ArrayLike, pp: ArrayLike, sp: ArrayLike) -> np.ndarray:
    """The TP group size a receiving stage all-gathers a stage's output over, per plan: TP
    where the engine gathers (Megatron without sequence parallelism; DeepSpeed always), 1 (no
    gather) otherwise or without a pipeline."""
    tp, pp = vec.floats(tp), vec.floats(pp)
    split = (tp > 1) & (pp > 1)
    if engine == "megatron":
        split = split & ~np.asarray(sp, dtype=bool)
    return vec.where(split, tp, 1.0)


def rebuild_hbm_share(tp: ArrayLike) -> np.ndarray:
    """HBM bytes of one DeepSpeed rebuild per byte of the whole tensor."""
    return DEEPSPEED_REBUILD_HBM_PER_BYTE + 2.0 / vec.floats(tp)


@dataclass(frozen=True)
class Boundary:
    """Seconds per micro-batch (and model chunk) a stage spends at its boundaries, by where."""

    sends: np.ndarray  # transfers between stages
    gathers: np.ndarray  # all-gathers in the TP group
    copies: np.ndarray  # memory-bound kernels (DeepSpeed's zero fills and copies)

    @property
    def total(self) -> np.ndarray:
        return self.sends + self.gathers + self.copies


def boundary_seconds(
    engine: str,
    pp: ArrayLike,
    vp: ArrayLike,
    transfer_s: ArrayLike,
    gather_s: ArrayLike,
    ranks: ArrayLike,
    tensor_bytes: ArrayLike,
    hbm_bytes_per_s: float,
) -> Boundary:
    """What the stage that sets the pace spends at its boundaries (``pp`` stages of ``vp``
    chunks): its transfers (``transfer_s`` each) and what it does with what it receives;
    ``gather_s`` is one all-gather of the whole ``tensor_bytes`` over ``ranks`` TP ranks (0
    where ``ranks`` is 1)."""
    two = vec.floats(pp) * vec.floats(vp) == 2  # a chain of two: each end receives one way
    gather_s = vec.floats(gather_s)
    if engine == "deepspeed":
        ranks = vec.floats(ranks)
        copies = vec.where(ranks > 1, rebuild_hbm_share(ranks) * tensor_bytes, 0.0)
        middle = TRANSFERS_PER_MICRO_BATCH[engine], DEEPSPEED_REBUILDS_PER_MICRO_BATCH
        transfers = vec.where(two, DEEPSPEED_TWO_STAGE_TRANSFERS, middle[0])
        rebuilds = vec.where(two, DEEPSPEED_TWO_STAGE_REBUILDS, middle[1])
        return Boundary(
            transfers * vec.floats(transfer_s),
            rebuilds * gather_s,
            rebuilds * copies / hbm_bytes_per_s,
        )
    gathers = vec.where(two, 1.0, MEGATRON_GATHERS_PER_MICRO_BATCH)
    sends = TRANSFERS_PER_MICRO_BATCH[engine] * vec.floats(transfer_s)
    return Boundary(sends, gathers * gather_s, vec.full(sends, 0.0))
