"""What each pipeline stage holds: decoder layers, multi-token-prediction (MTP) modules and the
output head with its loss, by default or as a layout names them.

Megatron-Core's ``pipeline_model_parallel_layout`` (core_v0.14.0,
transformer/pipeline_parallel_layer_layout.py) writes the model as virtual stages (chunks)
separated by ``|``: ``E`` the embedding, ``t`` a decoder layer, ``m`` an MTP module, ``L`` the
loss with the output head; ``(...)*n`` and ``x*n`` repeat, commas are cosmetic. Chunk ``c`` runs
on stage ``c % pp``, so a layout of pp x vp chunks gives each stage vp of them. Megatron-Bridge's
DeepSeek-V3 runs use such layouts to keep the stage with the head and the MTP module light
(61 layers: ``Et|(tt|)*30mL`` over 8 x 4 chunks on H100, ``Et*4|(t*4|)*14tmL`` over 16).

Without a layout the layers are split evenly, the model's ``ceil(layers / pp)`` on the busiest
stage, which also holds the head and, as Megatron-Core places them, the MTP modules.

An MTP module (DeepSeek-V3 Technical Report, arXiv 2412.19437, Sec. 2.2) is a transformer layer
fed by a projection of two hidden states (2h -> h), followed by its own pass through the shared
output head and a loss: priced as one more layer, one more head and that projection. The
embedding is a lookup and costs nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.scenario.layout import LayoutError, check_layout, chunks
from fabricplan.workload import vec


@dataclass(frozen=True)
class StageLoad:
    """What one pipeline stage runs per micro-batch, over all its chunks."""

    layers: int  # decoder layers
    mtp: int  # MTP modules, each a layer, a projection and a head of its own
    heads: int  # output heads with their loss: the model's and one per MTP module

    @property
    def units(self) -> int:
        """Transformer layers the stage runs, the MTP modules' included."""
        return self.layers + self.mtp


@lru_cache(maxsize=256)
def stages_in_order(text: str, pp: int) -> tuple[tuple[StageLoad, bool], ...]:
    """Each stage's load, first to last, and whether it holds the input embedding (chunk c on
    stage c % pp)."""
    parts = chunks(text)
    out = []
    for stage in range(pp):
        held = "".join(parts[stage::pp])
        mtp = held.count("m")
        out.append((StageLoad(held.count("t"), mtp, held.count("L") + mtp), "E" in held))
    return tuple(out)


def stage_loads(text: str, pp: int) -> tuple[StageLoad, ...]:
    """The distinct loads of the layout's stages."""
    return tuple(dict.fromkeys(load for load, _ in stages_in_order(text, pp)))


def busiest_stage(
    layers: int,
    pp: ArrayLike,
    vp: ArrayLike,
    layout: str | None,
    mtp_layers: int,
    even_layers: ArrayLike,
    per_layer: ArrayLike,
    head: ArrayLike,
    mtp_proj: ArrayLike,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(transformer layers, heads, MTP modules) per micro-batch of the stage that sets the
    pipeline's pace: of the layout's stages, the one whose layers (``per_layer`` seconds each,
    their communication included), heads (``head``) and MTP projections (``mtp_proj``) take
    longest; without a layout, ``even_layers`` with the head and the MTP modules."""
    if layout is None:
        return (
            vec.floats(even_layers) + mtp_layers,
            vec.full(even_layers, 1.0 + mtp_layers),
            vec.full(even_layers, float(mtp_layers)),
        )
    pps, vps = set(np.ravel(pp).tolist()), set(np.ravel(vp).tolist())
    if len(pps) != 1 or len(vps) != 1:
        raise LayoutError("plans of different pp or vp cannot share one pipeline layout")
    stages, chunks_per_stage = int(pps.pop()), int(vps.pop())
    check_layout(layout, layers, mtp_layers, stages, chunks_per_stage)
    best = None
    for load in stage_loads(layout, stages):
        cost = load.units * per_layer + load.heads * head + load.mtp * mtp_proj
        if best is None:
            best = (
                cost,
                vec.full(cost, load.units),
                vec.full(cost, load.heads),
                vec.full(cost, load.mtp),
            )
            continue
        more = cost > best[0]
        best = (
            vec.maximum(cost, best[0]),
            vec.where(more, load.units, best[1]),
            vec.where(more, load.heads, best[2]),
            vec.where(more, load.mtp, best[3]),
        )
    assert best is not None
    return best[1], best[2], best[3]
