"""Serving: time to first token, inter-token latency and throughput of one model replica.

A replica spans ``tp x pp`` GPUs. Prefill is compute-bound (matmul ceiling) unless the prompt is
short; decode reads the weights and the KV cache once per step, so it is bound by HBM bandwidth
until the batch is large. A MoE model's decode step reads the experts its batch's tokens are
routed to, which at a batch of a few dozen is most of them, not one token's active share.
Tensor parallelism adds two all-reduces per layer per token: tiny messages, so their latency
(NVLink inside a node, the fabric's once TP spans nodes) is what the fabric changes. With
prefill/decode disaggregation the KV cache of each prompt crosses the fabric once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.workload.attention import attention_rates
from fabricplan.workload.comm import Request, collectives_s
from fabricplan.workload.plan import WEIGHT_BYTES, Hardware, hbm_bytes_per_s, matmul_flops
from fabricplan.workload.shapes import (
    ACT_BYTES,
    CAUSAL_FRACTION,
    TP_COLLECTIVES_PER_LAYER,
    Shape,
    weight_flops_per_token,
    weights_read_per_pass,
)

# Bytes per weight and per KV element when serving in FP8 (weights and KV cache quantised).
FP8_BYTES = 1.0


@dataclass(frozen=True)
class Serving:
    ttft: float  # s, one request's prompt, plus the KV transfer when disaggregated
    itl: float  # s per output token (one decode step for the whole batch)
    tokens_per_s: float  # output tokens per second per replica
    weights_per_gpu: float  # bytes
    kv_per_gpu: float  # bytes at full concurrency
    parts: dict[str, float]  # seconds: decode compute/memory, tp/pp comm, prefill, kv transfer
    network_fraction: float  # share of the inter-token latency spent on the fabric


@dataclass(frozen=True)
class ServingRates:
    """One replica's streams and token rates, and the cluster's: total = per replica x replicas.

    ``concurrency`` (the scenario's) is per replica. Input tokens are the prompts that come in:
    each request brings ``prompt`` tokens and leaves with ``output`` tokens, so a replica takes
    prompts in at ``prompt / output`` times its output rate.
    """

    replicas: int
    streams_per_replica: int
    output_tokens_per_s_per_replica: float
    input_tokens_per_s_per_replica: float

    @property
    def streams_total(self) -> int:
        return self.streams_per_replica * self.replicas

    @property
    def output_tokens_per_s_total(self) -> float:
        return self.output_tokens_per_s_per_replica * self.replicas

    @property
    def input_tokens_per_s_total(self) -> float:
        return self.input_tokens_per_s_per_replica * self.replicas

    def to_dict(self) -> dict[str, float | int]:
        return {
            "replicas": self.replicas,
            "streams_per_replica": self.streams_per_replica,
            "streams_total": self.streams_total,
            "output_tokens_per_s_per_replica": self.output_tokens_per_s_per_replica,
            "output_tokens_per_s_total": self.output_tokens_per_s_total,
            "input_tokens_per_s_per_replica": self.input_tokens_per_s_per_replica,
            "input_tokens_per_s_total": self.input_tokens_per_s_total,
        }


def serving_rates(
    r: Serving, *, replicas: int, streams: int, prompt: int, output: int
) -> ServingRates:
    """``r``'s rates for ``replicas`` replicas of ``streams`` concurrent requests each."""
    return ServingRates(replicas, streams, r.tokens_per_s, r.tokens_per_s * prompt / output)


def _one(op: str, ranks: int, stride: int, nbytes: float, pattern: str | None = None) -> Request:
    """A request for one group (see :func:`collectives_s`)."""
    return (op, np.array([ranks]), np.array([stride]), np.array([nbytes]), pattern)


def serve(
    s: Shape,
    hw: Hardware,
    *,
    tp: int,
    pp: int,
    prompt: int,
    output: int,
    batch: int,
    disaggregated: bool,
    precision: str,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> Serving:
    fp8 = precision == "fp8"
    peak = matmul_flops(hw.gpu, precision)
    hbm = hbm_bytes_per_s(hw.gpu)
    wb = FP8_BYTES if fp8 else WEIGHT_BYTES
    kvb = FP8_BYTES if fp8 else ACT_BYTES
    # K/V heads split over TP only as far as there are heads to split (GQA replicates them)
    kv_split = min(tp, s.kv_heads)
    kv_token = s.layers * s.kv_elems * kvb  # bytes per token, all layers

    # a decode step reads the weights its batch's tokens use: a MoE model's tokens go to
    # different experts, so the batch reads more than one token's active parameters
    layer_weights = float(weights_read_per_pass(s, batch)) / s.layers * wb
    ctx = prompt + output / 2  # mean context over the decode steps
    flops = batch * (s.proj_flops + s.score_flops_per_ctx * ctx) / tp
    read = layer_weights / tp + batch * ctx * s.kv_elems * kvb / kv_split
    layer_t = max(flops / peak, read / hbm)
    head_t = max(batch * s.logits_flops / tp / peak, s.vocab * s.hidden * wb / tp / hbm)
    # every collective of the replica, priced in one call; a group of 1 rank costs 0
    act = s.hidden * ACT_BYTES
    pp_ranks = 2 if pp > 1 else 1
    # disaggregated: each prefill GPU sends its KV shard to its decode peer, one replica (at
    # least one node) away
    kv_ranks = 2 if disaggregated else 1
    kv_peer = hw.gpus_per_node * max(1, tp * pp // hw.gpus_per_node)
    times = collectives_s(
        hw,
        [
            _one("all_reduce", tp, 1, batch * act),
            _one("sendrecv", pp_ranks, tp, batch * act),
            _one("all_reduce", tp, 1, prompt * act),
            _one("sendrecv", pp_ranks, tp, prompt * act / tp),
            _one("sendrecv", kv_ranks, kv_peer, prompt * kv_token / (kv_split * pp), "pipeline"),
        ],
        backend,
    )
    ar_decode, send_decode, ar_prefill, send_prefill, kv_xfer = (float(t[0]) for t in times)
    decode_compute = s.layers * layer_t + head_t
    tp_decode = s.layers * TP_COLLECTIVES_PER_LAYER * ar_decode
    pp_decode = (pp - 1) * send_decode
    itl = decode_compute + tp_decode + pp_decode

    pre_ctx = prompt * CAUSAL_FRACTION
    pre_attention = s.layers * s.score_flops_per_ctx * pre_ctx
    # the prompt's projections at the matmul rate, its causal attention at the fused kernel's
    # forward rate for that length and head size (in BF16, as training runs it)
    attn_rate, _ = attention_rates(
        hw.gpu, matmul_flops(hw.gpu, "bf16"), np.array([float(prompt)]), True, s.head_dim
    )
    prefill_compute = prompt * (
        weight_flops_per_token(s) / peak + pre_attention / float(attn_rate[0])
    )
    # a short prompt (or a MoE model's many experts) can leave prefill bound by reading the
    # weights once, as decode is
    prefill_read = float(weights_read_per_pass(s, prompt)) * wb / hbm
    prefill = max(prefill_compute, prefill_read) / tp
    tp_prefill = s.layers * TP_COLLECTIVES_PER_LAYER * ar_prefill
    pp_prefill = (pp - 1) * send_prefill
    ttft = prefill + tp_prefill + pp_prefill + kv_xfer

    spans = tp > hw.gpus_per_node
    network = (tp_decode if spans else 0.0) + (pp_decode if pp > 1 else 0.0)
    weights = s.params_total * wb / (tp * pp)
    kv = batch * (prompt + output) * kv_token / (kv_split * pp)
    return Serving(
        ttft=ttft,
        itl=itl,
        tokens_per_s=batch / itl,
        weights_per_gpu=weights,
        kv_per_gpu=kv,
        parts={
            "decode_compute_s": decode_compute,
            "tp_comm_s": tp_decode,
            "pp_comm_s": pp_decode,
            "prefill_s": prefill + tp_prefill + pp_prefill,
            "kv_transfer_s": kv_xfer,
        },
        network_fraction=network / itl,
    )
