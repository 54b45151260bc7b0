"""A GEMM's time by its shape: the main loop at the sustained matmul rate, then its output store;
and, for an FP8 GEMM, the casts of its operands (``fp8_cast_bytes``, below the law's check).

A GEMM ``C (M x N) = A (M x K) @ B (K x N)`` is cut into output tiles; each tile runs a main
loop over K (loads of A and B pipelined behind the tensor-core math) and then an epilogue that
stores the tile (NVIDIA, Matrix Multiplication Background User's Guide, "GPU Implementation";
CUTLASS's mainloop/epilogue split). The epilogue's store is not hidden behind the main loop, so

    t = 2 M N K / P  +  M N b / BW
      = (2 M N / P) (K + k0),   k0 = P b / (2 BW)

with P the large-GEMM sustained rate (catalog ``matmul_efficiency``), BW the achievable HBM
bandwidth and b the bytes stored (and read) per output element. The efficiency relative to a
large GEMM is K / (K + k0): it depends on K alone, and ``k0`` is the GPU's ridge point (FLOP
per byte) times b / 2: 235 for a BF16 output on an H100 at its sustained rate (708.5
TFLOP/s over 3.02 TB/s), 427 in FP8 (1288.7 TFLOP/s, the same BF16 output). A transformer
layer's GEMMs have K = hidden or FFN width (forward, input gradient) or tokens per
micro-batch (weight gradient), so small models and wide tensor-parallel splits lose most. It
applies on the architectures of ``MEASURED_ARCHS`` only.

The check (``tests/test_gemm.py``): OpenXLA's H100 BF16 cuBLAS table
(``xla/service/gpu/model/matmul_interpolator_data.h``, ``sm_90``, 2025) at M = N = 4096 gives
392, 543, 677, 739 and 783 TFLOP/s for K = 256, 512, 1k, 2k and 4k; this law with that
table's own large-GEMM rate (840, a burst figure) and 90 % of 3.35 TB/s gives 402, 544, 660,
739 and 787. Over the table's eight shapes with M, N and K all 2048 or more the median error
is 3.5 %, the worst +17 % (2048 x 2048 x 2048: 128 tiles of 128 x 256, under one wave of
the 132 SMs, where a GEMM's fixed start and tail show).

On the B200 (the same file's ``sm_100`` table, 2025-10, four outputs of 4096 x 4096 so that
its 148 SMs run several waves) cuBLAS gives 792, 1,091, 1,351, 1,540 and 1,671 TFLOP/s for
K = 256 to 4k; the law with the B200's burst rate (1,770.9) and 90 % of 8 TB/s gives 903,
1,196, 1,428, 1,581 and 1,671: +14 % at K = 256, within 6 % from 1k, where the large-GEMM rate
alone is 6-124 % fast. A B200's main loop runs twice as fast as an H100's, so the fixed
start and tail of a small GEMM weigh more there than the store the law prices. (That file's
FP8 rates are not used: its H100 ones exceed the H100's FP8 peak.)

Not modelled: tile and wave quantization. A fixed 128 x 256 tile in whole waves over the
132 SMs predicts, on the same table, 394 TFLOP/s for 2048 x 1024 x 4096 (one wave of 64
tiles) where cuBLAS reaches 653, and 200 for 1024 x 1024 x 4096 where it reaches 470: its
kernel choice (smaller tiles, split K) hides most of the quantization, and the law above
(+20 % and +67 % there) is the better one at training sizes, where M (tokens per
micro-batch) is in the thousands. Nor is a GEMM's fixed start-up cost (a few microseconds,
small beside a training layer's milliseconds of GEMMs).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec

# Bytes stored per output element of a forward or input-gradient GEMM (BF16/FP16, also for FP8
# GEMMs, whose outputs Transformer Engine keeps in BF16).
OUT_BYTES = 2.0
# Bytes per element of a weight-gradient GEMM's output: BF16/FP16 on its own (OUT_BYTES); with
# --gradient-accumulation-fusion the GEMM adds into the FP32 main gradient (beta = 1), so its
# epilogue reads and writes 4 bytes each (Megatron-LM's fused_weight_gradient_mlp_cuda,
# wgrad_gemm_accum_fp32: the main gradient is both C and D). An assumption: the sweep above
# stores BF16 only; the read of C is taken to be as exposed as the store. With the main gradient
# kept in BF16 (``Plans.grad_reduce_bf16``; wgrad_gemm_accum_fp16) it is 2 bytes each way: the
# step model then takes twice the gradient's bytes.
WGRAD_FUSED_BYTES = 8.0


# FP8 GEMM operands. Transformer Engine runs an FP8 GEMM on FP8 copies of its operands, cast
# from the BF16 activations and output gradients by memory-bound kernels that a BF16 GEMM does
# not need (TransformerEngine v1.8, pytorch/module/linear.py: the input's
# fp8_cast_transpose_fused; module/base.py, grad_output_preprocess: the output gradient's cast,
# transpose and bias gradient; module/layernorm_linear.py: the layer norm writes its output in
# FP8 itself, and its transpose for the weight gradient is made in the backward pass,
# fp8_transpose). Bytes moved per element cast: the BF16 read and the FP8 copy and its
# transpose written (2 + 1 + 1). With sequence parallelism TE casts first and transposes the
# gathered copy later (3 + 2 bytes): taken as 4 too, an approximation that errs fast by a byte.
FP8_CAST_TRANSPOSE_BYTES = 4.0
# Per element of a layer norm's output feeding an FP8 GEMM: its FP8 transpose in the backward
# pass (read and write, 1 + 1); and the byte its FP8 write saves against BF16 (2 - 1).
FP8_NORM_TRANSPOSE_BYTES = 2.0
FP8_NORM_WRITE_SAVED_BYTES = 1.0


# Current scaling (Transformer Engine's Float8CurrentScaling; NVIDIA's "FP8-CS" recipes) scales
# each tensor by its own amax, found by a pass of its own over the BF16 tensor before the cast
# (TransformerEngine v2.8, pytorch/csrc/quantizer.cpp, Float8CurrentScalingQuantizer::quantize:
# nvte_compute_amax, then nvte_quantize_v2): 2 more bytes read per element cast. Where the
# kernel before the cast finds the amax itself, no pass is added: the FFN activation
# (csrc/extensions/activation.cpp, FUSED_ACTIVATION_AMAX_FP8) and the layer norm, which then
# writes its output in BF16 for the cast to read (csrc/extensions/normalization.cpp, the
# unfused path with quantize_with_amax) instead of writing FP8 itself: 2 read, 1 + 1 written.
FP8_AMAX_PASS_BYTES = 2.0
FP8_NORM_CAST_BYTES = 4.0


def fp8_current_cast_bytes(
    attn_out: ArrayLike, ffn_act: ArrayLike, outputs: ArrayLike, norm_written: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """``fp8_cast_bytes`` under current scaling: per token, the attention output's elements
    (cast with an amax pass), the FFN activation's (its amax fused), every GEMM output's
    gradient (an amax pass each) and the layer norms' outputs as each rank writes them (cast
    after the norm, its transpose made then: nothing left for the backward pass)."""
    attn_out, ffn_act = vec.floats(attn_out), vec.floats(ffn_act)
    outputs, norm_written = vec.floats(outputs), vec.floats(norm_written)
    with_pass = FP8_CAST_TRANSPOSE_BYTES + FP8_AMAX_PASS_BYTES
    fwd = with_pass * attn_out + FP8_CAST_TRANSPOSE_BYTES * ffn_act
    fwd = fwd + FP8_NORM_CAST_BYTES * norm_written
    return fwd, with_pass * outputs


def fp8_cast_bytes(
    row_inputs: ArrayLike, outputs: ArrayLike, norm_written: ArrayLike, norm_used: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per token that an FP8 layer's operand casts move (forward, backward), from the
    elements per token of the row-parallel GEMMs' inputs (the attention output, the FFN's
    activation: TE casts them), of every GEMM's output (whose gradient it casts), and of the
    layer norms' outputs as written (each rank's part, under sequence parallelism) and as the
    column-parallel GEMMs read them (gathered)."""
    row_inputs, outputs = vec.floats(row_inputs), vec.floats(outputs)
    norm_written, norm_used = vec.floats(norm_written), vec.floats(norm_used)
    fwd = FP8_CAST_TRANSPOSE_BYTES * row_inputs - FP8_NORM_WRITE_SAVED_BYTES * norm_written
    bwd = FP8_CAST_TRANSPOSE_BYTES * outputs + FP8_NORM_TRANSPOSE_BYTES * norm_used
    return fwd, bwd


# Architectures on which the law above was checked against a published sweep; others keep
# the large-GEMM rate for every shape (no published sweep here for them).
MEASURED_ARCHS = frozenset({"hopper", "blackwell"})


def store_bytes_per_s(arch: str, hbm_bytes_per_s: float) -> float:
    """The bandwidth GEMM outputs are stored at: HBM's on a measured architecture, else
    infinite (no store cost: the large-GEMM rate for every shape)."""
    return hbm_bytes_per_s if arch in MEASURED_ARCHS else np.inf


def epilogue_k(flops_per_s: float, hbm_bytes_per_s: float, out_bytes: float = OUT_BYTES) -> float:
    """K (elements) whose main-loop time equals the store of one output element: k0."""
    return flops_per_s * out_bytes / (2.0 * hbm_bytes_per_s)


def gemm_efficiency(
    k: ArrayLike, flops_per_s: float, hbm_bytes_per_s: float, out_bytes: float = OUT_BYTES
) -> np.ndarray:
    """A GEMM's rate over the large-GEMM rate ``flops_per_s``: K / (K + k0)."""
    k = vec.floats(k)
    return k / (k + epilogue_k(flops_per_s, hbm_bytes_per_s, out_bytes))


def gemm_seconds(
    flops: ArrayLike,
    out_elems: ArrayLike,
    flops_per_s: float,
    hbm_bytes_per_s: float,
    out_bytes: float = OUT_BYTES,
) -> np.ndarray:
    """Seconds of GEMMs doing ``flops`` and storing ``out_elems`` output elements."""
    flops, out_elems = vec.floats(flops), vec.floats(out_elems)
    return flops / flops_per_s + out_elems * out_bytes / hbm_bytes_per_s
