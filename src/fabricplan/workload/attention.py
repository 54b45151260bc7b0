"""The rate of fused (flash) attention kernels, by head dimension, sequence length, mask and
pass.

A large matmul runs near the GPU's sustained matmul rate; a fused attention kernel does not:
its tiles alternate matmuls with the softmax, and its work per tile is bounded by the head
dimension (a head of 64 does half the matmul work of 128 per softmax element, and runs at about
two thirds of its rate). Published kernel benchmarks (``catalog/data/kernels/attention.toml``)
give the rate by head dimension and sequence length for the forward pass with and without a
causal mask and for the backward pass. A GPU of the architecture the table was measured on gets
the table's rates scaled to its own sustained matmul rate (the benchmark ran unthrottled); on
architectures without a table attention keeps the matmul rate. A table measured with the causal
mask only (Blackwell's) gives both passes with it, and has no rate without the mask.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from fabricplan.catalog import Gpu

# The head dimension the step model assumes where none is given: the common one (Llama, GPT-3,
# Megatron's GPT models).
DEFAULT_HEAD_DIM = 128


@dataclass(frozen=True, eq=False)  # hashed by identity: one table per architecture
class AttentionTable:
    seq_len: np.ndarray  # (S,)
    head_dims: np.ndarray  # (H,) the forward pass was measured at
    forward: np.ndarray | None  # (H, S) TFLOP/s, no mask (None: measured with the mask only)
    forward_causal: np.ndarray  # (H, S)
    backward_head_dims: np.ndarray  # (B,) the backward pass was measured at
    backward: np.ndarray  # (B, S) no mask, or with it when ``backward_causal``
    backward_causal: bool  # the backward pass was measured with the causal mask
    burst_matmul_tflops: float  # the measuring GPU's large-matmul rate, same conditions
    source: str

    def shares(
        self, seq_len: np.ndarray, causal: bool, head_dim: float = DEFAULT_HEAD_DIM
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward rates as shares of the measuring GPU's matmul rate, at
        ``seq_len`` and ``head_dim`` (bilinear in log2 of both, held at the table's ends)."""
        if not causal and self.forward is None:
            raise ValueError(f"{self.source}: measured with a causal mask only")
        plain, masked, backward = _rows(self, float(head_dim))
        x = np.log2(np.asarray(seq_len, float))
        lengths = np.log2(self.seq_len)
        fwd = np.interp(x, lengths, masked if causal else plain)
        bwd = np.interp(x, lengths, backward)
        # the backward pass loses to the mask what the forward pass does at that length
        if causal and not self.backward_causal:
            bwd = bwd * fwd / np.interp(x, lengths, plain)
        return fwd / self.burst_matmul_tflops, bwd / self.burst_matmul_tflops


@lru_cache(maxsize=64)
def _rows(t: AttentionTable, head_dim: float) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The table's three rows (forward, causal forward, backward; by length) at ``head_dim``,
    linear in log2 of the head dimension between the measured ones (a model's head size is
    fixed, so each is worked out once)."""
    d = np.log2(head_dim)

    def at(dims: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.array([np.interp(d, np.log2(dims), col) for col in rows.T])

    return (
        None if t.forward is None else at(t.head_dims, t.forward),
        at(t.head_dims, t.forward_causal),
        at(t.backward_head_dims, t.backward),
    )


@cache
def tables() -> dict[str, AttentionTable]:
    path = resources.files("fabricplan.catalog") / "data" / "kernels" / "attention.toml"
    out = {}
    for arch, t in tomllib.loads(path.read_text()).items():
        rows = sorted(t["head_dim"], key=lambda r: r["head_dim"])
        masked_only = t.get("mask") == "causal"  # both passes measured with the mask, only
        pass_back = "backward_causal" if masked_only else "backward"
        bwd = [r for r in rows if pass_back in r]
        out[arch] = AttentionTable(
            np.array(t["seq_len"], float),
            np.array([r["head_dim"] for r in rows], float),
            None if masked_only else np.array([r["forward"] for r in rows], float),
            np.array([r["forward_causal"] for r in rows], float),
            np.array([r["head_dim"] for r in bwd], float),
            np.array([r[pass_back] for r in bwd], float),
            masked_only,
            float(t["burst_matmul_tflops"]),
            t["source"],
        )
    return out


def attention_rates(
    gpu: Gpu,
    matmul_flops_per_s: float,
    seq_len: np.ndarray,
    causal: bool,
    head_dim: float = DEFAULT_HEAD_DIM,
) -> tuple[np.ndarray, np.ndarray]:
    """FLOP/s of fused attention's forward and backward passes on ``gpu`` whose sustained
    BF16 matmul rate is ``matmul_flops_per_s``, at head dimension ``head_dim``; without a
    table, that rate for both."""
    t = tables().get(gpu.arch)
    if t is None:
        rate = np.full(np.shape(seq_len), matmul_flops_per_s)
        return rate, rate
    fwd, bwd = t.shares(seq_len, causal, head_dim)
    return fwd * matmul_flops_per_s, bwd * matmul_flops_per_s
