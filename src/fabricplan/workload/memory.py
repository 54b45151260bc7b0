"""Does a plan fit in GPU memory? Weights, gradients, optimizer state and activations per GPU.

Pipeline stages keep different numbers of micro-batches' activations in flight. Megatron-LM's
schedules start each rank with a number of warm-up forward passes: under 1F1B, pp - rank - 1,
so the first stage holds pp micro-batches and the last one; interleaved over vp chunks,
2 (pp - rank - 1) + (vp - 1) pp chunk passes, so the first stage holds pp + (pp - 1) / vp
micro-batches' worth (Narayanan et al. SC'21, Sec. 2.2) and the last pp - (pp - 1) / vp. The
last stage also holds one micro-batch's logits. Both hold a vocabulary-sized table (input
embedding, output head). The last stage also holds the multi-token-prediction modules, as
Megatron-Core places them (a layout puts them in the loss's chunk, on the last stage too): each
a layer of the last layer's kind and a 2h -> h projection, their weights with their gradients
and optimizer state, their activations for the micro-batches in flight there, and a
micro-batch of logits of their own. The busier of the two stages sets the memory.

Under a pipeline layout every stage is priced as the layout fills it (its layers, the input
embedding and the output head where it holds them, its MTP modules and heads), each with the
micro-batches in flight at its rank: pp - r under 1F1B, (2 (pp - r - 1) + (vp - 1) pp + 1) / vp
chunk passes' worth when interleaved; the busiest sets the memory. A layer is the model's
average layer, in weights and in activations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.catalog import Gpu
from fabricplan.workload import vec
from fabricplan.workload.pipeline_layout import stages_in_order
from fabricplan.workload.plan import OPTIMIZER_BYTES, WEIGHT_BYTES, Hardware, Plans
from fabricplan.workload.shapes import (
    LOGITS_BYTES_PER_LOGIT,
    MTP_PROJ_PARAMS_PER_H2,
    Shape,
    activation_bytes_per_token_layer,
)

# Share of HBM a training process can fill: the CUDA context, NCCL buffers and allocator
# fragmentation take the rest. Assumption (PyTorch practice: a few GB of an 80 GB part).
USABLE_MEMORY_FRACTION = 0.92


def usable_bytes(gpu: Gpu) -> float:
    """HBM a training or serving process can fill on ``gpu``."""
    return gpu.memory_gb * 1e9 * USABLE_MEMORY_FRACTION


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU on the busiest stage, per plan (arrays of shape (N,))."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    capacity: float

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def fits(self) -> np.ndarray:
        return self.total <= self.capacity


def params_per_gpu(s: Shape, p: Plans) -> np.ndarray:
    """Weights one GPU holds before ZeRO sharding: dense layers split by tp x pp, routed experts
    also by ep, and the input embedding (first stage) split by tp."""
    layer_dense = s.params_layer_dense
    # a one-stage pipeline holds both the input embedding and the output head
    emb = vec.where(p.pp == 1, s.params_embedding, float(s.vocab * s.hidden))
    return layer_dense / (p.tp * p.pp) + s.params_expert / (p.tp * p.pp * p.ep) + emb / p.tp


def _stage_params(s: Shape, layers: int, embedding: bool, head: bool) -> tuple[float, float]:
    """(dense, routed-expert) weights of a stage holding ``layers`` layers (the model's average
    layer each), the input embedding and the output head where it holds them; before TP, EP
    and ZeRO split them. One stage holding both holds the model's tables (one, if tied)."""
    per_layer = s.params_layer_dense / s.layers
    table = float(s.vocab * s.hidden)
    tables = s.params_embedding if embedding and head else table * (embedding + head)
    return per_layer * layers + tables, s.params_expert / s.layers * layers


def _busiest_laid_out(
    s: Shape,
    p: Plans,
    states: Callable[[ArrayLike, ArrayLike], tuple[np.ndarray, ...]],
    one_layer: np.ndarray,
    logits: np.ndarray,
    mtp_one: tuple[ArrayLike, ArrayLike],
) -> tuple[np.ndarray, ...]:
    """(weights, gradients, optimizer, activations) of the busiest stage under the plans'
    pipeline layout (one pp and vp for all of them): each stage its own layers, tables, MTP
    modules (``mtp_one``: one module's dense and routed weights per GPU) and heads, with the
    micro-batches in flight at its rank (Megatron's warm-up, see the module's docstring);
    ``states`` prices weights as ``memory`` does."""
    assert p.pipeline_layout is not None
    best: tuple[np.ndarray, ...] | None = None
    pp, vp = int(np.ravel(p.pp)[0]), int(np.ravel(p.vp)[0])
    for r, (load, embedding) in enumerate(stages_in_order(p.pipeline_layout, pp)):
        dense, expert = _stage_params(s, load.layers, embedding, load.heads > load.mtp)
        w, g, o = states(
            dense / p.tp + load.mtp * mtp_one[0],
            expert / (p.tp * p.ep) + load.mtp * mtp_one[1],
        )
        held = (2 * (pp - r - 1) + (vp - 1) * pp + 1) / vp if vp > 1 else pp - r
        acts = vec.minimum(held, p.microbatches) * load.units * one_layer + load.heads * logits
        here = (w, g, o, acts, w + g + o + acts)
        if best is not None:
            more = here[4] > best[4]
            here = tuple(vec.where(more, a, b) for a, b in zip(here, best, strict=True))
        best = here
    assert best is not None
    return best[:4]


def memory(s: Shape, p: Plans, hw: Hardware) -> Memory:
    n = params_per_gpu(s, p)
    expert_n = s.params_expert / (p.tp * p.pp * p.ep)
    # ZeRO shards a weight over the ranks that hold the same copy of it: the data-parallel group
    # (dp x cp) for dense weights, but only dp x cp / ep for routed experts, since expert
    # parallelism already splits the experts over that group (Megatron-Core's expert
    # data-parallel group, parallel_state: data_modulo_expert_parallel)
    shard = p.dp * p.cp
    expert_shard = vec.maximum(shard / p.ep, 1)

    def sharded(
        bytes_per_param: float | np.ndarray, stage: int, dense: ArrayLike, expert: ArrayLike
    ) -> np.ndarray:
        on = p.zero >= stage
        return bytes_per_param * (
            dense / vec.where(on, shard, 1) + expert / vec.where(on, expert_shard, 1)
        )

    def states(dense: ArrayLike, expert: ArrayLike) -> tuple[np.ndarray, ...]:
        """Weights, gradients and optimizer state of ``dense`` and ``expert`` parameters."""
        return (
            sharded(WEIGHT_BYTES, 3, dense, expert),
            sharded(p.grad_bytes, 2, dense, expert),
            sharded(OPTIMIZER_BYTES, 1, dense, expert),
        )

    weights, grads, optim = states(n - expert_n, expert_n)
    per_token = activation_bytes_per_token_layer(s, p.seq_len, p.tp, p.sp, p.recompute, p.flash)
    tokens = p.tokens_per_micro_batch
    interleaved = p.vp > 1
    first = vec.where(interleaved, p.pp + (p.pp - 1) / p.vp, p.pp)
    last = vec.where(interleaved, p.pp - (p.pp - 1) / p.vp, 1.0)
    one_mb = per_token * tokens * s.layers / p.pp
    logits = tokens * s.vocab / p.tp * LOGITS_BYTES_PER_LOGIT
    first_acts = one_mb * vec.minimum(first, p.microbatches)
    last_acts = one_mb * vec.minimum(last, p.microbatches) + logits
    cap = usable_bytes(hw.gpu)
    h = float(s.hidden)
    mtp_dense_one = (s.last_layer_params + MTP_PROJ_PARAMS_PER_H2 * h * h) / p.tp
    mtp_expert_one = s.last_layer_expert_params / (p.tp * p.ep)
    if p.pipeline_layout is not None:
        mtp_one = (mtp_dense_one, mtp_expert_one)
        busiest = _busiest_laid_out(s, p, states, per_token * tokens, logits, mtp_one)
        return Memory(*busiest, cap)
    if not p.mtp_layers:
        return Memory(weights, grads, optim, vec.maximum(first_acts, last_acts), cap)
    mtp = float(p.mtp_layers)
    mtp_dense = mtp * mtp_dense_one
    mtp_expert = mtp * mtp_expert_one
    w_last, g_last, o_last = states(n - expert_n + mtp_dense, expert_n + mtp_expert)
    mtp_acts = mtp * (per_token * tokens * vec.minimum(last, p.microbatches) + logits)
    last_acts = last_acts + mtp_acts
    busier = w_last + g_last + o_last + last_acts > weights + grads + optim + first_acts
    return Memory(
        vec.where(busier, w_last, weights),
        vec.where(busier, g_last, grads),
        vec.where(busier, o_last, optim),
        vec.where(busier, last_acts, first_acts),
        cap,
    )


def describe(m: Memory, i: int = 0) -> str:
    gb = 1e9
    return (
        f"{m.total[i] / gb:.1f} GB per GPU (weights {m.weights[i] / gb:.1f}, gradients "
        f"{m.gradients[i] / gb:.1f}, optimizer {m.optimizer[i] / gb:.1f}, activations "
        f"{m.activations[i] / gb:.1f})"
    )
