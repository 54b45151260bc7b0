"""The rate of fused (flash) attention kernels, by sequence length, mask and pass.

A large matmul runs near the GPU's sustained matmul rate; a fused attention kernel does not:
its tiles alternate matmuls with the softmax, and its work per tile is bounded by the head
dimension. Published kernel benchmarks (``catalog/data/kernels/attention.toml``) give the rate
by sequence length for the forward pass with and without a causal mask and for the backward
pass. A GPU of the architecture the table was measured on gets the table's rates scaled to its
own sustained matmul rate (the benchmark ran unthrottled); on architectures without a table
attention keeps the matmul rate.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from fabricplan.catalog import Gpu


@dataclass(frozen=True)
class AttentionTable:
    seq_len: np.ndarray
    forward: np.ndarray  # TFLOP/s, no mask
    forward_causal: np.ndarray
    backward: np.ndarray  # no mask
    burst_matmul_tflops: float  # the measuring GPU's large-matmul rate, same conditions
    source: str

    def shares(self, seq_len: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward rates as shares of the measuring GPU's matmul rate, at
        ``seq_len`` (interpolated in log2 of the length, held at the table's ends)."""
        x = np.log2(np.asarray(seq_len, float))
        at = lambda y: np.interp(x, np.log2(self.seq_len), y)  # noqa: E731
        fwd = at(self.forward_causal if causal else self.forward)
        # the backward pass loses to the mask what the forward pass does at that length
        bwd = at(self.backward) * (at(self.forward_causal) / at(self.forward) if causal else 1.0)
        return fwd / self.burst_matmul_tflops, bwd / self.burst_matmul_tflops


@cache
def tables() -> dict[str, AttentionTable]:
    path = resources.files("fabricplan.catalog") / "data" / "kernels" / "attention.toml"
    text = path.read_text()
    out = {}
    for arch, t in tomllib.loads(text).items():
        out[arch] = AttentionTable(
            np.array(t["seq_len"], float),
            np.array(t["forward"], float),
            np.array(t["forward_causal"], float),
            np.array(t["backward"], float),
            float(t["burst_matmul_tflops"]),
            t["source"],
        )
    return out


def attention_rates(
    gpu: Gpu, matmul_flops_per_s: float, seq_len: np.ndarray, causal: bool
) -> tuple[np.ndarray, np.ndarray]:
    """FLOP/s of fused attention's forward and backward passes on ``gpu`` whose sustained
    BF16 matmul rate is ``matmul_flops_per_s``; without a table, that rate for both."""
    t = tables().get(gpu.arch)
    if t is None:
        rate = np.full(np.shape(seq_len), matmul_flops_per_s)
        return rate, rate
    fwd, bwd = t.shares(seq_len, causal)
    return fwd * matmul_flops_per_s, bwd * matmul_flops_per_s
