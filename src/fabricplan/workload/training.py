"""Training step time: compute, exposed communication and pipeline bubble, for N plans at once.

Compute is a roofline per layer (:mod:`.layer_compute`: GEMMs by shape, attention kernels at
their published rates, memory-bound ops at achievable HBM bandwidth), run again where
recomputation asks, plus the last stage's output head and loss. Communication follows
Megatron-LM's schedule (Narayanan et al. SC'21; Korthikanti et al. 2022):
- tensor parallel: 2 all-reduces (or reduce-scatter + all-gather with sequence parallelism)
  per layer in the forward pass, 2 in the backward, 2 more when the forward is recomputed; on
  the critical path;
- pipeline: one activation send per micro-batch and chunk each way, split over the TP ranks
  (scatter/gather), with the 1F1B bubble of (pp - 1) / vp micro-batch times;
- data parallel: gradient all-reduce, or reduce-scatter + all-gather under ZeRO, overlapped
  bucket by bucket with the last backward pass (and the next forward) when ``overlap_dp``;
  ZeRO-3 instead gathers each layer's weights in every micro-batch's forward and backward and
  reduce-scatters its gradients in the backward, one layer ahead as FSDP prefetches;
- expert parallel: dispatch and combine all-to-alls per MoE layer, each pass, exposed unless
  overlapped (:mod:`.ep_overlap`); each expert copy of a token crosses the network, or one
  copy per destination node with a hierarchical dispatcher (:mod:`.ep_dispatch`);
- context parallel: ring exchange of K/V blocks, each step behind one block's attention.
What hides, and what hidden communication costs the compute beside it, is :mod:`.overlap`'s.
"""

from __future__ import annotations

from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.workload import vec
from fabricplan.workload.comm import collectives_s, group_nodes, nccl_sm_share, spans_nodes
from fabricplan.workload.ep_dispatch import FLEX_DISPATCHER_SMS, network_copy_share
from fabricplan.workload.ep_overlap import hidden_per_step
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.layer_compute import (
    BACKWARD_PER_FORWARD,
    PASSES_FWD_BWD,
    layer_compute,
)
from fabricplan.workload.memory import Memory, memory, params_per_gpu
from fabricplan.workload.overlap import (
    bucket_units,
    data_parallel_exposed,
    ddp_bucket_params,
    sm_tax,
)
from fabricplan.workload.pipe_boundary import boundary_seconds, gather_ranks
from fabricplan.workload.pipeline_layout import LayoutError, busiest_stage
from fabricplan.workload.plan import (
    WEIGHT_BYTES,
    Hardware,
    Plans,
    dispatch_on,
    hbm_bytes_per_s,
    matmul_flops,
)
from fabricplan.workload.shapes import (
    ACT_BYTES,
    TP_COLLECTIVES_PER_LAYER,
    Shape,
    model_flops_per_token,
)
from fabricplan.workload.step import Step, as_rows
from fabricplan.workload.tp_overlap import UB_COMM_SMS, exposed_per_layer, ring_exchange

# Adam step per weight: read FP32 master, momentum, variance, gradient (16 B), write the first
# three and the BF16 weight (14 B).
OPTIMIZER_STEP_BYTES = 30.0


def training_step(
    s: Shape,
    p: Plans,
    hw: Hardware,
    *,
    backend: NetworkBackend = DEFAULT_BACKEND,
    plan_memory: Memory | None = None,
) -> Step:
    """Step time of every plan in ``p`` for model ``s`` on ``hw``, the network's congestion
    priced by ``backend``; ``plan_memory``: the plans' memory (:func:`.memory.memory`), when
    the caller has it already."""
    if len(p) == 1 and vec.is_batch(p.tp):
        # one plan: the same model on its scalars, about three times as fast (see vec)
        return as_rows(_step(s, p.scalars, hw, backend, plan_memory))
    return _step(s, p, hw, backend, plan_memory)


def _step(
    s: Shape, p: Plans, hw: Hardware, backend: NetworkBackend, plan_memory: Memory | None
) -> Step:
    """training_step of ``p``: (N,) arrays, or one plan's scalars (see vec)."""
    # one layer, one micro-batch, one GPU (the last stage's output head and loss apart)
    c = layer_compute(s, p, hw)
    fwd, bwd, recompute, score, score_bwd = c.fwd, c.bwd, c.recompute, c.score, c.score_bwd
    logits = c.logits
    peak_proj, hbm = matmul_flops(hw.gpu, p.precision), hbm_bytes_per_s(hw.gpu)
    h = float(s.hidden)
    tokens = p.tokens_per_micro_batch
    sp_div = p.sp_split
    rec_passes = 1.0 if p.recompute == "full" else 0.0  # full recomputation: one more forward

    # communication: every collective of the step, priced in one batch per op
    # an expert all-to-all sends each token's top_k copies, or one per node (ep_dispatch)
    dispatch = dispatch_on(hw, p.ep_dispatch)
    a2a_bytes = tokens * s.top_k * h * ACT_BYTES / sp_div
    if dispatch == "hierarchical" and s.experts:
        a2a_bytes = a2a_bytes * network_copy_share(s, group_nodes(hw, p.ep, p.tp * p.cp))
    act_bytes = tokens * h * ACT_BYTES
    # a context-parallel rank moves the K/V of its own attention heads: TP splits the KV heads
    # (Megatron-Core: num_query_groups_per_partition = num_query_groups / tp), as far as there
    # are heads to split
    kv_bytes = tokens * s.kv_elems * ACT_BYTES / vec.minimum(p.tp, s.kv_heads)
    passes = 2 + rec_passes  # forward, backward, and the recomputed forward
    one = vec.full(p.tp, 1.0)
    n = params_per_gpu(s, p)
    expert_n = s.params_expert / (p.tp * p.pp * p.ep)
    dense_n = n - expert_n
    # A pipeline runs at its slowest stage: with layers that pp does not divide, the stages
    # that hold one layer more (Llama 3 405B's 126 over 16 stages: 8, the first and last 7) set
    # every micro-batch's time; a layout or MTP modules may make another stage the slowest
    # (busiest_stage, below). ``layers_avg`` is what a GPU holds on average.
    layers_avg = s.layers / p.pp
    layers_here = vec.ceil(layers_avg)
    group = p.dp * p.cp
    expert_group = vec.maximum(group / p.ep, 1)
    tp_sp = sp_div  # sequence parallel: reduce-scatter + all-gather instead
    tp_ar = vec.where(p.sp, 1, p.tp)
    dp0 = vec.where(p.zero >= 1, 1, group)  # ZeRO 0: all-reduce; else reduce-scatter+gather
    dpz = vec.where(p.zero >= 1, group, 1)
    ep0 = vec.where(p.zero >= 1, 1, expert_group)
    epz = vec.where(p.zero >= 1, expert_group, 1)
    # ZeRO-3 reduces and gathers layer by layer in every micro-batch (FSDP units: one per
    # layer, and the root with the embedding and output head), not once per step
    z3 = p.zero >= 3
    layer_dense = s.params_layer_dense / (p.tp * p.pp)
    z3_dense = vec.where(z3, layer_dense / layers_avg, 0.0)
    z3_expert = vec.where(z3, expert_n / layers_avg, 0.0)
    z3_root = vec.where(z3, dense_n - layer_dense, 0.0)
    step_dense, step_expert = vec.where(z3, 0.0, dense_n), vec.where(z3, 0.0, expert_n)
    # Once-per-step traffic goes bucket by bucket, one collective per bucket (Megatron-Core
    # core_r0.8.0, param_and_grad_buffer.py, Bucket.start_grad_sync: a reduce-scatter or
    # all-reduce per bucket; distrib_optimizer.py, _dispatch_gather_model_params: an all-gather
    # per bucket), so each is priced at a bucket's size, not the stream's; without overlap
    # Megatron makes the whole buffer one bucket (DistributedDataParallel.__init__).
    dense_units, dense_bucket = bucket_units(step_dense, group, p.overlap_dp)
    expert_units, expert_bucket = bucket_units(step_expert, group, p.overlap_dp)
    wb, gb = WEIGHT_BYTES, p.grad_bytes
    ring, a2a, pipe = "ring-allreduce", "alltoall", "pipeline"
    gather_tp = gather_ranks(p.pipeline_engine, p.tp, p.pp, p.sp)
    (
        tp_ar_t,
        tp_rs_t,
        tp_ag_t,
        ep_one,
        kv_one,
        cp_ag,
        cp_rs,
        pp_one,
        pp_gather,
        dp_ar,
        dp_rs,
        dp_ag,
        ex_ar,
        ex_rs,
        ex_ag,
        z3_ag,
        z3_rs,
        z3x_ag,
        z3x_rs,
        root_ag,
        root_rs,
    ) = collectives_s(
        hw,
        [
            ("all_reduce", tp_ar, one, act_bytes, None),
            ("reduce_scatter", tp_sp, one, act_bytes, None),
            ("all_gather", tp_sp, one, act_bytes, None),
            ("alltoall", p.ep, p.tp * p.cp, a2a_bytes, a2a),
            ("sendrecv", p.cp, p.tp, kv_bytes, ring),
            ("all_gather", p.cp, p.tp, p.cp * kv_bytes, ring),
            ("reduce_scatter", p.cp, p.tp, p.cp * kv_bytes, ring),
            # scatter/gather: each TP rank sends its slice of the activations on its own NIC
            ("sendrecv", vec.where(p.pp > 1, 2, 1), p.tp * p.cp * p.dp, act_bytes / p.tp, pipe),
            # ... and what the receiver does with the slices, by engine (pipe_boundary)
            ("all_gather", gather_tp, one, act_bytes / sp_div, None),
            ("all_reduce", dp0, p.tp, dense_bucket * gb, ring),
            ("reduce_scatter", dpz, p.tp, dense_bucket * gb, ring),
            ("all_gather", dpz, p.tp, dense_bucket * wb, ring),
            ("all_reduce", ep0, p.tp * p.ep, expert_bucket * gb, ring),
            ("reduce_scatter", epz, p.tp * p.ep, expert_bucket * gb, ring),
            ("all_gather", epz, p.tp * p.ep, expert_bucket * wb, ring),
            ("all_gather", dpz, p.tp, z3_dense * wb, ring),
            ("reduce_scatter", dpz, p.tp, z3_dense * gb, ring),
            ("all_gather", epz, p.tp * p.ep, z3_expert * wb, ring),
            ("reduce_scatter", epz, p.tp * p.ep, z3_expert * gb, ring),
            ("all_gather", dpz, p.tp, z3_root * wb, ring),
            ("reduce_scatter", dpz, p.tp, z3_root * gb, ring),
        ],
        backend,
    )

    # what the compute stream waits for in one layer (MoE averaged over the stage), per pass
    tp_one = TP_COLLECTIVES_PER_LAYER * (tp_ar_t + tp_rs_t + tp_ag_t)
    tp_f, tp_b = tp_one, tp_one * (1 + rec_passes)  # the backward redoes the forward's
    if p.tp_comm_overlap:
        # userbuffers: only with sequence parallelism and TP inside the NVLink domain
        on = p.sp & (p.tp > 1) & (p.tp <= hw.gpus_per_node)
        g = tokens / p.tp / peak_proj
        ov_fwd, ov_bwd = exposed_per_layer(
            tp_ag_t,
            tp_rs_t,
            g * s.attn_in_flops,
            g * s.attn_out_flops,
            g * s.ffn_in_flops,
            g * s.ffn_out_flops,
            p.tp,
            UB_COMM_SMS / hw.gpu.sm_count,
        )
        tp_f, tp_b = vec.where(on, ov_fwd, tp_f), vec.where(on, ov_bwd + rec_passes * ov_fwd, tp_b)
    tp_layer = tp_f + tp_b
    ep_f = TP_COLLECTIVES_PER_LAYER * ep_one * s.moe_layers / s.layers  # dispatch + combine
    # selective recomputation of the MoE layer (recompute_modules: moe) runs its dispatch and
    # combine again in the backward pass
    moe_rerun = 1.0 if p.recompute == "selective" and "moe" in p.recompute_modules else 0.0
    ep_b = ep_f * (1 + rec_passes + moe_rerun)
    # context parallel, p2p (Transformer Engine's ring, load-balanced causal split): one K/V
    # block moves per step while the attention of the block already there runs, so each
    # transfer hides only behind one block's attention (1 / cp of it); in the backward K/V and
    # their gradients go round, twice the bytes, behind the backward's attention
    cp_ring = (p.cp - 1) * kv_one
    if p.cp_comm == "all_gather":
        # all-gather (Llama 3, Sec. 3.3.2): the whole K/V is gathered before the attention and
        # the gather is exposed; the backward gathers it again and reduce-scatters dK/dV
        cp_f, cp_b = cp_ag, cp_ag + cp_rs
        cp_traffic_f, cp_traffic_b = cp_f, cp_b
    else:
        cp_f = ring_exchange(cp_ring, score, p.cp)
        cp_b = ring_exchange(BACKWARD_PER_FORWARD * cp_ring, score_bwd, p.cp)
        cp_traffic_f, cp_traffic_b = cp_ring, BACKWARD_PER_FORWARD * cp_ring
    # recomputation (full, or selective: the core attention) reruns the attention's forward,
    # and with it the K/V exchange inside it (Transformer Engine's attention holds the CP
    # communication, so Megatron-Core's checkpointed core attention repeats it)
    core_rerun = p.recompute == "selective" and "core_attn" in p.recompute_modules
    rerun = 1.0 if p.recompute == "full" or core_rerun else 0.0
    cp_b, cp_traffic_b = cp_b + rerun * cp_f, cp_traffic_b + rerun * cp_traffic_f
    cp_layer = cp_f + cp_b
    cp_hidden = cp_traffic_f + cp_traffic_b - cp_layer

    # Data-parallel traffic hides behind the compute stream (compute and the communication it
    # waits for) but shares the NICs with the other streams that cross the network: while
    # those use the NIC, the data-parallel stream does not get it (their bandwidths add up).
    dp_sm = nccl_sm_share(hw, group, p.tp)
    dp_nic = spans_nodes(hw, group, p.tp)
    tp_nic, ep_nic = spans_nodes(hw, p.tp, one), spans_nodes(hw, p.ep, p.tp * p.cp)
    cp_nic = spans_nodes(hw, p.cp, p.tp)
    busy_f = fwd + tp_f + ep_f + cp_f
    busy_b = bwd + recompute + tp_b + ep_b + cp_b
    nic_f = tp_f * tp_nic + ep_f * ep_nic + cp_traffic_f * cp_nic
    nic_b = tp_b * tp_nic + ep_b * ep_nic + cp_traffic_b * cp_nic
    win_f = vec.maximum(busy_f - dp_nic * nic_f, 0.0)
    win_b = vec.maximum(busy_b - dp_nic * nic_b, 0.0)

    m = p.microbatches
    # unfused accumulation: FP16 autograd skips it on the first micro-batch, see Plans
    accum_share = (m - 1) / m if p.precision == "fp16" else 1.0
    accumulate = accum_share * n * p.grad_accum_bytes / hbm
    # the stage that sets the pipeline's pace: its layers (MTP modules' included) replace the
    # even split's from here on, with its heads and MTP projections
    per_layer = fwd + bwd + recompute + tp_layer + ep_f + ep_b + cp_layer
    try:
        layers_here, heads_here, mtp_here = busiest_stage(
            s.layers,
            p.pp,
            p.vp,
            p.pipeline_layout,
            p.mtp_layers,
            layers_here,
            per_layer,
            logits,
            c.mtp_proj,
        )
    except LayoutError as exc:
        raise WorkloadError(f"workload.parallel.pipeline_layout: {exc}") from None
    heads = heads_here * logits + mtp_here * c.mtp_proj
    # a stage's boundaries (pipe_boundary): the sends cross between stages; the gathers are
    # TP-group collectives and a rebuild's copies memory-bound kernels, counted as such
    edge = boundary_seconds(
        p.pipeline_engine, p.pp, p.vp, pp_one, pp_gather, gather_tp, act_bytes / sp_div, hbm
    )
    compute_mb = layers_here * (fwd + bwd + recompute) + heads + accumulate + p.vp * edge.copies
    pp_mb = p.vp * edge.sends
    tp_mb = layers_here * tp_layer + p.vp * edge.gathers
    ep_mb = layers_here * (ep_f + ep_b)
    cp_mb = layers_here * cp_layer
    per_mb = compute_mb + tp_mb + ep_mb + cp_mb + pp_mb
    bubble_mbs = (p.pp - 1) / p.vp
    # expert all-to-alls behind another micro-batch's compute, phase by phase (ep_overlap);
    # the recomputation's are the attention's (selective) or split as the forward (full)
    ep_hidden = 0.0
    if p.ep_comm_overlap:
        rec_attn = c.rec_attn
        ep_hidden = hidden_per_step(
            ep_f / TP_COLLECTIVES_PER_LAYER,  # one dispatch or combine
            c.fwd_attn * fwd,
            (1 - c.fwd_attn) * fwd,
            c.bwd_attn * bwd + rec_attn,
            (1 - c.bwd_attn) * bwd + recompute - rec_attn,
            ep_f * (rec_passes + moe_rerun),
            layers_here,
            m,
            p.pp,
            p.vp,
        )

    grad_t = dense_units * (dp_ar + dp_rs) + expert_units * (ex_ar + ex_rs)
    param_t = dense_units * dp_ag + expert_units * ex_ag
    z3_gather, z3_reduce = z3_ag + z3x_ag, z3_rs + z3x_rs
    dp_total = (
        grad_t + param_t + m * (root_ag + root_rs + layers_here * (2 * z3_gather + z3_reduce))
    )
    bucket = vec.minimum(ddp_bucket_params(group) / vec.maximum(n, 1.0), 1.0)
    head_bwd = logits * BACKWARD_PER_FORWARD / PASSES_FWD_BWD
    z3_traffic = (z3_gather, z3_reduce, root_ag, root_rs)
    dp_exposed = data_parallel_exposed(
        grad_t, param_t, bucket, z3_traffic, win_f, win_b, head_bwd, layers_here, m, p.overlap_dp
    )
    # communication kernels beside compute hold SMs that the compute loses (see overlap)
    cp_sm = nccl_sm_share(hw, p.cp, p.tp)
    slowdown = sm_tax(
        vec.maximum(dp_total - dp_exposed, 0.0), dp_total, dp_sm
    ) + m * layers_here * sm_tax(cp_hidden, score + score_bwd, cp_sm)
    if p.ep_comm_overlap:
        # NCCL's all-to-all holds a block per channel; a hierarchical dispatcher its own SMs
        ep_sm = (
            vec.full(p.tp, FLEX_DISPATCHER_SMS / hw.gpu.sm_count)
            if dispatch == "hierarchical"
            else nccl_sm_share(hw, p.ep, p.tp * p.cp)
        )
        slowdown = slowdown + sm_tax(ep_hidden, m * compute_mb, ep_sm)

    # ZeRO >= 1 shards the optimizer step: dense weights over the data-parallel group, routed
    # experts over the expert data-parallel group (see memory)
    optimizer = (dense_n / dpz + expert_n / epz) * OPTIMIZER_STEP_BYTES / hbm
    time = (m + bubble_mbs) * per_mb - ep_hidden + dp_exposed + optimizer + slowdown
    # The data-parallel stream (gradient reductions, parameter gathers, ZeRO-3's per-layer
    # traffic) runs on one communicator, one collective after another, and must end before
    # the optimizer step: however much compute runs beside it, a step is never shorter than
    # that stream. Each overlap above is bounded by the compute it hides behind, but they
    # share that compute; this bound keeps their sum honest.
    short = vec.maximum(dp_total + optimizer - time, 0.0)
    dp_exposed = dp_exposed + short
    time = time + short
    # Hidden behind compute too, the expert all-to-alls still share the NIC with the other
    # streams that cross the network: together they bound the step (what shows is theirs).
    # The data-parallel overlap needs no such bound: its windows leave out the time the other
    # streams hold the NIC.
    tp_total = m * layers_here * TP_COLLECTIVES_PER_LAYER * passes * (tp_ar_t + tp_rs_t + tp_ag_t)
    cp_total = m * layers_here * (cp_traffic_f + cp_traffic_b)
    ep_shown = m * ep_mb - ep_hidden
    if p.ep_comm_overlap:
        pp_nic = spans_nodes(hw, p.pp, p.tp * p.cp * p.dp)
        on_nic = dp_nic * dp_total + tp_nic * tp_total + ep_nic * m * ep_mb + cp_nic * cp_total
        lack = vec.maximum(on_nic + pp_nic * m * pp_mb - time, 0.0)
        ep_shown, time = ep_shown + lack, time + lack

    tok = p.global_batch * p.seq_len
    model_flops = tok * model_flops_per_token(s, p.seq_len, p.mtp_layers)
    layer_fwd = s.proj_flops + s.score_flops_per_ctx * p.seq_len  # full scores, as Megatron
    # + the recomputed forward (the MTP modules' layers too)
    hw_flops = model_flops + tok * rec_passes * (s.layers + p.mtp_layers) * layer_fwd
    return Step(
        time=time,
        compute=m * compute_mb,
        tp_comm=m * tp_mb,
        pp_comm=m * pp_mb,
        ep_comm=ep_shown,
        cp_comm=m * cp_mb,
        dp_comm=dp_exposed,
        dp_comm_total=dp_total,
        bubble=bubble_mbs * per_mb,
        optimizer=optimizer,
        overlap_slowdown=slowdown,
        tokens=tok,
        model_flops=model_flops,
        hw_flops=hw_flops,
        memory=memory(s, p, hw) if plan_memory is None else plan_memory,
        tp_comm_total=tp_total,
        ep_comm_total=m * ep_mb,
        cp_comm_total=cp_total,
    )
