"""The rate of fused (flash) attention kernels, by head dimension, sequence length, mask and
pass.

A large matmul runs near the GPU's sustained matmul rate; a fused attention kernel does not:
its tiles alternate matmuls with the softmax, and its work per tile is bounded by the head
dimension (a head of 64 does half the matmul work of 128 per softmax element, and runs at about
two thirds of its rate). Published kernel benchmarks (``catalog/data/kernels/attention.toml``)
give the rate by head dimension and sequence length for the forward pass with and without a
causal mask and for the backward pass. A GPU of the architecture the table was measured on gets
the table's rates scaled to its own sustained matmul rate (the benchmark ran unthrottled); on
architectures without a table attention keeps the matmul rate. Where the backward pass was
measured with the causal mask too (Blackwell's table), that is its causal rate.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from fabricplan.catalog import Gpu
from fabricplan.workload import vec

# The head dimension the step model assumes where none is given: the common one (Llama, GPT-3,
# Megatron's GPT models).
DEFAULT_HEAD_DIM = 128


@dataclass(frozen=True, eq=False)  # hashed by identity: one table per architecture
class AttentionTable:
    seq_len: np.ndarray  # (S,)
    head_dims: np.ndarray  # (H,) the forward pass was measured at
    forward: np.ndarray  # (H, S) TFLOP/s, no mask
    forward_causal: np.ndarray  # (H, S)
    backward_head_dims: np.ndarray  # (B,) the backward pass was measured at
    backward: np.ndarray  # (B, S) no mask
    backward_causal: np.ndarray | None  # (B, S) with the mask, where measured
    burst_matmul_tflops: float  # the measuring GPU's large-matmul rate, same conditions
    source: str

    def shares(
        self, seq_len: np.ndarray, causal: bool, head_dim: float = DEFAULT_HEAD_DIM
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward rates as shares of the measuring GPU's matmul rate, at
        ``seq_len`` and ``head_dim`` (bilinear in log2 of both, held at the table's ends)."""
        plain, masked, backward, backward_masked = _rows(self, float(head_dim))
        x = np.log2(vec.floats(seq_len))
        lengths = np.log2(self.seq_len)
        fwd = np.interp(x, lengths, masked if causal else plain)
        if causal and backward_masked is not None:
            bwd = np.interp(x, lengths, backward_masked)
        elif causal:  # the backward pass loses to the mask what the forward pass does there
            bwd = np.interp(x, lengths, backward) * fwd / np.interp(x, lengths, plain)
        else:
            bwd = np.interp(x, lengths, backward)
        return fwd / self.burst_matmul_tflops, bwd / self.burst_matmul_tflops


@lru_cache(maxsize=64)
def _rows(
    t: AttentionTable, head_dim: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The table's rows (forward, causal forward, backward, causal backward where measured; by
    length) at ``head_dim``,
    linear in log2 of the head dimension between the measured ones (a model's head size is
    fixed, so each is worked out once)."""
    d = np.log2(head_dim)

    def at(dims: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.array([np.interp(d, np.log2(dims), col) for col in rows.T])

    return (
        at(t.head_dims, t.forward),
        at(t.head_dims, t.forward_causal),
        at(t.backward_head_dims, t.backward),
        None if t.backward_causal is None else at(t.backward_head_dims, t.backward_causal),
    )


@cache
def tables() -> dict[str, AttentionTable]:
    path = resources.files("fabricplan.catalog") / "data" / "kernels" / "attention.toml"
    out = {}
    for arch, t in tomllib.loads(path.read_text()).items():
        rows = sorted(t["head_dim"], key=lambda r: r["head_dim"])
        bwd = [r for r in rows if "backward" in r]
        masked = [r["backward_causal"] for r in bwd if "backward_causal" in r]
        if masked and len(masked) != len(bwd):
            raise ValueError(f"{arch}: give backward_causal on every head dimension or none")
        out[arch] = AttentionTable(
            np.array(t["seq_len"], float),
            np.array([r["head_dim"] for r in rows], float),
            np.array([r["forward"] for r in rows], float),
            np.array([r["forward_causal"] for r in rows], float),
            np.array([r["head_dim"] for r in bwd], float),
            np.array([r["backward"] for r in bwd], float),
            np.array(masked, float) if masked else None,
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
