"""Every training plan of a search space, as :class:`Plans` batches (one per set of scalar flags).

A plan is the parallel layout (tp, pp, vp, cp, ep; dp fills the cluster), the micro-batch, the
ZeRO stage, the recomputation and the overlap options. The layout, micro-batch and ZeRO stage
are array columns of one batch; the recomputation and overlap options are the scalar flags of
:class:`Plans`, so each combination of them is its own batch. Only plans the scenario's rules
accept are listed (:mod:`fabricplan.scenario.checks`): tp divides the heads and the node, tp x
pp x cp divides the cluster, ep divides the experts and dp x cp, the micro-batch times dp
divides the global batch, interleaving needs pp > 1 and whole chunks; options that change
nothing for a plan (TP overlap without TP, the CP exchange without CP) are not listed twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

import numpy as np

from fabricplan.catalog import Model
from fabricplan.workload.plan import Plans

# Context parallelism is for long contexts: each rank keeps at least this many tokens of the
# sequence (an assumption: Llama 3 ran cp 16 at 131k, 8,192 tokens a rank, arXiv 2407.21783
# Sec. 3.3.2; shorter blocks leave too little attention to hide each ring step behind).
CP_MIN_TOKENS_PER_RANK = 4096
# Largest context-parallel degree tried (Llama 3's 16, doubled).
CP_MAX = 32
# Largest micro-batch tried, in sequences: past it the activations of one micro-batch fill an
# 80 GB GPU for any model worth parallelising, and the GEMMs are already large (assumption).
MICRO_BATCH_MAX = 64
# ZeRO stages (3 = FSDP) and recomputation modes, all of them.
ZERO_STAGES = (0, 1, 2, 3)
RECOMPUTE_MODES = ("none", "selective", "full")


@dataclass(frozen=True)
class SearchSpace:
    """What the search may choose. ``None`` for a size list means every size the rules allow;
    a tuple restricts it (sizes the rules refuse are still dropped)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    zero: tuple[int, ...] = ZERO_STAGES
    recompute: tuple[str, ...] = RECOMPUTE_MODES
    overlap_dp: tuple[bool, ...] = (True, False)
    tp_comm_overlap: tuple[bool, ...] = (False, True)
    cp_comm: tuple[str, ...] = ("p2p", "all_gather")
    ep_comm_overlap: tuple[bool, ...] = (False, True)
    # how expert all-to-alls cross nodes: hierarchical only where the EP group spans nodes (the
    # same bytes inside one), and the search on a fabric without RDMA leaves it out
    ep_dispatch: tuple[str, ...] = ("alltoall", "hierarchical")
    # tp beyond the node (over the network): never fast, so off unless asked
    tp_across_nodes: bool = False
    # pipeline stages must hold whole, equal numbers of layers (the step model times an uneven
    # pipeline at its slowest stage, but counts memory at the average one)
    pp_divides_layers: bool = True
    # None: the scenario's global batch for every plan. A number: each plan's batch is this
    # many tokens rounded up to whole dp x micro-batch steps, as a scenario without a batch
    # resolves it (``scenario.load``), and dp may not exceed the sequences it holds
    batch_tokens: float | None = None


@dataclass(frozen=True)
class Job:
    """What the search does not choose: the model, the cluster's size and node, the sequence,
    batch and numerics."""

    model: Model
    gpus: int
    gpus_per_node: int
    seq_len: int
    global_batch: int  # sequences (ignored when the space sets batch_tokens)
    precision: str = "bf16"
    flash: bool = True
    grad_accum_fusion: bool = True
    grad_reduce_bf16: bool = False
    fp8_recipe: str = "delayed"
    mtp_layers: int = 0  # on the last stage (the search splits the layers evenly)
    pipeline_engine: str = "megatron"  # megatron | deepspeed (no interleaving), see pipe_boundary


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _pick(given: tuple[int, ...] | None, allowed: list[int]) -> list[int]:
    return allowed if given is None else [v for v in given if v in allowed]


def _tps(job: Job, space: SearchSpace) -> list[int]:
    gpn = job.gpus_per_node
    ok = [t for t in _divisors(job.model.heads) if gpn % t == 0 or t % gpn == 0]
    if not space.tp_across_nodes:
        ok = [t for t in ok if t <= gpn]
    return _pick(space.tp, ok)


def _pps(job: Job, space: SearchSpace, room: int) -> list[int]:
    layers = job.model.layers
    ok = [p for p in _divisors(room) if p <= layers]
    if space.pp_divides_layers:
        ok = [p for p in ok if layers % p == 0]
    return _pick(space.pp, ok)


def _vps(job: Job, space: SearchSpace, pp: int) -> list[int]:
    if pp == 1:
        return _pick(space.vp, [1])
    per_stage = job.model.layers // pp
    ok = [v for v in _divisors(per_stage) if pp * v <= job.model.layers] if per_stage else [1]
    return _pick(space.vp, ok)


def _cps(job: Job, space: SearchSpace) -> list[int]:
    powers = (2**i for i in range(1, CP_MAX.bit_length()))
    # the load-balanced causal split cuts the sequence into 2 x cp chunks
    ok = [1] + [
        c
        for c in powers
        if job.seq_len % (2 * c) == 0 and job.seq_len // c >= CP_MIN_TOKENS_PER_RANK
    ]
    return _pick(space.cp, ok)


def _eps(job: Job, space: SearchSpace, dp_cp: int) -> list[int]:
    moe = job.model.moe
    if moe is None:
        return _pick(space.ep, [1])
    return _pick(space.ep, [e for e in _divisors(moe.experts) if dp_cp % e == 0])


def _batches(job: Job, space: SearchSpace, dp: int) -> list[tuple[int, int]]:
    """(micro-batch, global batch) pairs for data-parallel size ``dp``."""
    if space.batch_tokens is None:
        if job.global_batch % dp:
            return []
        per_replica = job.global_batch // dp
        mbs = [m for m in _divisors(per_replica) if m <= MICRO_BATCH_MAX]
        return [(m, job.global_batch) for m in _pick(space.micro_batch, mbs)]
    seqs = max(1, int(space.batch_tokens // job.seq_len))
    if dp > seqs:  # more replicas than sequences would inflate the batch
        return []
    out = []
    for m in space.micro_batch or (1,):
        step = dp * m
        out.append((m, max(1, math.ceil(space.batch_tokens / job.seq_len / step)) * step))
    return out


def layouts(job: Job, space: SearchSpace) -> np.ndarray:
    """Every (tp, pp, vp, cp, ep, dp, micro_batch, global_batch) the rules allow, one row each,
    in the order tp, pp, cp, ep, vp, micro-batch (smallest first)."""
    rows = []
    for tp in _tps(job, space):
        for cp in _cps(job, space):
            if job.gpus % (tp * cp):
                continue
            for pp in _pps(job, space, job.gpus // (tp * cp)):
                dp = job.gpus // (tp * pp * cp)
                batches = _batches(job, space, dp)
                eps, vps = _eps(job, space, dp * cp), _vps(job, space, pp)
                for ep, vp, (mb, gb) in product(eps, vps, batches):
                    # interleaving runs the micro-batches in groups of pp (Megatron-LM's
                    # interleaved schedule requires it)
                    if vp > 1 and (gb // (dp * mb)) % pp:
                        continue
                    rows.append((tp, pp, vp, cp, ep, dp, mb, gb))
    return np.array(rows, dtype=float).reshape(-1, 8)


@dataclass(frozen=True)
class Flags:
    """One batch's scalar settings."""

    recompute: str
    overlap_dp: bool
    tp_comm_overlap: bool
    cp_comm: str
    ep_comm_overlap: bool = False
    ep_dispatch: str = "alltoall"


def batches(job: Job, space: SearchSpace) -> Iterator[tuple[Flags, Plans]]:
    """Every plan of ``space`` for ``job``, one :class:`Plans` per set of flags (empty sets
    left out)."""
    lay = layouts(job, space)
    if not len(lay):
        return
    zero = np.array(space.zero, dtype=float)
    # every layout at every ZeRO stage: layouts vary slowest
    cols = np.repeat(lay, len(zero), axis=0)
    z = np.tile(zero, len(lay))
    tp, pp, vp, cp, ep = cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4]
    flags = product(
        space.recompute,
        space.overlap_dp,
        space.tp_comm_overlap,
        space.cp_comm,
        space.ep_comm_overlap,
        space.ep_dispatch,
    )
    for rec, ovl, tpo, cpc, epo, epd in flags:
        keep = np.ones(len(cols), dtype=bool)
        if tpo:  # userbuffers need TP (with sequence parallelism) inside the node
            keep &= (tp > 1) & (tp <= job.gpus_per_node)
        if cpc != "p2p":  # the exchange matters only with context parallelism
            keep &= cp > 1
        if epo:  # all-to-alls to hide, and passes to pair (an interleaved pipeline if any)
            keep &= (ep > 1) & ((pp == 1) | (vp > 1))
        if epd != "alltoall":  # EP groups (ep ranks tp x cp apart) over more than one node
            keep &= (ep > 1) & (ep * tp * cp > job.gpus_per_node)
        if job.pipeline_engine == "deepspeed":  # its pipeline engine does not interleave
            keep &= vp == 1
        if not keep.any():
            continue
        c = cols[keep]
        plans = Plans.of(
            tp=c[:, 0],
            pp=c[:, 1],
            vp=c[:, 2],
            cp=c[:, 3],
            ep=c[:, 4],
            dp=c[:, 5],
            micro_batch=c[:, 6],
            global_batch=c[:, 7],
            zero=z[keep],
            seq_len=job.seq_len,
            sp=c[:, 0] > 1,
            recompute=rec,
            flash=job.flash,
            overlap_dp=ovl,
            precision=job.precision,
            grad_accum_fusion=job.grad_accum_fusion,
            grad_reduce_bf16=job.grad_reduce_bf16,
            tp_comm_overlap=tpo,
            cp_comm=cpc,
            ep_comm_overlap=epo,
            ep_dispatch=epd,
            fp8_recipe=job.fp8_recipe,
            mtp_layers=job.mtp_layers,
            pipeline_engine=job.pipeline_engine,
        )
        yield Flags(rec, ovl, tpo, cpc, epo, epd), plans


def space_size(job: Job, space: SearchSpace) -> int:
    """How many plans :func:`batches` lists."""
    return sum(len(p) for _, p in batches(job, space))
