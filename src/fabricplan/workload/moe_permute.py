"""The tokens' permutation around a MoE layer's expert all-to-alls: memory-bound copies that every
MoE layer runs beside its GEMMs, in every pass.

Megatron-Core's all-to-all dispatcher (core_v0.14.0, transformer/moe/token_dispatcher.py,
``MoEAlltoAllTokenDispatcher``, with the fused kernels of ``moe_permute_fusion``: Transformer
Engine's ``moe_permute``, ``moe_sort_chunks_by_index`` and ``moe_unpermute``) moves a token's
hidden state four times in the forward pass:
- permutation 1 (``dispatch_preprocess``): each of the token's ``top_k`` copies is gathered
  into expert order, a read and a write per copy;
- permutation 2 (``dispatch_postprocess``): where a GPU holds more than one expert, the copies
  it received are sorted from (source rank, expert) to (expert, source rank) order, a read and
  a write per copy;
- unpermutation 2 (``combine_preprocess``): the experts' outputs sorted back, likewise;
- unpermutation 1 (``combine_postprocess``): the copies read and summed, weighted by their
  routing probabilities, into one output per token, written once.
The backward pass runs each op's gradient: the sorts again (a read and a write per copy each),
unpermutation 1's gradient writes each copy's gradient from the token's and reads the forward
copy for the probabilities' gradient (a read of the token's gradient per copy, a write, a read),
and permutation 1's sums the copies' gradients into the token's (a read per copy, a write per
token). The hierarchical dispatcher (``MoEFlexTokenDispatcher``, DeepEP / HybridEP) receives
the tokens already grouped by rank and permutes them once by local expert
(``_DeepepManager.get_permuted_hidden_states_by_experts``), with no sorts.

Elements are BF16 hidden states (``ACT_BYTES``). A gather reading the same token for several
copies is counted once per copy: what the cache saves of it is left out, so the figure errs on
the slow side. The router (a hidden x experts GEMM and a top-k over the scores) is small beside
these and not priced.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec
from fabricplan.workload.shapes import Shape

# Elements moved per expert copy of a token, per pass: forward, permutation 1's read and write
# and unpermutation 1's read; backward, unpermutation 1's gradient (read the token's gradient,
# write the copy's, read the forward copy) and permutation 1's (read the copy's gradient).
PERMUTE_ELEMS_PER_COPY_FWD = 3.0
PERMUTE_ELEMS_PER_COPY_BWD = 4.0
# Per token, per pass: unpermutation 1 writes the token's output (forward), permutation 1's
# gradient the token's gradient (backward).
PERMUTE_ELEMS_PER_TOKEN = 1.0
# Per copy, per pass, where a GPU holds several experts and the all-to-all dispatcher runs:
# the two sorts by local expert, a read and a write each.
SORT_ELEMS_PER_COPY = 4.0


def permutation_elems(
    s: Shape, ep: ArrayLike, dispatch: str
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Hidden-state elements a MoE layer moves per token (forward, backward) to permute its
    tokens for ``dispatch`` (alltoall | hierarchical) over expert-parallel groups of ``ep``
    ranks; (0, 0) for a dense model."""
    if not s.experts:
        return 0.0, 0.0
    k, h = float(s.top_k), float(s.hidden)
    sorts = 0.0
    if dispatch != "hierarchical":
        sorts = vec.where(s.experts / vec.floats(ep) > 1, SORT_ELEMS_PER_COPY, 0.0)
    fwd = ((PERMUTE_ELEMS_PER_COPY_FWD + sorts) * k + PERMUTE_ELEMS_PER_TOKEN) * h
    bwd = ((PERMUTE_ELEMS_PER_COPY_BWD + sorts) * k + PERMUTE_ELEMS_PER_TOKEN) * h
    return fwd, bwd
